#!/usr/bin/env bash
# The libFuzzer targets of issue 14, item 4 (docs/RELIABILITY.md).
#
#   Tools/fuzz/run.sh build                      # build .build-fuzz/logstore-fuzz
#   Tools/fuzz/run.sh run <target|all> [seconds] [libFuzzer arguments…]
#   Tools/fuzz/run.sh replay [target|all]        # run the committed corpus once (no fuzzing)
#
# Targets: record transaction schema checkpoint bookmark token directory (see
# Sources/LogStore/Records/DecoderFuzzing.swift). Each run fuzzes with AddressSanitizer, a 10 s
# per-input timeout (a hang is a finding), and -malloc_limit_mb / -rss_limit_mb at the record
# maximum (16 MiB) plus slack: any single allocation above it is reported as a finding. New inputs
# are kept in .build-fuzz/corpus/<target>; crashers are written to .build-fuzz/findings/<target>/.
# Copy a crasher into Tools/fuzz/corpus/<target>/ (named after the bug) once it is fixed: the
# default `swift test` replays that folder (FuzzCorpusTests). Merge newly kept inputs with
#   .build-fuzz/logstore-fuzz <target> -merge=1 Tools/fuzz/corpus/<target> .build-fuzz/corpus/<target>
#
# The build compiles the three modules a target needs (Logging, LogStoreEngine, LogStore) with
# swiftc directly, optimized (-O, asserts kept), instrumented for coverage (edges, comparisons) and
# AddressSanitizer, and links
# libFuzzer without its main: logstore-fuzz's own main hands the target to LLVMFuzzerRunDriver.
# (A SwiftPM build would instrument and rebuild swift-syntax for the macro plugin as well.)
# LOGSTORE_FUZZ_OUT chooses another output folder than .build-fuzz; LOGSTORE_FUZZ_OPT=-Onone builds
# unoptimized (slower per input, easier to debug).
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
out=${LOGSTORE_FUZZ_OUT:-$root/.build-fuzz}
targets=(record transaction schema checkpoint bookmark token directory)

build() {
    mkdir -p "$out/modules"
    local toolchain fuzzer log_sources
    toolchain=$(dirname "$(dirname "$(command -v swiftc)")")
    fuzzer=$(ls "$toolchain"/lib/clang/*/lib/linux/libclang_rt.fuzzer_no_main-x86_64.a | head -1)
    log_sources=$root/.build/checkouts/swift-log/Sources/Logging
    if [[ ! -d $log_sources ]]; then swift package resolve; fi
    # -O by default (LOGSTORE_FUZZ_OPT=-Onone for a debugger), with -assert-config Debug so every
    # assert() still traps as in a debug build; bounds, overflow and exclusivity checks stay on at -O.
    local optimization=${LOGSTORE_FUZZ_OPT:--O}
    local flags=("$optimization" -assert-config Debug -g -swift-version 6 -sanitize=address
        -sanitize-coverage=edge,trace-cmp,inline-8bit-counters,pc-table -I "$out/modules"
        -Xcc -I -Xcc "$root/Sources/CCRC32C/include" -I "$root/Sources/CLZ4")
    local start=$(date +%s)
    clang -c -O1 -g -fsanitize=address -fsanitize-coverage=edge,trace-cmp,inline-8bit-counters,pc-table \
        -I "$root/Sources/CCRC32C/include" "$root/Sources/CCRC32C/crc32c.c" -o "$out/crc32c.o"
    clang -c -O1 -g -fsanitize=address -I "$root/Sources/CFutex/include" "$root/Sources/CFutex/cfutex.c" -o "$out/cfutex.o"
    # The C targets have no module maps of their own (SwiftPM makes them): make the same.
    local c_module header
    for c_module in CCRC32C:ccrc32c.h CFutex:cfutex.h; do
        header=${c_module#*:}
        c_module=${c_module%%:*}
        mkdir -p "$out/modules/$c_module"
        printf 'module %s {\n    umbrella header "%s"\n    export *\n}\n' \
            "$c_module" "$root/Sources/$c_module/include/$header" >"$out/modules/$c_module/module.modulemap"
    done
    local module_maps=(-Xcc -fmodule-map-file="$out/modules/CCRC32C/module.modulemap"
        -Xcc -fmodule-map-file="$out/modules/CFutex/module.modulemap")
    swiftc "${flags[@]}" -swift-version 5 -parse-as-library -emit-library -static -emit-module \
        -module-name Logging -package-name swift_log -emit-module-path "$out/modules/Logging.swiftmodule" \
        $(find "$log_sources" -name '*.swift') -o "$out/libLogging.a"
    swiftc "${flags[@]}" -parse-as-library -emit-library -static -emit-module -module-name LogStoreEngine -package-name LogStore \
        -emit-module-path "$out/modules/LogStoreEngine.swiftmodule" "${module_maps[@]}" \
        $(find "$root/Sources/LogStoreEngine" -name '*.swift') -o "$out/libLogStoreEngine.a"
    swiftc "${flags[@]}" -parse-as-library -emit-library -static -emit-module -module-name LogStore -package-name LogStore \
        -emit-module-path "$out/modules/LogStore.swiftmodule" "${module_maps[@]}" \
        $(find "$root/Sources/LogStore" -name '*.swift') -o "$out/libLogStore.a"
    swiftc "${flags[@]}" -parse-as-library -D LOGSTORE_FUZZ "${module_maps[@]}" \
        "$root/Tools/fuzz/Sources/LogStoreFuzz.swift" \
        -L "$out" -lLogStore -lLogStoreEngine -lLogging "$out/crc32c.o" "$out/cfutex.o" -llz4 \
        -Xlinker "$fuzzer" -lstdc++ -o "$out/logstore-fuzz" 2> >(grep -v "Cannot export local symbol" >&2)
    echo "built $out/logstore-fuzz in $(( $(date +%s) - start )) s"
}

run_target() {
    local target=$1 seconds=$2
    shift 2
    mkdir -p "$out/corpus/$target" "$out/findings/$target"
    echo "== $target: $seconds s"
    # 16 MiB records; 64 MiB leaves room for the decoded copy and LZ4's output buffer, not for
    # anything sized by a hostile length field.
    "$out/logstore-fuzz" "$target" "$out/corpus/$target" "$root/Tools/fuzz/corpus/$target" \
        -max_total_time="$seconds" -timeout=10 -malloc_limit_mb=64 -rss_limit_mb=2048 \
        -artifact_prefix="$out/findings/$target/" -print_final_stats=1 "$@" 2>&1 |
        tee "$out/$target.log" | grep -E "^(#[0-9]+ +DONE|Done|stat::number_of_executed_units|stat::peak_rss|==[0-9]+==ERROR|SUMMARY|artifact)" || true
}

case "${1:-}" in
    build) build ;;
    run)
        [[ $# -ge 2 ]] || { echo "usage: $0 run <target|all> [seconds] [libFuzzer arguments…]" >&2; exit 2; }
        which=$2
        seconds=${3:-60}
        shift $(( $# >= 3 ? 3 : 2 ))
        [[ -x $out/logstore-fuzz ]] || build
        if [[ $which == all ]]; then
            for target in "${targets[@]}"; do run_target "$target" "$seconds" "$@"; done
        else
            run_target "$which" "$seconds" "$@"
        fi
        ;;
    replay)
        which=${2:-all}
        [[ -x $out/logstore-fuzz ]] || build
        for target in "${targets[@]}"; do
            [[ $which == all || $which == "$target" ]] || continue
            "$out/logstore-fuzz" "$target" --replay "$root/Tools/fuzz/corpus/$target"
        done
        ;;
    *) echo "usage: $0 build | run <target|all> [seconds] [libFuzzer arguments…] | replay [target|all]" >&2; exit 2 ;;
esac
