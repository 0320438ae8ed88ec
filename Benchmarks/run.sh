#!/usr/bin/env bash
# LogStore benchmarks: builds and runs every suite with package-benchmark, then writes the figures
# and their ratios to the peers measured in the same run.
#
#   Benchmarks/run.sh                     full profile: every suite (EngineBenchmarks, HistoryBenchmarks,
#                                         ModelBenchmarks, ProcessBenchmarks, StateBenchmarks) twice in a row at half the nominal
#                                         measuring times (under 10 min here, plus the build and, once, the
#                                         fixtures); writes Benchmarks/RESULTS.md with the median of the passes
#   BENCHMARKS_SMOKE=1 Benchmarks/run.sh  smoke profile for CI: one tiny iteration of each benchmark;
#                                         writes Benchmarks/.cache/RESULTS-smoke.md (RESULTS.md is left alone)
#   Benchmarks/run.sh --filter 'P1 .*'    extra arguments go to `swift package benchmark`
#                                         (--filter/--skip take regexes matching whole benchmark names)
#   RESULTS=Benchmarks/.cache/RESULTS-issue12.md Benchmarks/run.sh --filter 'I12 .*'
#                                         issue 12's suite alone (ProcessBenchmarks: saves from two processes,
#                                         remote-change latency, idle CPU, catch-up; its floors are in the table)
#
# Environment:
#   LOGSTORE_BENCH_DIR  where benchmark files are written (default Benchmarks/.cache/work). It must
#                       be a real disk: on tmpfs fdatasync costs nothing and the run is refused.
#   RESULTS             output file (default as above)
#   PASSES              how many times the suite runs (default 2; 1 in the smoke profile)
#   LOGSTORE_BENCH_DURATION_SCALE  multiplies each benchmark's measuring time (default 0.5 here, 1 otherwise)
#   LOGSTORE_LONG=1     adds issue 13's long soak to StateBenchmarks (a 10M-transaction store over 1M
#                       Trips, about 700 MB, built once and cached: open, save into, compact, reopen;
#                       a few minutes more)
#   LOGSTORE_ENGINE_REVISION  what to call the engine in RESULTS.md (default: git HEAD of this
#                       checkout, flagged when Sources/ has uncommitted changes)
#
# Raw output: Benchmarks/.cache/benchmark-pass<N>.md (the framework's tables) and
# Benchmarks/.cache/summary.jsonl (the harness's per-benchmark summaries). Needs python3.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache="$here/.cache"
mkdir -p "$cache"

export LOGSTORE_BENCH_DIR="${LOGSTORE_BENCH_DIR:-$cache/work}"
mkdir -p "$LOGSTORE_BENCH_DIR"
fs_type="$(df -T "$LOGSTORE_BENCH_DIR" | awk 'NR == 2 { print $2 }')"
if [[ "$fs_type" == tmpfs || "$fs_type" == ramfs ]]; then
    echo "error: $LOGSTORE_BENCH_DIR is on $fs_type; set LOGSTORE_BENCH_DIR to a directory on a real disk" >&2
    exit 1
fi

if [[ -n "${BENCHMARKS_SMOKE:-}" && "${BENCHMARKS_SMOKE}" != 0 ]]; then
    export BENCHMARKS_SMOKE=1
    output="${RESULTS:-$cache/RESULTS-smoke.md}"
    passes="${PASSES:-1}"
    command_line="BENCHMARKS_SMOKE=1 Benchmarks/run.sh $*"
else
    unset BENCHMARKS_SMOKE
    output="${RESULTS:-$here/RESULTS.md}"
    passes="${PASSES:-2}"
    # Half of each benchmark's nominal measuring time: the whole profile stays under 10 minutes
    # on 2 cores (set LOGSTORE_BENCH_DURATION_SCALE=1 and PASSES=3 for a longer, steadier run).
    export LOGSTORE_BENCH_DURATION_SCALE="${LOGSTORE_BENCH_DURATION_SCALE:-0.5}"
    command_line="Benchmarks/run.sh $*"
fi

# A build directory made while the benchmark package took its malloc interposer (before
# 2026-11-28) still holds that module, and the package's `#if canImport(MallocInterposerSwift)`
# then finds it and fails to build ("missing required module 'MallocInterposerC'"): drop it.
if compgen -G "$here/.build/*/*/Modules/MallocInterposer*" > /dev/null; then
    echo "removing the malloc interposer's modules left in $here/.build by an older build" >&2
    rm -rf "$here"/.build/*/*/Modules/MallocInterposer* "$here"/.build/*/*/MallocInterposer*
fi

export LOGSTORE_BENCH_SUMMARY="$cache/summary.jsonl"
rm -f "$LOGSTORE_BENCH_SUMMARY"

echo "benchmark files in $LOGSTORE_BENCH_DIR ($fs_type); profile ${BENCHMARKS_SMOKE:+smoke}${BENCHMARKS_SMOKE:-full}, $passes pass(es)" >&2
load_before="$(cut -d ' ' -f 1-3 /proc/loadavg 2>/dev/null || true)"
rm -f "$cache"/benchmark-pass*.md
framework_tables=()
for pass in $(seq 1 "$passes"); do
    export LOGSTORE_BENCH_PASS="$pass"
    echo "pass $pass of $passes" >&2
    swift package --package-path "$here" benchmark --no-progress --format markdown "$@" | tee "$cache/benchmark-pass$pass.md"
    framework_tables+=("$cache/benchmark-pass$pass.md")
done
load_after="$(cut -d ' ' -f 1-3 /proc/loadavg 2>/dev/null || true)"

python3 "$here/summarize.py" \
    --summary "$LOGSTORE_BENCH_SUMMARY" \
    --bench-dir "$LOGSTORE_BENCH_DIR" \
    --framework "${framework_tables[@]}" \
    --load-before "$load_before" \
    --load-after "$load_after" \
    --output "$output" \
    --command "${command_line% }"
