#!/usr/bin/env bash
# Issue 16's figures for `logstore ship`, from release builds, against a PostgreSQL 15 server this
# script starts on loopback in a temporary directory (fsync on, track_commit_timestamp on) and
# stops at the end:
#
#   1. throughput: a store of N transactions (default 1,000,000; `logstore-ship-figures generate`,
#      durability .none) shipped into a fresh database by `logstore ship --json`: transactions/s
#      and change rows/s from the tool's summary (its shipping seconds) and from the wall time;
#   2. kills: K times (default 10) `logstore ship` on that store (fresh database) is killed with
#      SIGKILL at a random moment after it has committed, then restarted: the change rows
#      PostgreSQL inserted and rolled back (pg_stat_user_tables.n_tup_ins minus the rows kept) and
#      the time from the restart to its first commit;
#   3. lag: a writer process saving R transactions/s (default 1,000, `.batched` 5 ms) for T seconds
#      (default 30) while `logstore ship --follow` runs (read-only polling, the store being open
#      for writing in the writer): per transaction, PostgreSQL's commit timestamp of its change rows
#      minus the transaction's save timestamp; p50, p99, max (the first 3 s left out as warm-up).
#
#   Tools/ship-figures/run.sh [--transactions N] [--kills K] [--rate R] [--seconds T] [--skip-build]
#
# Needs Debian's postgresql package (initdb, pg_ctl, psql in /usr/lib/postgresql/<v>/bin or
# LOGSTORE_PG_BIN). Builds into .build-release (`swift build -c release`). Work files go under
# ${SHIP_FIGURES_WORK:-/var/tmp} (a real disk, not tmpfs); SHIP_FIGURES_BIN=<dir> with --skip-build
# runs the tools found there instead. Prints `uptime` before and after each
# part: the figures are only as quiet as the machine was.
set -euo pipefail
cd "$(dirname "$0")/../.."

transactions=1000000 kills=10 rate=1000 seconds=30 build=1
while [[ $# -gt 0 ]]; do
    case "$1" in
        --transactions) transactions="$2"; shift 2 ;;
        --kills) kills="$2"; shift 2 ;;
        --rate) rate="$2"; shift 2 ;;
        --seconds) seconds="$2"; shift 2 ;;
        --skip-build) build=0; shift ;;
        *) echo "usage: $0 [--transactions N] [--kills K] [--rate R] [--seconds T] [--skip-build]" >&2; exit 64 ;;
    esac
done

scratch=.build-release
if [[ $build -eq 1 ]]; then
    swift build -c release --scratch-path "$scratch" --product logstore
    swift build -c release --scratch-path "$scratch" --product logstore-ship-figures
fi
# SHIP_FIGURES_BIN: take the tools from another directory (a quick check of this script on a debug build).
bin="${SHIP_FIGURES_BIN:-$(swift build -c release --scratch-path "$scratch" --show-bin-path)}"
for tool in logstore logstore-ship-figures; do
    [[ -x "$bin/$tool" ]] || { echo "no $bin/$tool: build it first (run without --skip-build)" >&2; exit 2; }
done

pgbin="${LOGSTORE_PG_BIN:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)}"
[[ -x "$pgbin/initdb" ]] || { echo "no PostgreSQL server binaries (apt-get install -y postgresql, or LOGSTORE_PG_BIN)" >&2; exit 2; }

work="$(mktemp -d "${SHIP_FIGURES_WORK:-/var/tmp}/ship-figures.XXXXXX")"
chmod 755 "$work"
port=$(( 20000 + RANDOM % 20000 ))
pids=()
as_server() { if [[ $(id -u) -eq 0 ]]; then runuser -u postgres -- "$@"; else "$@"; fi; }
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    as_server "$pgbin/pg_ctl" -D "$work/pg/data" -m immediate -w stop >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT

mkdir -p "$work/pg"
[[ $(id -u) -eq 0 ]] && chown postgres:postgres "$work/pg"
as_server "$pgbin/initdb" -D "$work/pg/data" -U postgres --auth=trust -E UTF8 >/dev/null
as_server "$pgbin/pg_ctl" -D "$work/pg/data" -l "$work/pg/server.log" -w -t 60 \
    -o "-p $port -k $work/pg -c listen_addresses=127.0.0.1 -c track_commit_timestamp=on" start >/dev/null
sql() { local db="$1"; shift; "$pgbin/psql" -h 127.0.0.1 -p "$port" -U postgres -d "$db" -AtqX -c "$*"; }
url() { echo "postgres://postgres@127.0.0.1:$port/$1"; }
now() { date +%s.%N; }
elapsed() { echo "$(now) - $1" | bc -l; }
json() { python3 -c "import json,sys; d=json.load(sys.stdin); print(d$1)"; }

echo "== ship figures, $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)), $("$pgbin/postgres" --version)"
echo "uptime: $(uptime)"

# 1. Throughput.
store="$work/store"
generated=$("$bin/logstore-ship-figures" generate "$store" --transactions "$transactions")
echo "generate: $generated; store $(du -sh "$store" | cut -f1)"
sql postgres "CREATE DATABASE throughput"
start=$(now)
summary=$("$bin/logstore" ship "$store" --postgres "$(url throughput)" --json)
wall=$(elapsed "$start")
shipped=$(echo "$summary" | json "['transactions']")
changes=$(echo "$summary" | json "['changes']")
shipping=$(echo "$summary" | json "['seconds']")
commits=$(echo "$summary" | json "['commits']")
rows=$(sql throughput "SELECT (SELECT count(*) FROM \"Trip\") + (SELECT count(*) FROM \"Item\") + (SELECT count(*) FROM \"Lodging\")")
printf 'throughput: %d transactions, %d change rows (%d mirror rows now) in %d commits; tool: %.1f s shipping = %.0f transactions/s, %.0f change rows/s; wall (process start to exit): %.1f s = %.0f transactions/s, %.0f change rows/s\n' \
    "$shipped" "$changes" "$rows" "$commits" "$shipping" "$(echo "$shipped / $shipping" | bc -l)" "$(echo "$changes / $shipping" | bc -l)" \
    "$wall" "$(echo "$shipped / $wall" | bc -l)" "$(echo "$changes / $wall" | bc -l)"
echo "database size: $(sql throughput "SELECT pg_size_pretty(pg_database_size('throughput'))")"
echo "uptime: $(uptime)"

# 2. Kills: SIGKILL at a random moment once the run has committed at least once, then restart.
sql postgres "CREATE DATABASE kills"
shipped_count() { sql kills "SELECT coalesce((SELECT transactions FROM logstore_shipping), 0)" 2>/dev/null || echo 0; }
inserted_and_kept() {
    sql kills "SELECT coalesce((SELECT n_tup_ins FROM pg_stat_user_tables WHERE relname = 'logstore_changes'), 0) || ' ' || coalesce((SELECT count(*) FROM logstore_changes), 0)" 2>/dev/null || echo "0 0"
}
restarts=() rolled=()
for ((kill_number = 1; kill_number <= kills; kill_number++)); do
    before=$(shipped_count)
    start=$(now)
    "$bin/logstore" ship "$store" --postgres "$(url kills)" --consumer kills --json >/dev/null 2>&1 &
    pid=$!
    pids+=("$pid")
    while [[ $(shipped_count) -eq $before ]] && kill -0 "$pid" 2>/dev/null; do sleep 0.02; done
    restart=$(elapsed "$start")
    # Then a random 0–2 s more of shipping before the kill.
    sleep "$(echo "$RANDOM / 16384" | bc -l)"
    kill -KILL "$pid" 2>/dev/null || { echo "kill $kill_number: the run ended before its kill (store shipped)"; break; }
    restarts+=("$restart")
    wait "$pid" 2>/dev/null || true
    # The server ends the killed session (rolling its batch back) when it reads the closed socket.
    while [[ $(sql kills "SELECT count(*) FROM pg_stat_activity WHERE datname = 'kills' AND pid <> pg_backend_pid()") -ne 0 ]]; do sleep 0.05; done
    sleep 1.2 # cumulative statistics are flushed at most once a second
    read -r inserted kept <<<"$(inserted_and_kept)"
    rolled+=("$((inserted - kept))")
    echo "kill $kill_number: restart to first commit $(printf '%.2f' "${restarts[-1]}") s; shipped $(shipped_count) transactions so far; change rows rolled back by all kills so far: $((inserted - kept))"
done
if [[ ${#rolled[@]} -gt 0 ]]; then
    previous=0 per_kill=()
    for total in "${rolled[@]}"; do per_kill+=("$((total - previous))"); previous=$total; done
    sorted_restarts=$(printf '%.2f\n' "${restarts[@]}" | sort -n | tr '\n' ' ')
    echo "kills: ${#rolled[@]}; change rows rolled back per kill: ${per_kill[*]} (total ${rolled[-1]}, ≈ $((rolled[-1] / ${#rolled[@]} / 4)) transactions per kill at 4 changes each); restart to first commit (s, sorted): $sorted_restarts"
fi
start=$(now)
"$bin/logstore" ship "$store" --postgres "$(url throughput)" --json >/dev/null
echo "a restarted ship with nothing left to ship (open the ${transactions}-transaction store, connect, check): $(printf '%.2f' "$(elapsed "$start")") s"
echo "uptime: $(uptime)"

# 3. Lag under a steady save rate.
live="$work/live"
sql postgres "CREATE DATABASE lag"
"$bin/logstore-ship-figures" write "$live" --rate "$rate" --seconds "$seconds" >"$work/writer.json" &
writer=$!
pids+=("$writer")
until [[ -f "$live/store.meta" ]] && "$bin/logstore" history "$live" --json --limit 1 2>/dev/null | grep -q token; do sleep 0.05; done
follow_start=$(date -u +%Y-%m-%dT%H:%M:%S.%6NZ)
"$bin/logstore" ship "$live" --postgres "$(url lag)" --follow --json >"$work/follow.json" 2>"$work/follow.err" &
follower=$!
pids+=("$follower")
wait "$writer"
last=$(json "['lastOffset']" <"$work/writer.json")
until [[ "$(sql lag "SELECT token->>'offset' FROM logstore_shipping" 2>/dev/null)" == "$last" ]]; do sleep 0.1; done
kill -TERM "$follower" # SIGTERM: the tool ends --follow with its summary (background jobs ignore SIGINT)
wait "$follower" || true
echo "writer: $(cat "$work/writer.json")"
echo "follow summary: $(cat "$work/follow.json")"
sql lag "
    WITH per_transaction AS (
        SELECT DISTINCT ON (token_offset) token_offset, \"timestamp\",
               extract(epoch FROM pg_xact_commit_timestamp(xmin) - \"timestamp\") * 1000 AS lag_ms
        FROM logstore_changes WHERE kind <> 'reseed' ORDER BY token_offset)
    SELECT format('lag at %s saves/s: %s transactions after the first 3 s; save to PostgreSQL commit p50 %s ms, p99 %s ms, max %s ms',
                  $rate, count(*), round(percentile_cont(0.5) WITHIN GROUP (ORDER BY lag_ms)::numeric, 1),
                  round(percentile_cont(0.99) WITHIN GROUP (ORDER BY lag_ms)::numeric, 1), round(max(lag_ms)::numeric, 1))
    FROM per_transaction WHERE \"timestamp\" > '$follow_start'::timestamptz + interval '3 seconds'"
echo "uptime: $(uptime)"
