#!/usr/bin/env bash
# Benchmark of `fntrace list` on a program with 20,000 functions, in each
# instrumentation style, against anchors measured in the same run:
#   nm -C      reads and demangles the symbol table (the least any lister does)
#   objdump -d decodes all the code (what finding calls without a table costs)
# Wall time: hyperfine, median and min-max of repeated runs.
# Instructions: valgrind --tool=callgrind (stable on a noisy machine).
# Usage: bench/list.sh [RUNS]   (writes bench/out/list.md and prints it)
set -euo pipefail
runs=${1:-20}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
out=$here/out
mkdir -p "$out"

need=()
for tool in hyperfine valgrind gcc clang-16 nm objdump python3; do
    command -v "$tool" >/dev/null || need+=("$tool")
done
if ((${#need[@]})); then
    apt-get update -qq
    for tool in "${need[@]}"; do
        case $tool in nm | objdump) echo binutils ;; *) echo "$tool" ;; esac
    done | sort -u | xargs apt-get install -y -qq >/dev/null
fi

(cd "$root" && cargo build --release -q -p fntrace)
fntrace=$root/target/release/fntrace
"$here/gen-functions.sh" 20000 >"$out/f20k.c"

styles=(
    "gcc-fentry-recorded|gcc -pg -mfentry -mrecord-mcount"
    "gcc-mcount-scanned|gcc -pg"
    "gcc-patchable|gcc -fpatchable-function-entry=5"
    "clang-fentry-scanned|clang-16 -pg -mfentry"
    "clang-xray|clang-16 -fxray-instrument -fxray-instruction-threshold=1"
)

instructions() { # command... -> instruction count
    valgrind --tool=callgrind --callgrind-out-file=/dev/null "$@" 2>&1 >/dev/null |
        sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
}

table=$out/list.md
{
    echo "| style | functions | fntrace list ms (min-max) | nm -C ms | objdump -d ms | list/nm | list/objdump | fntrace Minstr | nm -C Minstr | instr list/nm |"
    echo "|---|---|---|---|---|---|---|---|---|---|"
} >"$table"

for entry in "${styles[@]}"; do
    name=${entry%%|*}
    cc=${entry#*|}
    bin=$out/$name
    [ -x "$bin" ] || $cc -O0 "$out/f20k.c" -o "$bin" 2>/dev/null
    count=$("$fntrace" list "$bin" 'f[0-9]*' | wc -l)
    hyperfine -N -w 2 -r "$runs" --export-json "$out/$name.json" \
        "$fntrace list $bin" "nm -C $bin" "objdump -d $bin" >/dev/null
    read -r list_ms list_min list_max nm_ms objdump_ms < <(python3 -c 'import json,sys
r=json.load(open(sys.argv[1]))["results"]
print(*("%.2f" % (v*1e3) for v in (r[0]["median"], r[0]["min"], r[0]["max"], r[1]["median"], r[2]["median"])))' "$out/$name.json")
    list_i=$(instructions "$fntrace" list "$bin")
    nm_i=$(instructions nm -C "$bin")
    python3 - "$name" "$count" "$list_ms" "$list_min" "$list_max" "$nm_ms" "$objdump_ms" "$list_i" "$nm_i" >>"$table" <<'EOF'
import sys
name, count, ms, lo, hi, nm, od, li, ni = sys.argv[1:]
ms, lo, hi, nm, od, li, ni = map(float, (ms, lo, hi, nm, od, li, ni))
print(f"| {name} | {count} | {ms:.1f} ({lo:.1f}-{hi:.1f}) | {nm:.1f} | {od:.1f} | "
      f"{ms/nm:.2f} | {ms/od:.3f} | {li/1e6:.1f} | {ni/1e6:.1f} | {li/ni:.2f} |")
EOF
done

{
    echo
    echo "Machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores, $(uname -r)."
    echo "Command: bench/list.sh $runs (hyperfine -N, $runs runs after 2 warm-ups; callgrind for instructions)."
} >>"$table"
cat "$table"
