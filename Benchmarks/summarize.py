#!/usr/bin/env python3
"""Turns the harness's JSON-line summaries (one per benchmark, written by BenchmarkSupport in each
benchmark's teardown) into RESULTS.md: the machine, absolute figures, and ratios against the peers
measured in the same run. Called by run.sh; standard library only."""

import argparse
import datetime
import json
import os
import platform
import re
import subprocess

# (figure, LogStore id, [(peer label, peer id)], note). A ratio is LogStore ops/s over peer ops/s:
# above 1 means LogStore is faster. Add a line here when a suite adds a figure.
FIGURES = [
    ("P1 durable append, 1 thread", "P1.logstore", [
        ("raw pwrite+fdatasync, zero-filled file", "raw.prealloc.sync"),
        ("raw pwrite+fdatasync, growing file", "raw.append.sync"),
        ("SQLite WAL FULL, 1 thread", "sqlite.full.1"),
        ("SQLite WAL NORMAL, 1 thread", "sqlite.normal.1"),
    ], "Same durability as SQLite FULL; SQLite NORMAL in WAL mode does not fdatasync at commit."),
    ("P2 durable append, 8 threads", "P2.logstore", [
        ("raw pwrite+fdatasync, zero-filled file (1 thread)", "raw.prealloc.sync"),
        ("raw pwrite+fdatasync, growing file (1 thread)", "raw.append.sync"),
        ("SQLite WAL FULL, 8 threads", "sqlite.full.8"),
        ("SQLite WAL NORMAL, 8 threads", "sqlite.normal.8"),
    ], "The raw loops sync every record from one thread; above 1 here is group commit at work."),
    ("P3 append, durability none, 1 thread", "P3.logstore", [
        ("raw pwrite, zero-filled file, no sync", "raw.prealloc.nosync"),
        ("raw pwrite, growing file, no sync", "raw.append.nosync"),
        ("SQLite WAL FULL, 1 thread", "sqlite.full.1"),
        ("SQLite WAL NORMAL, 1 thread", "sqlite.normal.1"),
    ], "SQLite NORMAL (WAL) is the nearer peer: neither syncs per commit."),
]

# The model-layer figures (ModelBenchmarks): (figure, [(LogStore entry label, id)], [(peer label, peer id)],
# note). The first LogStore entry is the headline (its ratios are bold, with their range over the
# passes); ratios are saves (transactions) per second over the peer's operations per second.
MODEL_ENTRIES = lambda p: [
    ("ModelContext, new context per save", f"{p}.ctx"),
    ("ModelContext, long-lived context", f"{p}.ctx.long"),
    ("ModelContext, long-lived context holding 10,000 models", f"{p}.ctx.long10k"),
    ("store.save, no context", f"{p}.store"),
]
MODEL_FIGURES = [
    ("P1-ctx durable save of one new Trip, 1 thread", MODEL_ENTRIES("P1"), [
        ("engine P1: Log.append of 200 B, synchronous", "P1.logstore"),
        ("raw pwrite+fdatasync, zero-filled file", "raw.prealloc.sync"),
        ("SQLite+history WAL FULL, 1 thread", "sqlite.model.full.1"),
        ("SQLite+history WAL NORMAL, 1 thread", "sqlite.model.normal.1"),
        ("SQLite WAL FULL, one 200 B blob, no history", "sqlite.full.1"),
        ("ArchiveStore (JSON file) from 100 models, context per save", "P1.archive"),
    ], "SQLite FULL has LogStore's durability; NORMAL (WAL) does not fdatasync at commit. The ArchiveStore "
       "reads, decodes, re-encodes and rewrites its whole file (fsync + rename + directory fsync) per save."),
    ("P2-ctx durable save of one new Trip, 8 threads (one context each, one container)", MODEL_ENTRIES("P2"), [
        ("engine P2: Log.append of 200 B, 8 threads", "P2.logstore"),
        ("raw pwrite+fdatasync, zero-filled file (1 thread)", "raw.prealloc.sync"),
        ("SQLite+history WAL FULL, 8 threads", "sqlite.model.full.8"),
        ("SQLite+history WAL NORMAL, 8 threads", "sqlite.model.normal.8"),
    ], "Above 1 against the 1-thread raw loop is group commit at work; records per fdatasync are the log's own counts."),
    ("P3-ctx save of one new Trip, durability none, 1 thread", MODEL_ENTRIES("P3"), [
        ("engine P3: Log.append of 200 B, durability none", "P3.logstore"),
        ("raw pwrite, zero-filled file, no sync", "raw.prealloc.nosync"),
        ("SQLite+history WAL NORMAL, 1 thread", "sqlite.model.normal.1"),
        ("SQLite+history WAL FULL, 1 thread", "sqlite.model.full.1"),
    ], "No fdatasync per save on either side with SQLite NORMAL, the nearer peer: this is the CPU cost of a save."),
    ("P4-ctx durable save of 100 new Trips (one transaction), 1 thread", MODEL_ENTRIES("P4"), [
        ("SQLite+history WAL FULL, 100 rows + 100 history rows per transaction", "sqlite.model.full.100"),
        ("SQLite+history WAL NORMAL, 100 rows + 100 history rows per transaction", "sqlite.model.normal.100"),
        ("engine P1: Log.append of 200 B, synchronous (1 record per save)", "P1.logstore"),
    ], "Both sides commit 100 rows per transaction, so the ratio is the same in rows per second; against the engine's "
       "one-record append it says what 100 changes cost on top of one durable append."),
]


def median(values):
    values = sorted(values)
    if not values:
        return 0
    middle = len(values) // 2
    return values[middle] if len(values) % 2 else (values[middle - 1] + values[middle]) / 2


def read_summaries(path):
    """id -> the per-pass summaries of that benchmark."""
    passes = {}
    if os.path.exists(path):
        with open(path) as handle:
            for line in handle:
                line = line.strip()
                if line:
                    entry = json.loads(line)
                    passes.setdefault(entry["id"], []).append(entry)
    return {key: aggregate(entries) for key, entries in passes.items()}


def aggregate(entries):
    """One figure per benchmark over the passes: medians, the ops/s range, counters summed."""
    first = entries[0]
    rates = [e["opsPerSecond"] for e in entries]
    latency = {key: median([e["latencyMicroseconds"][key] for e in entries]) for key in ("p50", "p90", "p99", "p999", "mean")}
    latency["max"] = max(e["latencyMicroseconds"]["max"] for e in entries)
    counters = {}
    for entry in entries:
        for key, value in entry.get("counters", {}).items():
            counters[key] = counters.get(key, 0) + value
    result = dict(first)
    result.update({
        "passes": len(entries),
        "opsPerSecond": median(rates),
        "opsPerSecondMin": min(rates),
        "opsPerSecondMax": max(rates),
        "latencyMicroseconds": latency,
        "operations": sum(e["operations"] for e in entries),
        "counters": counters,
        "tailShare": median([e.get("tail", {}).get("shareOfTime", 0) for e in entries]),
        "tailOperations": sum(e.get("tail", {}).get("operations", 0) for e in entries),
        "tailThreshold": median([e.get("tail", {}).get("thresholdMicroseconds", 0) for e in entries]),
        "factsPerPass": [e.get("facts", {}) for e in entries],
    })
    if "megabytesPerSecond" in first:
        result["megabytesPerSecond"] = median([e["megabytesPerSecond"] for e in entries])
    return result


def read_framework_throughput(paths):
    """Median over the passes of the framework's p50 throughput per benchmark name, from its
    markdown tables (a cross-check of the harness's figures)."""
    rates = {}
    scale = {"#": 1, "K": 1e3, "M": 1e6, "G": 1e9}
    for path in paths:
        if not os.path.exists(path):
            continue
        name = None
        with open(path) as handle:
            for line in handle:
                heading = re.match(r"^### (.+?)\s*$", line)
                if heading:
                    name = heading.group(1)
                    continue
                row = re.match(r"^\| Throughput \(# / s\) \((.)\)\s*\|(.*)$", line)
                if row and name:
                    cells = [c.strip() for c in row.group(2).split("|")]
                    # columns: p0 p25 p50 p75 p90 p99 p100 samples
                    try:
                        rates.setdefault(name, []).append(float(cells[2]) * scale.get(row.group(1), 1))
                    except (ValueError, IndexError):
                        pass
    return {name: median(values) for name, values in rates.items()}


def command_output(arguments):
    try:
        return subprocess.run(arguments, capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def machine(bench_dir):
    cpu = "unknown"
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    df = command_output(["df", "-T", bench_dir]).splitlines()
    fs_type, device = "unknown", "unknown"
    if len(df) >= 2:
        fields = df[1].split()
        device, fs_type = fields[0], fields[1]
    memory = "unknown"
    try:
        with open("/proc/meminfo") as handle:
            kib = int(handle.readline().split()[1])
            memory = f"{kib / 1024 / 1024:.0f} GiB"
    except (OSError, ValueError, IndexError):
        pass
    return {
        "nproc": str(os.cpu_count()),
        "cpu": cpu,
        "memory": memory,
        "kernel": platform.release(),
        "fs": f"{fs_type} on {device}",
        "swift": command_output(["swift", "--version"]).splitlines()[0] if command_output(["swift", "--version"]) != "unknown" else "unknown",
    }


def fmt_rate(value):
    if value >= 1e6:
        return f"{value / 1e6:.2f} M"
    if value >= 1e4:
        return f"{value / 1e3:.1f} K"
    return f"{value:,.0f}"


def fmt_us(value):
    if value >= 100:
        return f"{value:,.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def fmt_ratio(value):
    return f"{value:.2f}" if value < 10 else f"{value:.1f}"


def records_per_sync(entry):
    counters = entry.get("counters", {})
    records, syncs = counters.get("records"), counters.get("fdatasyncs")
    if records is None or syncs is None:
        return None
    return (records / syncs) if syncs else float("inf")


def fact_median(entry, key):
    """The median over the passes of a numeric fact, or None."""
    values = []
    for facts in entry.get("factsPerPass", [entry.get("facts", {})]):
        try:
            values.append(float(facts[key]))
        except (KeyError, TypeError, ValueError):
            pass
    return median(values) if values else None


def rows_per_operation(entry):
    return fact_median(entry, "insertsPerSave") or fact_median(entry, "rowsPerSave") or 1


def ratio_cell(own, peer, bold=False, with_range=False):
    if own is None or peer is None or not peer["opsPerSecond"] or not own["opsPerSecond"]:
        return "–"
    ratio = own["opsPerSecond"] / peer["opsPerSecond"]
    text = f"**{fmt_ratio(ratio)}**" if bold else fmt_ratio(ratio)
    if with_range:
        low = own["opsPerSecondMin"] / peer["opsPerSecondMax"]
        high = own["opsPerSecondMax"] / peer["opsPerSecondMin"]
        text += f" ({fmt_ratio(low)}–{fmt_ratio(high)})"
    return text


def model_sections(results):
    """The ModelContext figures: each LogStore entry point, then its ratios to the peers."""
    out = ["## Through ModelContext (P1-ctx–P4-ctx)\n"]
    out.append("A save inserts new SampleTrips `Trip`s (unique name, a destination, start and end dates, an empty bucket "
               "list, no accommodation; unique on name + start + end, as in Sources/SampleTrips) and calls "
               "`try context.save()` (synchronous). Three ways into LogStore: a **new `ModelContext` per save** (the "
               "headline: the context's steady per-save cost), a **long-lived context** per thread (an app's main "
               "context: every saved Trip stays registered and each `save()` re-encodes and compares every registered "
               "model, so its saves slow down as the benchmark runs — the figure depends on the run's length, see "
               "*registered at end*), and **`store.save`** with the request's snapshots built directly (the store "
               "without the context). The SQLite peer has the same model as tables (`trip` with a unique index on "
               "name + start + end) and a `history` table keyed by an autoincrement id (the token), one history row "
               "per change written in the same transaction — what LogStore's log gives for free — through cached "
               "prepared statements (SQLite's best case: no ORM, no model layer). Engine and raw figures come from "
               "the engine suite of the same run. Ratios are saves per second over the peer's transactions (or "
               "appends) per second; above 1 = LogStore faster.\n")
    for title, entries, peers, note in MODEL_FIGURES:
        present = [(label, results.get(key)) for label, key in entries if results.get(key)]
        out.append(f"### {title}\n")
        if not present:
            out.append("(not run)\n")
            continue
        rows = rows_per_operation(present[0][1])
        unit = "saves/s" if rows == 1 else f"saves/s ({rows:.0f} Trips each)"
        out.append(f"| LogStore | {unit} | {'Trips/s | ' if rows != 1 else ''}p50 µs | p99 µs | range over passes | notes |")
        out.append(f"|:--|--:|{'--:|' if rows != 1 else ''}--:|--:|--:|:--|")
        for label, entry in present:
            latency = entry["latencyMicroseconds"]
            notes = []
            rps = records_per_sync(entry)
            if rps is not None and rps != float("inf"):
                notes.append(f"{rps:,.2f} records per fdatasync")
            registered = fact_median(entry, "registeredPerContextAtEnd")
            if registered is not None:
                notes.append(f"registered at end: {registered:,.0f} per context")
            trips = f"{fmt_rate(entry['opsPerSecond'] * rows)} | " if rows != 1 else ""
            out.append(f"| {label} | **{fmt_rate(entry['opsPerSecond'])}** | {trips}{fmt_us(latency['p50'])} | "
                       f"{fmt_us(latency['p99'])} | {fmt_rate(entry['opsPerSecondMin'])}–{fmt_rate(entry['opsPerSecondMax'])} | "
                       f"{'; '.join(notes)} |")
        out.append("")
        header = "| Peer | peer ops/s | peer p50 µs | " + " | ".join(f"{label} ÷ peer" for label, _ in present) + " |"
        out.append(header)
        out.append("|:--|--:|--:|" + "--:|" * len(present))
        for peer_label, peer_id in peers:
            peer = results.get(peer_id)
            if peer is None:
                out.append(f"| {peer_label} | (not run) | |" + " |" * len(present))
                continue
            peer_rows = rows_per_operation(peer)
            rate = fmt_rate(peer["opsPerSecond"]) + (f" ({fmt_rate(peer['opsPerSecond'] * peer_rows)} rows/s)" if peer_rows != 1 else "")
            cells = [ratio_cell(entry, peer, bold=(index == 0), with_range=(index == 0)) for index, (_, entry) in enumerate(present)]
            out.append(f"| {peer_label} | {rate} | {fmt_us(peer['latencyMicroseconds']['p50'])} | " + " | ".join(cells) + " |")
        out.append(f"\n{note} The headline column gives, in parentheses, the range pairing the extremes of both sides "
                   "over the passes.\n")
    return out


def bytes_section(results):
    """P7: on-disk bytes per transaction for the one-Trip insert (and the 100-Trip one)."""
    out = ["## P7 bytes per transaction\n"]
    out.append("What a save leaves on disk. LogStore: growth of the log's end offset (`logEndOffset`) per save over the "
               "measured saves — the whole on-disk cost, record header (32 bytes) included; the payload holds the "
               "transaction's timestamp, author, process identifier and the inserted values (LZ4-compressed when that "
               "makes it smaller: against the segment's dictionary, FORMAT.md §6.8, from 16 bytes; without one from "
               "128 bytes). A new store's first 32 KiB of payloads are stored before its first dictionary exists, and "
               "the dictionary record (LZ4, about 32 KiB raw) counts too. SQLite: growth of database + WAL, after a TRUNCATE checkpoint at the "
               "end of the run, over the empty schema, divided by the rows written (one `trip` row, its unique-index "
               "entry and one `history` row each). ArchiveStore: the JSON file's size over the models it holds (it "
               "is rewritten whole by every save).\n")
    out.append("| Store | Trips per save | bytes per save | bytes per Trip | LogStore ÷ SQLite FULL (per Trip) | measured over |")
    out.append("|:--|--:|--:|--:|--:|:--|")

    def log_bytes(entry):
        counters = entry.get("counters", {}) if entry else {}
        if not counters.get("saves") or "logBytes" not in counters:
            return None
        return counters["logBytes"] / counters["saves"], counters["saves"]

    sqlite_per_row = {}
    for rows, key in ((1, "sqlite.model.full.1"), (100, "sqlite.model.full.100")):
        entry = results.get(key)
        if entry:
            sqlite_per_row[rows] = fact_median(entry, "bytesPerRow")
    for label, rows, keys in (("LogStore log", 1, ("P1.ctx", "P1.store", "P1.ctx.long")),
                              ("LogStore log", 100, ("P4.ctx", "P4.store", "P4.ctx.long"))):
        entry = next((results[k] for k in keys if log_bytes(results.get(k))), None)
        if entry is None:
            continue
        per_save, saves = log_bytes(entry)
        comparison = sqlite_per_row.get(rows)
        ratio = fmt_ratio(per_save / rows / comparison) if comparison else "–"
        process = fact_median(entry, "processIdentifierBytes")
        extra = f"; of which {process:.0f} B process identifier per record" if process else ""
        counters = entry.get("counters", {})
        if counters.get("payloadBytes"):
            stored = counters["storedPayloadBytes"] / counters["payloadBytes"]
            extra += f"; payloads stored ÷ raw {stored:.2f}"
        out.append(f"| {label} (`{entry['id']}`) | {rows} | {per_save:,.1f} | {per_save / rows:,.1f} | {ratio} | "
                   f"{saves:,.0f} saves over {entry['passes']} passes{extra} |")
    for rows, key in ((1, "sqlite.model.full.1"), (100, "sqlite.model.full.100"), (1, "sqlite.model.normal.1")):
        entry = results.get(key)
        per_row = fact_median(entry, "bytesPerRow") if entry else None
        if per_row is None:
            continue
        rows_at_end = fact_median(entry, "rowsAtEnd")
        out.append(f"| SQLite+history WAL {entry['facts'].get('synchronous', '?')} (`{key}`) | {rows} | {per_row * rows:,.1f} | "
                   f"{per_row:,.1f} | | after {rows_at_end:,.0f} rows (median over passes) |")
    archive = results.get("P1.archive")
    if archive:
        size, models = fact_median(archive, "archiveBytesAtEnd"), fact_median(archive, "modelsAtEnd")
        if size and models:
            out.append(f"| ArchiveStore JSON file (`P1.archive`) | 1 | {size:,.0f} (whole file, rewritten) | {size / models:,.1f} "
                       f"| | {models:,.0f} models at end (median) |")
    out.append("")
    return out


def extra_column(entry):
    parts = []
    rps = records_per_sync(entry)
    if rps is not None:
        parts.append("records/fdatasync " + ("∞ (none)" if rps == float("inf") else f"{rps:.2f}"))
        rolls = entry["counters"].get("rolls", 0)
        if rolls:
            parts.append(f"{rolls:.0f} rolls")
    counters = entry.get("counters", {})
    if "storedBytes" in counters and counters.get("inputBytes"):
        parts.append(f"{entry.get('megabytesPerSecond', 0):,.0f} MB/s, stored/input {counters['storedBytes'] / counters['inputBytes']:.3f}")
    facts = entry.get("facts", {})
    if "journal_mode" in facts:
        parts.append(f"{facts['connection']}, journal_mode={facts['journal_mode']}, synchronous={facts['synchronous']}")
    if "layer" in facts:
        parts.append(f"{facts.get('store', '?')}, {facts['layer']}")
    rows = rows_per_operation(entry)
    if rows != 1:
        parts.append(f"{rows:.0f} rows per save ({fmt_rate(entry['opsPerSecond'] * rows)} rows/s)")
    registered = fact_median(entry, "registeredPerContextAtEnd")
    if registered is not None:
        parts.append(f"{registered:,.0f} registered per context at end")
    models = fact_median(entry, "modelsAtEnd")
    if models is not None:
        parts.append(f"{fact_median(entry, 'modelsAtStart') or 0:,.0f} → {models:,.0f} models")
    per_row = fact_median(entry, "bytesPerRow")
    if per_row is not None:
        parts.append(f"{per_row:,.1f} file bytes per row")
    return "; ".join(parts)


# Saver scaling (the chart): (label, colour, [(savers, id)]).
SCALING = [
    ("LogStore, ModelContext (new context per save)", "#1f6feb",
     [(1, "P1.ctx"), (2, "P2.ctx.2"), (4, "P2.ctx.4"), (8, "P2.ctx")]),
    ("SQLite+history WAL FULL", "#d1242f",
     [(1, "sqlite.model.full.1"), (2, "sqlite.model.full.2"), (4, "sqlite.model.full.4"), (8, "sqlite.model.full.8")]),
]


def scaling_svg(results):
    """An SVG line chart of durable saves per second against the number of savers, or None when
    no series has two points. Standard library only; the axes start at zero."""
    series = []
    for label, colour, points in SCALING:
        values = [(n, results[i]["opsPerSecond"]) for n, i in points if i in results]
        if len(values) >= 2:
            series.append((label, colour, values))
    if not series:
        return None
    width, height, left, right, top, bottom = 640, 360, 70, 20, 30, 80
    top_value = max(v for _, _, values in series for _, v in values)
    # The smallest 1-2-5 step that needs at most 6 gridlines above zero.
    step = 1
    while top_value / step > 6:
        step = step * 5 // 2 if str(step)[0] == "2" else step * 2
    y_max = step * (int(top_value / step) + 1)
    savers = [1, 2, 4, 8]

    def x(n):
        return left + savers.index(n) * (width - left - right) / (len(savers) - 1)

    def y(v):
        return top + (height - top - bottom) * (1 - v / y_max)

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
           'font-family="sans-serif" font-size="12">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="{width / 2}" y="18" text-anchor="middle" font-size="14">Durable saves of one new Trip per second vs savers</text>']
    tick = 0
    while tick <= y_max:
        out.append(f'<line x1="{left}" y1="{y(tick):.1f}" x2="{width - right}" y2="{y(tick):.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{left - 6}" y="{y(tick) + 4:.1f}" text-anchor="end">{tick:,.0f}</text>')
        tick += step
    for n in savers:
        out.append(f'<text x="{x(n):.1f}" y="{height - bottom + 18}" text-anchor="middle">{n}</text>')
    out.append(f'<text x="{(left + width - right) / 2}" y="{height - bottom + 36}" text-anchor="middle">'
               'saving threads (each with its own ModelContext / connection)</text>')
    out.append(f'<line x1="{left}" y1="{top}" x2="{left}" y2="{height - bottom}" stroke="black"/>')
    out.append(f'<line x1="{left}" y1="{height - bottom}" x2="{width - right}" y2="{height - bottom}" stroke="black"/>')
    for index, (label, colour, values) in enumerate(series):
        path = " ".join(f"{x(n):.1f},{y(v):.1f}" for n, v in values)
        out.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2"/>')
        for n, v in values:
            out.append(f'<circle cx="{x(n):.1f}" cy="{y(v):.1f}" r="3.5" fill="{colour}"><title>{label}, {n} savers: '
                       f'{v:,.0f}/s</title></circle>')
            out.append(f'<text x="{x(n):.1f}" y="{y(v) - 8:.1f}" text-anchor="middle" fill="{colour}">{fmt_rate(v)}</text>')
        legend_y = height - 22 + index * 14 - (len(series) - 1) * 7
        out.append(f'<line x1="{left}" y1="{legend_y - 4}" x2="{left + 24}" y2="{legend_y - 4}" stroke="{colour}" stroke-width="2"/>')
        out.append(f'<text x="{left + 30}" y="{legend_y}">{label}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def scaling_section(results, chart_name):
    out = ["## Saver scaling\n"]
    rows = []
    for label, _, points in SCALING:
        cells = [fmt_rate(results[i]["opsPerSecond"]) if i in results else "–" for _, i in points]
        rows.append(f"| {label} | " + " | ".join(cells) + " |")
    ratio_cells = []
    for (_, own_id), (_, peer_id) in zip(SCALING[0][2], SCALING[1][2]):
        own, peer = results.get(own_id), results.get(peer_id)
        ratio_cells.append(f"**{fmt_ratio(own['opsPerSecond'] / peer['opsPerSecond'])}**" if own and peer and peer["opsPerSecond"] else "–")
    if chart_name:
        out.append(f"![Durable saves per second against the number of savers]({chart_name})\n")
    out.append("| saves/s | 1 saver | 2 savers | 4 savers | 8 savers |")
    out.append("|:--|--:|--:|--:|--:|")
    out.extend(rows)
    out.append("| LogStore ÷ SQLite FULL | " + " | ".join(ratio_cells) + " |")
    out.append("\nEach saver is a thread inserting one new Trip per durable save; 1 saver is P1-ctx, 8 are P2-ctx; "
               "LogStore's savers share one container (concurrent saves share an fdatasync), SQLite's share a "
               "`DatabasePool` (one writer at a time).\n")
    return out


def p5_p8_section(results):
    out = []
    replay, checkpoint, memory = results.get("P5.replay"), results.get("P5.checkpoint"), results.get("P8.rss")
    if not (replay or checkpoint or memory):
        return out
    out.append("## P5 open (checkpoint + replay) and P8 resident memory\n")
    if replay:
        changes = fact_median(replay, "changesPerOpen") or 0
        records = fact_median(replay, "recordsReplayedPerOpen") or 0
        rate = replay["opsPerSecond"] * changes
        log_bytes = fact_median(replay, "logBytes") or 0
        out.append(f"The fixture: {fact_median(replay, 'entities') or 0:,.0f} Trips inserted (saves of 1,000), then "
                   f"{fact_median(replay, 'transactions') or 0:,.0f} transactions of one update each (a new "
                   f"destination) round-robin over them: {log_bytes / 1e6:,.1f} MB of log, built once with durability "
                   "`.none` and cached under `Benchmarks/.cache/fixtures/format-<format version>/`. An open is "
                   "`ModelContainer(for:configuration:)` on the store (everything folded, unique index rebuilt) "
                   "followed by `close()`, with the files in the page cache (one untimed open first).\n")
        out.append("| Open | opens/s | time per open | records replayed | changes folded per second | floor | |")
        out.append("|:--|--:|--:|--:|--:|:--|:--|")
        seconds = 1 / replay["opsPerSecond"] if replay["opsPerSecond"] else 0
        out.append(f"| full replay, no checkpoint (`P5.replay`) | {replay['opsPerSecond']:.2f} | {seconds * 1e3:,.0f} ms | "
                   f"{records:,.0f} | **{fmt_rate(rate)}** | ≥ 1.5 M changes/s | {'met' if rate >= 1.5e6 else 'missed'} |")
        if checkpoint:
            c_seconds = 1 / checkpoint["opsPerSecond"] if checkpoint["opsPerSecond"] else 0
            share = c_seconds / seconds if seconds else 0
            out.append(f"| from a checkpoint at the end of the log (`P5.checkpoint`) | {checkpoint['opsPerSecond']:.2f} | "
                       f"{c_seconds * 1e3:,.1f} ms | {fact_median(checkpoint, 'recordsReplayedPerOpen') or 0:,.0f} | | "
                       f"≤ 10 % of the full replay: **{share * 100:.1f} %** | {'met' if share <= 0.10 else 'missed'} |")
            out.append(f"\nThe checkpoint holds {fact_median(checkpoint, 'entities') or 0:,.0f} Trips in "
                       f"{fact_median(checkpoint, 'checkpointFileBytes') or 0:,.0f} bytes "
                       f"({fact_median(checkpoint, 'checkpointUncompressedBytes') or 0:,.0f} uncompressed).")
        out.append("")
    if memory:
        baseline = fact_median(memory, "rssBaselineBytes") or 0
        opened = fact_median(memory, "rssOpenBytes") or 0
        peak = fact_median(memory, "rssPeakBytes") or 0
        uncompressed = fact_median(memory, "checkpointUncompressedBytes") or 0
        entities = fact_median(memory, "entities") or 0
        growth = opened - baseline
        ratio = growth / uncompressed if uncompressed else 0
        out.append(f"P8: a store of {entities:,.0f} live Trips (inserted in saves of 1,000, then a checkpoint at the "
                   "end of the log), opened from that checkpoint. Resident set (`VmRSS`) read before the open (after "
                   "`malloc_trim`) and right after it; the peak is `VmHWM`, reset before the open.\n")
        out.append("| | bytes | per Trip | ÷ checkpoint uncompressed |")
        out.append("|:--|--:|--:|--:|")
        out.append(f"| checkpoint file | {fact_median(memory, 'checkpointFileBytes') or 0:,.0f} | "
                   f"{(fact_median(memory, 'checkpointFileBytes') or 0) / max(entities, 1):,.1f} | |")
        out.append(f"| checkpoint, uncompressed payloads | {uncompressed:,.0f} | {uncompressed / max(entities, 1):,.1f} | 1 |")
        out.append(f"| resident set growth from the open | {growth:,.0f} | {growth / max(entities, 1):,.1f} | **{fmt_ratio(ratio)}** |")
        out.append(f"| peak resident growth during the open | {peak - baseline:,.0f} | {(peak - baseline) / max(entities, 1):,.1f} | "
                   f"{fmt_ratio((peak - baseline) / uncompressed) if uncompressed else '–'} |")
        out.append(f"| process resident set after the open | {opened:,.0f} | | |")
        out.append(f"\nFloor (issue 13): resident growth ≤ 2 × the checkpoint's uncompressed bytes — {'met' if ratio <= 2 else 'missed'}.\n")
        after_saves = fact_median(memory, "rssAfterSavesBytes")
        if after_saves:
            first = fact_median(memory, "firstSaveMicroseconds") or 0
            second = fact_median(memory, "secondSaveMicroseconds") or 0
            during = fact_median(memory, "saveDuringFetchMicroseconds") or 0
            out.append("Then, as a live store (facts, not a floor): two durable one-Trip saves through a new context each, "
                       "a third while another thread's fetch scans every Trip, and the resident set after them. The working "
                       "and the published state share their rows from the open until the first save; a publish while a fetch "
                       "holds the published state copies the entity's row arrays and key index.\n")
            out.append("| | figure |")
            out.append("|:--|--:|")
            out.append(f"| first save after the open | {first / 1e3:,.2f} ms |")
            out.append(f"| second save | {second / 1e3:,.2f} ms |")
            out.append(f"| a save while a fetch scans the Trips (started while it scanned) | "
                       f"{during / 1e3:,.2f} ms |" if during else "| a save while a fetch scans the Trips | – (the fetch "
                       "had ended before every save began) |")
            out.append(f"| resident growth after the saves | {after_saves - baseline:,.0f} bytes "
                       f"({(after_saves - baseline) / max(entities, 1):,.1f} per Trip) |")
            out.append("")
    return out


def soak_section(results):
    """Issue 13, item 4: the long soak (StateBenchmarks with LOGSTORE_LONG=1)."""
    soak = results.get("soak.long")
    if not soak:
        return []
    def fact(key):
        return fact_median(soak, key) or 0
    entities, records = fact("entities"), fact("transactionRecords")
    uncompressed = fact("checkpointUncompressedBytes")
    live = fact("liveTrips")
    reopen_growth = fact("reopenResidentGrowthBytes")
    ratio = reopen_growth / uncompressed if uncompressed else 0
    out = [f"## Long soak (`LOGSTORE_LONG=1`): {records:,.0f} transactions over {entities:,.0f} Trips\n"]
    out.append(f"The fixture: {entities:,.0f} Trips inserted in saves of 1,000, then one-update transactions round-robin "
               f"over them up to {records:,.0f} transaction records ({fact('logBytes') / 1e6:,.0f} MB of log, no "
               "checkpoint; built once with durability `.none`). The soak, on a fresh copy: open it (a full replay), "
               f"{fact('saves'):,.0f} durable saves through one long-lived `ModelContext` (each updates a Trip, every "
               f"tenth inserts one), `deleteHistory` through transaction {fact('deleteThrough'):,.0f}, then reopen from "
               "the checkpoint that wrote, checking the counts and sampled values it wrote. Resident growth is `VmRSS` after "
               "the open minus before it (after `malloc_trim`), as P8.\n")
    out.append("| Step | figure |")
    out.append("|:--|--:|")
    out.append(f"| open: full replay of {records:,.0f} records | {fact('openSeconds'):.2f} s "
               f"({records / fact('openSeconds') / 1e6 if fact('openSeconds') else 0:.2f} M records/s) |")
    out.append(f"| open: resident growth (peak) | {fact('openResidentGrowthBytes') / 1e6:,.0f} MB "
               f"({fact('openPeakGrowthBytes') / 1e6:,.0f} MB), {fact('openResidentGrowthBytes') / max(entities, 1):,.0f} B per Trip |")
    out.append(f"| durable saves through a context holding 2,000 Trips | {fact('savesPerSecond'):,.0f} saves/s |")
    out.append(f"| `deleteHistory` (checkpoint at the low-water mark, segments deleted) | {fact('compactSeconds'):.2f} s |")
    out.append(f"| store bytes before → after | {fact('storeBytesBeforeCompaction') / 1e6:,.0f} MB → "
               f"{fact('storeBytesAfterCompaction') / 1e6:,.0f} MB ({fact('transactionsRetained'):,.0f} transactions retained) |")
    out.append(f"| reopen from that checkpoint | {fact('reopenSeconds') * 1e3:,.0f} ms |")
    out.append(f"| reopen: resident growth ÷ checkpoint uncompressed ({live:,.0f} live Trips; "
               f"{uncompressed / 1e6:,.1f} MB) | **{fmt_ratio(ratio)}** ({reopen_growth / max(live, 1):,.0f} B per Trip) |")
    out.append(f"\nFloor (issue 13): within P8's memory floor, resident growth ≤ 2 × the checkpoint's uncompressed bytes — "
               f"{'met' if ratio <= 2 else 'missed'}.\n")
    return out


def p6_section(results):
    """P6: 1,000 transactions after a token near the end, LogStore vs SQLite, 10k / 100k / 1M."""
    sizes = ["10k", "100k", "1M"]
    rows = []
    for filter_name, label in (("token", "token only"), ("author", "author == \"widget\"")):
        for size in sizes:
            own = results.get(f"P6.logstore.{filter_name}.{size}")
            peer = results.get(f"P6.sqlite.{filter_name}.{size}")
            if not own:
                continue
            own_ms = 1e3 / own["opsPerSecond"] if own["opsPerSecond"] else None
            peer_ms = 1e3 / peer["opsPerSecond"] if peer and peer["opsPerSecond"] else None
            ratio = own_ms / peer_ms if own_ms and peer_ms else None
            first = fact_median(own, "firstFetchMicroseconds")
            rows.append((filter_name, label, size, own_ms, peer_ms, ratio, first / 1e3 if first is not None else None))
    if not rows:
        return []
    out = ["## P6 history: 1,000 transactions after a token near the end\n",
           "LogStore: `fetchHistory` with `#Predicate { $0.token > t }` (or `$0.token > t && $0.author == \"widget\"`, "
           "every 10th save being the widget's) and `fetchLimit = 1,000`, each transaction's header decoded (token, "
           "author, timestamp, process identifier) and its payload kept for its changes, which are decoded when first "
           "read (this benchmark does not read them); the token bound seeks through the segment list and the sparse index. The author test "
           "reads each record's first bytes on the first fetch over a stretch of log and files the record's author in the store's "
           "in-memory author index (DECISIONS D6); the fetches measured after it read only the widget's records (\"first fetch\": "
           "the one after the open, timed alone, reads them all). SQLite: `SELECT … FROM history WHERE id > ? [AND author = 'widget'] ORDER BY id "
           "LIMIT 1000` on the peer's history table (one row per change, no values), rows read into Swift values. "
           "Fixtures: one Trip inserted per save, built once and cached; files in the page cache.\n",
           "| Filter | transactions | LogStore per fetch | SQLite per fetch | LogStore ÷ SQLite (time) | LogStore first fetch after open |",
           "|:--|--:|--:|--:|--:|--:|"]
    for filter_name, label, size, own_ms, peer_ms, ratio, first_ms in rows:
        out.append(f"| {label} | {size} | {own_ms:.3f} ms | {f'{peer_ms:.3f} ms' if peer_ms else '–'} | "
                   f"{f'**{fmt_ratio(ratio)}**' if ratio else '–'} | {f'{first_ms:.3f} ms' if first_ms is not None else '–'} |")
    out.append("")
    return out


def find_trips_section(results):
    """Issue #13: the WWDC24 history session's findTrips pass, the store answering the predicate
    against the same pass evaluating it in memory (same run)."""
    own, peer = results.get("findTrips.pass"), results.get("findTrips.pass.memory")
    if not own or not own["opsPerSecond"]:
        return []

    def figures(entry):
        counters = entry["counters"]
        per_pass = 1e3 / entry["opsPerSecond"]
        changes = counters.get("changes", 0) / counters["passes"] if counters.get("passes") else 0
        history = counters.get("historyNanoseconds", 0) / counters["passes"] / 1e6 if counters.get("passes") else 0
        cpu = counters.get("cpuNanoseconds", 0) / counters["passes"] / 1e6 if counters.get("passes") else 0
        return per_pass, changes, history, cpu

    out = ["## findTrips: the WWDC24 history session's pass over 100 widget changes (issue #13)\n",
           "One operation is the session's code: `fetchHistory` after the app's token with `author == \"widget\"` "
           "(100 transactions, each the widget confirming one accommodation), then for each change a new task "
           "context's fetch of `#Predicate<Trip> { $0.livingAccommodation?.persistentModelID == modelID }` over "
           "5,000 Trips, each with its own accommodation. The peer is the same pass with each change's predicate "
           "evaluated in memory (`Predicate.evaluate` over every Trip the task context fetches), what the context did "
           "before the store recognised the predicate. Floor: 50 ms per pass.\n",
           "| | per pass (100 changes) | range over passes | per change | of which history fetch | CPU per pass |",
           "|:--|--:|--:|--:|--:|--:|"]
    for label, entry in (("LogStore answers the predicate", own), ("in memory (`Predicate.evaluate`)", peer)):
        if not entry or not entry["opsPerSecond"]:
            continue
        per_pass, changes, history, cpu = figures(entry)
        slowest, fastest = 1e3 / entry["opsPerSecondMin"], 1e3 / entry["opsPerSecondMax"]
        out.append(f"| {label} | **{per_pass:,.1f} ms** | {fastest:,.1f}–{slowest:,.1f} ms | "
                   f"{per_pass / changes * 1e3 if changes else 0:,.0f} µs | {history:,.2f} ms | "
                   f"{f'{cpu:,.1f} ms' if cpu else '–'} |")
    if peer and peer["opsPerSecond"]:
        out.append(f"\nIn memory ÷ LogStore (time): **{own['opsPerSecond'] / peer['opsPerSecond']:,.1f}×**.")
    out.append("")
    return out


def p6_floor_checks(results):
    checks = []
    for filter_name in ("token", "author"):
        own = results.get(f"P6.logstore.{filter_name}.1M")
        peer = results.get(f"P6.sqlite.{filter_name}.1M")
        small = results.get(f"P6.logstore.{filter_name}.10k")
        if own and peer and own["opsPerSecond"]:
            # Issue 13: token ≤ 0.5, author filter ≤ 1.
            checks.append((f"P6 ({filter_name}): fetch time at 1M ÷ SQLite's", peer["opsPerSecond"] / own["opsPerSecond"],
                           0.5 if filter_name == "token" else 1, "≤"))
        if own and small and own["opsPerSecond"]:
            checks.append((f"P6 ({filter_name}): fetch time at 1M ÷ at 10k", small["opsPerSecond"] / own["opsPerSecond"], 1.2, "≤"))
    return checks


# Issue 12 (ProcessBenchmarks): several writing processes on one store. The savers' rows:
# (label, id); the first is the reference the others are divided by.
ISSUE12_SAVERS = [
    ("8 savers, 1 process, opened alone", "i12.saves.1x8"),
    ("8 savers, 1 process, allowsOtherWriters", "i12.saves.1x8.shared"),
    ("4 + 4 savers, 2 processes, allowsOtherWriters", "i12.saves.2x4.shared"),
    ("1 saver, 1 process, opened alone", "i12.saves.1x1"),
    ("1 saver, 1 process, allowsOtherWriters", "i12.saves.1x1.shared"),
]
ISSUE12_LATENCY = [
    ("allowsOtherWriters writer (an app beside its writing widget)", "i12.latency.writer"),
    ("read-only reader (allowsSave: false)", "i12.latency.readonly"),
]


def idle_cpu_share(entry, key="idleReaderCPUMicroseconds"):
    """CPU time over the idle window as a share of one core, in percent, or None."""
    cpu, seconds = fact_median(entry, key), fact_median(entry, "idleSeconds")
    if cpu is None or not seconds:
        return None
    return cpu / (seconds * 1e6) * 100


def issue12_floor_checks(results):
    checks = []
    def ratio(own_id, peer_id):
        own, peer = results.get(own_id), results.get(peer_id)
        if not own or not peer or not peer["opsPerSecond"]:
            return None
        return own["opsPerSecond"] / peer["opsPerSecond"]
    checks.append(("Issue 12: durable saves/s, 4 + 4 savers in 2 processes ÷ 8 savers in 1 process (opened alone)",
                   ratio("i12.saves.2x4.shared", "i12.saves.1x8"), 0.8, "≥"))
    writer = results.get("i12.latency.writer")
    if writer:
        latency = writer["latencyMicroseconds"]
        checks.append(("Issue 12: remote-change latency p50, ms (save() called → remoteChanges in the other process)",
                       latency["p50"] / 1e3, 10, "≤"))
        checks.append(("Issue 12: remote-change latency p99, ms (same)", latency["p99"] / 1e3, 50, "≤"))
        share = idle_cpu_share(writer)
        if share is not None:
            checks.append(("Issue 12: idle reader's CPU over the idle window, % of one core (\"no measurable CPU\")",
                           share, 0.1, "≤"))
    checks.append(("Issue 12: 8 savers in 1 process, allowsOtherWriters ÷ opened alone (the turn when nobody else "
                   "writes; \"no slower\" read as ≥ 0.95)", ratio("i12.saves.1x8.shared", "i12.saves.1x8"), 0.95, "≥"))
    checks.append(("Issue 12: 1 saver, allowsOtherWriters ÷ opened alone (same)",
                   ratio("i12.saves.1x1.shared", "i12.saves.1x1"), 0.95, "≥"))
    return checks


def issue12_section(results):
    """Issue 12: saves from one and two processes, remote-change latency, idle CPU, catch-up, the check."""
    if not any(key.startswith("i12.") for key in results):
        return []
    out = ["## Several processes, one store (issue 12)\n",
           "ProcessBenchmarks, with real processes: the benchmark binary runs itself again as a child, and both open "
           "the same store directory with `allowsOtherWriters` (DECISIONS.md D11 stage 2). A saver inserts one new "
           "SampleTrips `Trip` per durable save through a new `ModelContext` (P2-ctx's workload). The savers of both "
           "processes save over the same wall-clock window (1 s per round, the start sent to the child 20 ms ahead as "
           "a `CLOCK_MONOTONIC` time, which is one clock for every process of the machine); a round's saves are both "
           "processes' acknowledged saves, its time runs from the window's start to the last save's return in either. "
           "Records per fdatasync count both processes' fdatasyncs.\n"]
    reference = results.get(ISSUE12_SAVERS[0][1])
    present = [(label, results.get(key)) for label, key in ISSUE12_SAVERS if results.get(key)]
    if present:
        out.append("| Savers | saves/s | range over passes | p50 µs | p99 µs | records per fdatasync | CPU µs per save (both processes) | ÷ 8 savers, 1 process, alone |")
        out.append("|:--|--:|--:|--:|--:|--:|--:|--:|")
        for label, entry in present:
            latency = entry["latencyMicroseconds"]
            rps = records_per_sync(entry)
            rps_text = "–" if rps is None or rps == float("inf") else f"{rps:.2f}"
            counters = entry.get("counters", {})
            cpu_per_save = (f"{counters['cpuMicroseconds'] / counters['saves']:.0f}"
                            if counters.get("cpuMicroseconds") and counters.get("saves") else "–")
            versus = ratio_cell(entry, reference, bold=True, with_range=True) if reference and entry is not reference else ("1" if entry is reference else "–")
            out.append(f"| {label} | **{fmt_rate(entry['opsPerSecond'])}** | {fmt_rate(entry['opsPerSecondMin'])}–"
                       f"{fmt_rate(entry['opsPerSecondMax'])} | {fmt_us(latency['p50'])} | {fmt_us(latency['p99'])} | "
                       f"{rps_text} | {cpu_per_save} | {versus} |")
        alone1, shared1 = results.get("i12.saves.1x1"), results.get("i12.saves.1x1.shared")
        if alone1 and shared1:
            out.append(f"\n1 saver, allowsOtherWriters ÷ opened alone: **{ratio_cell(shared1, alone1, with_range=True)}** "
                       "(P1-ctx's workload: the cost of the turn, alone, per save).")
        out.append("")
    rows = [(label, results.get(key)) for label, key in ISSUE12_LATENCY if results.get(key)]
    if rows:
        out.append("### Remote-change latency and an idle reader\n")
        out.append("A child process (an `allowsOtherWriters` writer, `.synchronous`) saves one Trip every 20 ms; this "
                   "process iterates `LogStore.remoteChanges(after:)` and notes when each token arrives. *From save()* "
                   "runs from the child's call of `save()` (its own fdatasync included) to the arrival here; *from its "
                   "return* from `save()` returning (negative when the reader was told before the saver's thread woke). "
                   "Then 5 s with no saves, the iterator still waiting: the reader's CPU time and context switches "
                   "(`getrusage`), and the idle saver's.\n")
        out.append("| Reader | notifications | p50 ms from save() | p99 ms from save() | max ms | p50 / p99 µs from its return | "
                   "idle reader: CPU µs over the window (% of a core), voluntary switches | idle saver: CPU µs | wakes by |")
        out.append("|:--|--:|--:|--:|--:|--:|--:|--:|:--|")
        for label, entry in rows:
            latency = entry["latencyMicroseconds"]
            share = idle_cpu_share(entry)
            out.append(f"| {label} | {entry['operations']:,} | **{latency['p50'] / 1e3:.2f}** | **{latency['p99'] / 1e3:.2f}** | "
                       f"{latency['max'] / 1e3:.2f} | {fact_median(entry, 'fromReturnP50Microseconds') or 0:.0f} / "
                       f"{fact_median(entry, 'fromReturnP99Microseconds') or 0:.0f} | "
                       f"{fact_median(entry, 'idleReaderCPUMicroseconds') or 0:,.0f} over {fact_median(entry, 'idleSeconds') or 0:g} s "
                       f"({share if share is not None else 0:.4f} %), {fact_median(entry, 'idleReaderVoluntarySwitches') or 0:.0f} | "
                       f"{fact_median(entry, 'idleSaverCPUMicroseconds') or 0:,.0f} | {entry.get('facts', {}).get('watch', '?')} |")
        out.append("")
    catchup = results.get("i12.catchup")
    if catchup:
        backlog = fact_median(catchup, "backlog") or 0
        out.append("### Catch-up per foreign transaction, and \"anything new?\"\n")
        out.append(f"Catch-up: a child (`allowsOtherWriters`, durability `.none`, so nothing it writes is published as "
                   f"durable and this process's watcher leaves it alone) saves {backlog:,.0f} one-Trip transactions; then "
                   "this process saves one Trip (`.none` too: no fdatasync in the timing) — its turn reads and checks "
                   "the backlog's records and folds them into the working state and unique index before resolving — "
                   "and one more with nothing to fold. Per foreign transaction = (first save − second) ÷ the records "
                   "the turn folded (the backlog, less any this process read before the turn: "
                   f"{(catchup.get('counters') or {}).get('partialRounds', 0):,.0f} such rounds over the passes), median over the "
                   "rounds of each pass, then over the passes.\n")
        out.append("| | µs |")
        out.append("|:--|--:|")
        out.append(f"| catch-up per foreign transaction (median over {catchup['iterations']} rounds; p90 "
                   f"{fmt_us(catchup['latencyMicroseconds']['p90'])}) | **{fmt_us(catchup['latencyMicroseconds']['p50'])}** |")
        out.append(f"| a save whose turn folds {backlog:,.0f} foreign transactions (median) | "
                   f"{fact_median(catchup, 'saveWithBacklogMicrosecondsMedian') or 0:,.0f} |")
        out.append(f"| the next save, nothing to fold (median) | {fact_median(catchup, 'saveWithoutBacklogMicrosecondsMedian') or 0:,.1f} |")
        for label, key in (("\"anything new?\" when nothing is: `Log.refreshFromOtherWriters()` of an allowsOtherWriters writer "
                            "(one `pread` of the coordination file; every fetch and watcher wake pays it)", "i12.nothingNew.writer"),
                           ("the same for a read-only follower, `Log.refresh()`", "i12.nothingNew.readonly")):
            entry = results.get(key)
            if entry and entry["opsPerSecond"]:
                out.append(f"| {label} | **{1e6 / entry['opsPerSecond']:.2f}** |")
        shared, alone = results.get("i12.fetch.shared"), results.get("i12.fetch.alone")
        if shared and alone and shared["opsPerSecond"] and alone["opsPerSecond"]:
            out.append(f"| a fetch of one Trip by name (new context, 100 Trips): allowsOtherWriters store "
                       f"{1e6 / shared['opsPerSecond']:.1f} µs − opened alone {1e6 / alone['opsPerSecond']:.1f} µs | "
                       f"{1e6 / shared['opsPerSecond'] - 1e6 / alone['opsPerSecond']:.1f} |")
        out.append("")
    return out


def floors_section(results):
    """The issue's floors, each with this run's figure."""
    def ratio(own_id, peer_id, rows=1):
        own, peer = results.get(own_id), results.get(peer_id)
        if not own or not peer or not peer["opsPerSecond"]:
            return None
        return own["opsPerSecond"] * rows / (peer["opsPerSecond"] * rows)
    lines = []
    checks = [
        ("P1 (engine): appends/s ÷ raw pwrite+fdatasync into a zero-filled file", ratio("P1.logstore", "raw.prealloc.sync"), 0.9, "≥"),
        ("P1 (engine): appends/s ÷ SQLite WAL FULL", ratio("P1.logstore", "sqlite.full.1"), 1.3, "≥"),
        # Issue 13's floors where it set them (P2-ctx ≥ 5, P3-ctx ≥ 5, P4-ctx ≥ 1.5).
        ("P2-ctx: 8 savers, saves/s ÷ SQLite+history FULL (8 threads)", ratio("P2.ctx", "sqlite.model.full.8"), 5, "≥"),
        ("P3-ctx: durability none, saves/s ÷ SQLite+history NORMAL (1 thread)", ratio("P3.ctx", "sqlite.model.normal.1"), 5, "≥"),
        ("P4-ctx: 100 Trips per save, rows/s ÷ SQLite+history FULL", ratio("P4.ctx", "sqlite.model.full.100"), 1.5, "≥"),
    ]
    replay = results.get("P5.replay")
    if replay:
        checks.append(("P5: changes folded per second, full replay (millions)",
                       replay["opsPerSecond"] * (fact_median(replay, "changesPerOpen") or 0) / 1e6, 1.5, "≥"))
        checkpoint = results.get("P5.checkpoint")
        if checkpoint and checkpoint["opsPerSecond"]:
            checks.append(("P5: open from a checkpoint ÷ full replay (time)", replay["opsPerSecond"] / checkpoint["opsPerSecond"], 0.10, "≤"))
    checks += p6_floor_checks(results)
    # Issue #11: a long-lived context holding 10,000 models saves about as fast as a new one.
    long_lived = ratio("P1.ctx.long10k", "P1.ctx")
    if long_lived is not None:
        checks.append(("P1-ctx long-lived context with 10,000 models ÷ new context per save", long_lived, 0.9, "≥"))
    # P7: log bytes per one-Trip save ÷ SQLite's file bytes per row (table + unique index + history).
    p7 = next((results[k] for k in ("P1.ctx", "P1.store") if results.get(k, {}).get("counters", {}).get("saves")), None)
    sqlite_row = fact_median(results["sqlite.model.full.1"], "bytesPerRow") if results.get("sqlite.model.full.1") else None
    if p7 and sqlite_row and "logBytes" in p7["counters"]:
        checks.append(("P7: bytes per one-Trip save ÷ SQLite+history bytes per row",
                       p7["counters"]["logBytes"] / p7["counters"]["saves"] / sqlite_row, 0.8, "≤"))
    # Issue #13: P7's second figure, stored ÷ raw payload bytes of the one-Trip saves (segment
    # dictionaries, FORMAT.md §6.8; plain LZ4 gained about 10 %).
    if p7 and p7["counters"].get("payloadBytes"):
        checks.append(("P7: stored ÷ raw payload bytes, one-Trip saves",
                       p7["counters"]["storedPayloadBytes"] / p7["counters"]["payloadBytes"], 0.6, "≤"))
    # Issue #13: the WWDC24 session's findTrips, 100 widget changes over 5,000 trips.
    # The whole pass when it ran (history fetch included), else 100 times one change's fetch.
    find_trips_pass = results.get("findTrips.pass")
    find_trips = results.get("findTrips")
    if find_trips_pass and find_trips_pass["opsPerSecond"]:
        checks.append(("findTrips: the session's pass over 100 widget changes, 5,000 trips, milliseconds",
                       1000 / find_trips_pass["opsPerSecond"], 50, "≤"))
    elif find_trips and find_trips["opsPerSecond"]:
        checks.append(("findTrips: 100 widget changes over 5,000 trips, milliseconds",
                       100 / find_trips["opsPerSecond"] * 1000, 50, "≤"))
    checks += issue12_floor_checks(results)
    memory = results.get("P8.rss")
    if memory and fact_median(memory, "checkpointUncompressedBytes"):
        growth = (fact_median(memory, "rssOpenBytes") or 0) - (fact_median(memory, "rssBaselineBytes") or 0)
        checks.append(("P8: resident growth ÷ checkpoint uncompressed bytes", growth / fact_median(memory, "checkpointUncompressedBytes"), 2, "≤"))
    for label, value, floor, sense in checks:
        if value is None:
            continue
        met = value >= floor if sense == "≥" else value <= floor
        lines.append(f"| {label} | **{fmt_ratio(value)}** | {sense} {floor:g} | {'met' if met else 'missed'} |")
    if not lines:
        return []
    return ["## Floors (issues #6, #11, #12 and #13; where #13 set a floor again, its figure)\n",
            "| Figure | this run | floor | |", "|:--|--:|--:|:--|"] + lines + [""]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--summary", required=True)
    parser.add_argument("--bench-dir", required=True)
    parser.add_argument("--framework", nargs="*", default=[])
    parser.add_argument("--load-before", default="")
    parser.add_argument("--load-after", default="")
    parser.add_argument("--output", required=True)
    parser.add_argument("--command", default="Benchmarks/run.sh")
    args = parser.parse_args()

    results = read_summaries(args.summary)
    framework = read_framework_throughput(args.framework)
    info = machine(args.bench_dir)
    profiles = sorted({entry.get("profile", "?") for entry in results.values()})
    passes = max((entry["passes"] for entry in results.values()), default=0)
    sqlite_version = next((e["facts"].get("sqlite") for e in results.values() if "sqlite" in e.get("facts", {})), None)
    here = os.path.dirname(os.path.abspath(__file__))
    commit = os.environ.get("LOGSTORE_ENGINE_REVISION") or command_output(["git", "-C", here, "rev-parse", "--short", "HEAD"])
    dirty = "" if os.environ.get("LOGSTORE_ENGINE_REVISION") else command_output(["git", "-C", here, "status", "--porcelain", "--", "../Sources"])

    out = []
    out.append("# LogStore benchmark results\n")
    out.append(f"Generated by `{args.command}` on {datetime.datetime.now().astimezone().strftime('%Y-%m-%d %H:%M %Z')}"
               f" (profile: {', '.join(profiles) or 'none'}; engine at commit {commit}"
               f"{' with uncommitted changes under Sources/' if dirty and dirty != 'unknown' else ''}).\n")
    out.append(f"The suite ran {passes} time{'s' if passes != 1 else ''} in a row; every figure is the median over the "
               "passes (ops/s ranges give the spread). In each pass each benchmark runs in its own process, one after "
               "the other, for a fixed time (nominally 4 s for fdatasync-bound ones, 3 s for the others, P5 opens for 6 s "
               "and 3 s, P6 fetches for 1 s, P8 opens once; times "
               f"{os.environ.get('LOGSTORE_BENCH_DURATION_SCALE', '1')} × nominal in this run). Ops/s is operations "
               "over the measured time; latencies are per operation (with several threads: each append's own "
               "latency). Payloads: 200 pseudo-random (incompressible) bytes; a LogStore record adds a 32-byte "
               "header. Files live in the benchmark directory below, on the same disk as the checkout. The 2 cores "
               "are shared with other work: read the ratios, which compare benchmarks of the same run.\n")
    out.append("## Machine\n")
    out.append("| | |\n|:--|:--|")
    out.append(f"| CPU | {info['cpu']} |")
    out.append(f"| nproc | {info['nproc']} |")
    out.append(f"| Memory | {info['memory']} |")
    out.append(f"| Kernel | {info['kernel']} |")
    out.append(f"| Benchmark directory | {args.bench_dir} ({info['fs']}) |")
    out.append(f"| Swift | {info['swift']} |")
    if args.load_before or args.load_after:
        out.append(f"| Load average (1/5/15 min) before → after | {args.load_before} → {args.load_after} |")
    if sqlite_version:
        out.append(f"| SQLite (GRDB 7.10.0, system libsqlite3) | {sqlite_version} |")
    out.append("")

    out.extend(floors_section(results))
    out.append("## Ratios (LogStore ops/s ÷ peer ops/s; above 1 = LogStore faster)\n")
    for title, own_id, peers, note in FIGURES:
        own = results.get(own_id)
        if own is None:
            out.append(f"### {title}\n\n(not run)\n")
            continue
        out.append(f"### {title}\n")
        rps = records_per_sync(own)
        summary_line = (f"LogStore: **{fmt_rate(own['opsPerSecond'])} appends/s**, p50 "
                        f"{fmt_us(own['latencyMicroseconds']['p50'])} µs, p99 {fmt_us(own['latencyMicroseconds']['p99'])} µs")
        if rps is not None:
            summary_line += f", {'no' if rps == float('inf') else f'{rps:.2f}'} records per fdatasync"
            if rps == float("inf"):
                summary_line = summary_line.replace(", no records per fdatasync", ", no fdatasync during the measurement")
        out.append(summary_line + ".\n")
        out.append("| Peer | peer ops/s | peer p50 µs | LogStore / peer (ops/s) | range over passes | p50 LogStore / peer |")
        out.append("|:--|--:|--:|--:|--:|--:|")
        for label, peer_id in peers:
            peer = results.get(peer_id)
            if peer is None or peer["opsPerSecond"] == 0:
                out.append(f"| {label} | (not run) | | | | |")
                continue
            ratio = own["opsPerSecond"] / peer["opsPerSecond"]
            p50_ratio = own["latencyMicroseconds"]["p50"] / peer["latencyMicroseconds"]["p50"] if peer["latencyMicroseconds"]["p50"] else 0
            low = own["opsPerSecondMin"] / peer["opsPerSecondMax"]
            high = own["opsPerSecondMax"] / peer["opsPerSecondMin"]
            out.append(f"| {label} | {fmt_rate(peer['opsPerSecond'])} | {fmt_us(peer['latencyMicroseconds']['p50'])} | "
                       f"**{fmt_ratio(ratio)}** | {fmt_ratio(low)}–{fmt_ratio(high)} | {fmt_ratio(p50_ratio)} |")
        out.append(f"\n{note} The range pairs the extremes of both sides over the passes (worst and best case).\n")

    out.extend(model_sections(results))
    chart = scaling_svg(results)
    chart_name = None
    if chart:
        stem = os.path.splitext(os.path.basename(args.output))[0]
        chart_name = "savers.svg" if stem == "RESULTS" else f"{stem}-savers.svg"
        with open(os.path.join(os.path.dirname(os.path.abspath(args.output)), chart_name), "w") as handle:
            handle.write(chart)
    out.extend(scaling_section(results, chart_name))
    out.extend(bytes_section(results))
    out.extend(p5_p8_section(results))
    out.extend(soak_section(results))
    out.extend(p6_section(results))
    out.extend(find_trips_section(results))
    out.extend(issue12_section(results))

    out.append("## Absolute figures\n")
    out.append("| Benchmark | id | threads | ops/s | ops/s range | p50 µs | p90 µs | p99 µs | max µs | tail ≥ 20×p50: ops, share of time | framework p50 ops/s | notes |")
    out.append("|:--|:--|--:|--:|--:|--:|--:|--:|--:|--:|--:|:--|")
    for entry in sorted(results.values(), key=lambda e: e["name"]):
        latency = entry["latencyMicroseconds"]
        framework_rate = framework.get(entry["name"])
        out.append(f"| {entry['name']} | `{entry['id']}` | {entry['threads']} | {fmt_rate(entry['opsPerSecond'])} | "
                   f"{fmt_rate(entry['opsPerSecondMin'])}–{fmt_rate(entry['opsPerSecondMax'])} | "
                   f"{fmt_us(latency['p50'])} | {fmt_us(latency['p90'])} | {fmt_us(latency['p99'])} | {fmt_us(latency['max'])} | "
                   f"{entry['tailOperations']:,} of {entry['operations']:,}, {entry['tailShare'] * 100:.1f} % | "
                   f"{fmt_rate(framework_rate) if framework_rate else '–'} | {extra_column(entry)} |")
    out.append("")
    out.append("Latency columns are medians over the passes (max: the largest). The tail column counts operations "
               "that took at least 20 times the median and the share of the measured time they account for (stalls: "
               "a sync at the unsynced bound, a segment roll, a WAL checkpoint, preemption). The framework column is "
               "package-benchmark's own p50 of per-iteration throughput (an iteration is one operation, or 1,000 for "
               "the fast and multi-threaded benchmarks), rounded as the framework prints it: a cross-check of the "
               "harness. The framework's full tables are in `Benchmarks/.cache/benchmark-pass*.md` after a run.\n")

    with open(args.output, "w") as handle:
        handle.write("\n".join(out))
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
