#!/usr/bin/env bash
# bench/attach.sh [CYCLES]: what `fntrace attach` costs a running process.
#
# Two targets built with gcc -pg -mfentry (bench/attach/pause.c): "small"
# (a few functions) and "large" (100,000 more, bench/attach/gen.sh). A
# worker thread runs units of traced calls and notes the longest gap
# between two units; the main thread, blocked in read(), is the one
# fntrace stops to load the runtime. "quiet" is small with a worker that
# sleeps 1 ms after each unit (a mostly idle machine). For each target, CYCLES windows of
# 0.35 s without fntrace, then CYCLES windows each holding one whole
# `fntrace attach PID --duration 200ms` (attach, record, detach). Printed:
# fntrace's own timings (info.json: attach latency, set-up in the target,
# the injected thread's stop, detach) and the workers' longest gap in the
# idle and in the attach windows. Medians and maxima over the cycles.
# gen.o (100,000 functions, a minute to compile) is kept between runs:
# remove bench/out/attach/gen.o after changing gen.sh.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
cycles=${1:-20}
out=$root/bench/out/attach
mkdir -p "$out"
fntrace=${FNTRACE:-$root/target/release/fntrace}
if [ -z "${FNTRACE:-}" ]; then
    (cd "$root" && cargo build --release -q -p fntrace -p fntrace-runtime)
fi

gcc -O2 -pg -mfentry "$here/attach/pause.c" -o "$out/small" -lpthread
if [ ! -s "$out/gen.o" ]; then
    "$here/attach/gen.sh" 100000 > "$out/gen.c"
    gcc -O1 -pg -mfentry -c "$out/gen.c" -o "$out/gen.o"
fi
if [ ! -x "$out/large" ] || [ "$here/attach/pause.c" -nt "$out/large" ]; then
    gcc -O2 -pg -mfentry -DGEN "$here/attach/pause.c" "$out/gen.o" -o "$out/large" -lpthread
fi

measure() {
    local name=$1 bin=$1 arg=
    if [ "$name" = quiet ]; then bin=small arg=quiet; fi
    coproc TARGET { exec "$out/$bin" $arg; }
    local line pid
    read -r line <&"${TARGET[0]}"
    pid=${line#ready }
    local results=$out/$name.tsv
    : > "$results"
    # Idle windows.
    for ((i = 0; i < cycles; i++)); do
        echo window >&"${TARGET[1]}"; read -r line <&"${TARGET[0]}"
        sleep 0.35
        echo report >&"${TARGET[1]}"; read -r line <&"${TARGET[0]}"
        printf 'idle\t%s\n' "${line%% *}" >> "$results"
    done
    # Attach windows.
    for ((i = 0; i < cycles; i++)); do
        echo window >&"${TARGET[1]}"; read -r line <&"${TARGET[0]}"
        "$fntrace" attach "$pid" --duration 200ms -o "$out/$name.data" 2> /dev/null
        echo report >&"${TARGET[1]}"; read -r line <&"${TARGET[0]}"
        python3 - "$out/$name.data/info.json" "${line%% *}" >> "$results" <<'PY'
import json, sys
a = json.load(open(sys.argv[1]))["attach"]
print("attach\t%s\t%d\t%d\t%d\t%d\t%d\t%d" % (sys.argv[2], a["attach_ns"], a["setup_ns"], a["longest_pause_ns"],
      a["detach_ns"] or 0, a["sites"], a["loaded"]))
PY
    done
    kill "$pid"
    wait 2> /dev/null || true
}

for name in small quiet large; do
    measure "$name"
done

python3 - "$out" "$cycles" <<'PY'
import statistics as st, sys
out, cycles = sys.argv[1], sys.argv[2]
def ms(ns): return "%.2f ms" % (ns / 1e6)
def us(ns): return "%.0f µs" % (ns / 1e3)
print(f"| target | sites | attach latency (first / median of the others) | set-up in the target | injected thread stopped: median / max | detach: median | worker's longest gap: idle median / max | during attach: median / max |")
print("|---|---|---|---|---|---|---|---|")
for name in ["small", "quiet", "large"]:
    rows = [l.rstrip("\n").split("\t") for l in open(f"{out}/{name}.tsv")]
    idle = [int(r[1]) for r in rows if r[0] == "idle"]
    att = [[int(x) for x in r[1:]] for r in rows if r[0] == "attach"]
    gap = [a[0] for a in att]
    lat = [a[1] for a in att]
    setup = [a[2] for a in att]
    pause = [a[3] for a in att]
    det = [a[4] for a in att]
    sites = att[0][5]
    print(f"| {name} | {sites:,} | {ms(lat[0])} / {ms(st.median(lat[1:]))} | {ms(setup[0])} / {ms(st.median(setup[1:]))} | "
          f"{us(st.median(pause))} / {us(max(pause))} | {ms(st.median(det))} | {us(st.median(idle))} / {us(max(idle))} | "
          f"{us(st.median(gap))} / {us(max(gap))} |")
print(f"\n{cycles} cycles per target.")
PY
