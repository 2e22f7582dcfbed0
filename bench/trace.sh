#!/usr/bin/env bash
# The cost of one traced call (entry + exit) for each tracer, next to the
# cost of one TSC read and one clock_gettime measured in the same run, and
# the bytes written per event.
#
# bench/trace/loop.c (no instrumentation) calls leaf() (bench/trace/leaf.c,
# -O2 with gcc -pg -mfentry -mrecord-mcount) CALLS times. Configurations:
#   plain     leaf() built without instrumentation (the anchor of overheads)
#   bare      the -pg build, no runtime (leaf calls glibc's __fentry__)
#   off       runtime loaded, no tracer (every site a NOP)
#   graph     FNTRACE_DATA set, tracer function_graph (the default)
#   function  tracer function (entry with caller, 16 bytes per event)
#   profile   tracer profile (no events)
#   rdtsc / clock   the anchors: one __rdtsc() / clock_gettime() per iteration
# ns per iteration: median (min-max) of RUNS processes, round-robin.
# Instructions per call: callgrind on 100,000 and 200,000 calls, the
# difference divided by 100,000 (cancels start-up and exit).
# Usage: bench/trace.sh [RUNS]   (writes bench/out/trace.md and prints it)
set -euo pipefail
runs=${1:-10}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
out=$here/out/trace
mkdir -p "$out"
calls=5000000

need=()
for tool in valgrind gcc python3; do
    command -v "$tool" >/dev/null || need+=("$tool")
done
if ((${#need[@]})); then
    apt-get update -qq
    printf '%s\n' "${need[@]}" | xargs apt-get install -y -qq >/dev/null
fi
(cd "$root" && cargo build --release -q -p fntrace-runtime)
so=$root/target/release/libfntrace_runtime.so

gcc -O2 -pg -mfentry -mrecord-mcount -c "$here/trace/leaf.c" -o "$out/leaf.o"
gcc -O2 -c "$here/trace/loop.c" -o "$out/loop.o"
gcc "$out/loop.o" "$out/leaf.o" -o "$out/loop" 2>&1 | grep -v -e 'read-only section' -e DT_TEXTREL >&2 || true
gcc -O2 -c "$here/trace/leaf.c" -o "$out/leaf-plain.o"
gcc "$out/loop.o" "$out/leaf-plain.o" -o "$out/loop-plain"

configs=(plain bare off graph function profile rdtsc clock)
run() { # config calls [wrapper...] -> the program's output
    local c=$1 n=$2
    shift 2
    local data=$out/data-$c
    rm -rf "$data"
    mkdir -p "$data"
    case $c in
    plain) "$@" "$out/loop-plain" call "$n" ;;
    bare) "$@" "$out/loop" call "$n" ;;
    rdtsc | clock) "$@" "$out/loop" "$c" "$n" ;;
    off) env LD_PRELOAD="$so" "$@" "$out/loop" call "$n" ;;
    graph) env LD_PRELOAD="$so" FNTRACE_DATA="$data" "$@" "$out/loop" call "$n" ;;
    function | profile) env LD_PRELOAD="$so" FNTRACE_DATA="$data" FNTRACE_TRACER=$c "$@" "$out/loop" call "$n" ;;
    esac
}
: >"$out/ns"
for ((r = 0; r < runs; r++)); do
    for c in "${configs[@]}"; do
        echo "$c $(run "$c" "$calls")" >>"$out/ns"
    done
done
# Bytes per event: the graph run's events files over its 2 events per call.
bytes_graph=$(cat "$out"/data-graph/p*/t*.events | wc -c)
bytes_function=$(cat "$out"/data-function/p*/t*.events | wc -c)
instructions() { # config calls -> instructions of the whole run
    run "$1" "$2" valgrind --tool=callgrind --callgrind-out-file="$out/cg.out" --smc-check=all >/dev/null 2>"$out/cg.err"
    grep -o 'Collected : [0-9]*' "$out/cg.err" | grep -o '[0-9]*$'
}
: >"$out/instr"
for c in "${configs[@]}"; do
    a=$(instructions "$c" 100000)
    b=$(instructions "$c" 200000)
    echo "$c $a $b" >>"$out/instr"
done

python3 - "$out" "$runs" "$calls" "$bytes_graph" "$bytes_function" <<'PY'
import os, statistics, subprocess, sys
out, runs, calls, bg, bf = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
ns = {}
for line in open(os.path.join(out, "ns")):
    c, v = line.split()
    ns.setdefault(c, []).append(float(v))
instr = {}
for line in open(os.path.join(out, "instr")):
    c, a, b = line.split()
    instr[c] = (int(b) - int(a)) / 100000
med = {c: statistics.median(v) for c, v in ns.items()}
bare, tsc = med["plain"], med["rdtsc"]
cpu = subprocess.run(["sh", "-c", "grep -m1 'model name' /proc/cpuinfo | cut -d: -f2"], capture_output=True, text=True).stdout.strip()
rows = [
    "| configuration | ns per iteration, median (min–max) | over plain, ns | ÷ one rdtsc | instructions per iteration (callgrind) |",
    "|---|---|---|---|---|",
]
for c in ["plain", "bare", "off", "graph", "function", "profile", "rdtsc", "clock"]:
    v = ns[c]
    over = "" if c in ("plain", "rdtsc", "clock") else f"{med[c] - bare:+.2f}"
    rows.append(f"| {c} | {med[c]:.2f} ({min(v):.2f}–{max(v):.2f}) | {over} | {med[c] / tsc:.2f} | {instr[c]:.1f} |")
text = "\n".join([
    f"Machine: {cpu}, {os.cpu_count()} cores. Runs: {runs} × {calls:,} iterations (round-robin).",
    "",
    *rows,
    "",
    f"Bytes per event: function_graph {bg / (2 * calls):.2f} ({bg:,} bytes for {2 * calls:,} events); "
    f"function {bf / calls:.2f} ({bf:,} bytes for {calls:,} events).",
])
open(os.path.join(out, "..", "trace.md"), "w").write(text + "\n")
print(text)
PY
