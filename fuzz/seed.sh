#!/usr/bin/env bash
# Builds a seed corpus of real compiler output for the fuzz targets:
# objects and executables in every instrumentation style fntrace reads.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$here/../crates/cli/tests/programs/c
for target in discover recordmcount; do mkdir -p "$here/corpus/$target"; done
out=$here/corpus/discover
build() { # name compiler flags...
    local name=$1 cc=$2; shift 2
    "$cc" -O2 "$@" -c "$src/util.c" -o "$out/$name.o"
    "$cc" -O2 "$@" "$src/main.c" "$src/util.c" -o "$out/$name.exe" 2>/dev/null || true
}
build gcc-fentry gcc -pg -mfentry -mrecord-mcount
build gcc-fentry-scan gcc -pg -mfentry -ffunction-sections
build gcc-mcount gcc -pg -mrecord-mcount
build gcc-return gcc -pg -mfentry -mrecord-mcount -minstrument-return=nop5 -mrecord-return
build gcc-patchable gcc -fpatchable-function-entry=5,2 -ffunction-sections
build clang-fentry clang-16 -pg -mfentry -ffunction-sections
build clang-xray clang-16 -fxray-instrument -fxray-instruction-threshold=1
cp "$out"/*.o "$here/corpus/recordmcount/"
ls "$out" | wc -l
