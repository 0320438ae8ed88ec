#!/usr/bin/env bash
# Runs the test suite under ThreadSanitizer and AddressSanitizer (issue 14, item 5).
#
#   Tools/sanitize/run.sh            # both, thread first
#   Tools/sanitize/run.sh thread     # one of them
#   Tools/sanitize/run.sh address -- --filter RepairCoverageTests   # extra `swift test` arguments
#
# Each sanitizer builds into its own scratch path (.build-tsan, .build-asan: instrumented objects
# cannot share .build with the plain build). A first build takes as long as a clean build of the
# package (swift-syntax included); later runs rebuild only what changed. The log of each run is
# written to .build-<tsan|asan>/sanitize.log; the script prints the duration and the test summary
# and exits non-zero when a run fails or a sanitizer reports anything.
#
# Environment: TSAN_OPTIONS / ASAN_OPTIONS are passed through. By default ASan reports leaks off
# (detect_leaks=0: the Swift runtime's and Foundation's process-lifetime caches are not ours) and
# both stop at the first report (halt_on_error=1) so a finding fails the run (set
# TSAN_OPTIONS=halt_on_error=0:suppressions=… to collect every report of one run). TSan reads
# Tools/sanitize/tsan-suppressions.txt (empty at present; what may go there is explained there).
# Under TSan the CTSanMutex target (Tools/sanitize/CTSanMutex) tells TSan about the standard
# library's Mutex slow paths, which it cannot see otherwise.
set -euo pipefail
cd "$(dirname "$0")/../.."

sanitizers=()
extra=()
while [[ $# -gt 0 ]]; do
    case "$1" in
        thread|address) sanitizers+=("$1"); shift ;;
        --) shift; extra=("$@"); break ;;
        *) echo "usage: $0 [thread] [address] [-- swift test arguments]" >&2; exit 2 ;;
    esac
done
[[ ${#sanitizers[@]} -eq 0 ]] && sanitizers=(thread address)

export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=0:halt_on_error=1}"
export TSAN_OPTIONS="${TSAN_OPTIONS:-halt_on_error=1:suppressions=$(pwd)/Tools/sanitize/tsan-suppressions.txt}"

status=0
for sanitizer in "${sanitizers[@]}"; do
    case "$sanitizer" in
        thread) scratch=.build-tsan ;;
        address) scratch=.build-asan ;;
    esac
    mkdir -p "$scratch"
    log="$scratch/sanitize.log"
    start=$(date +%s)
    echo "== swift test --sanitize=$sanitizer --scratch-path $scratch ${extra[*]:-}"
    set +e
    swift test --sanitize="$sanitizer" --scratch-path "$scratch" "${extra[@]}" >"$log" 2>&1
    code=$?
    set -e
    seconds=$(( $(date +%s) - start ))
    reports=$(grep -c -E "WARNING: ThreadSanitizer|ERROR: AddressSanitizer" "$log" || true)
    grep -E "^Test Suite 'All tests' (passed|failed)|Executed [0-9]+ tests|Test run with" "$log" | tail -3 || true
    echo "== $sanitizer: exit $code, sanitizer reports $reports, $seconds s (log: $log)"
    if [[ $code -ne 0 || $reports -ne 0 ]]; then status=1; fi
done
exit $status
