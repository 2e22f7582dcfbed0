#!/usr/bin/env bash
# The cost of recording arguments and return values (#20): a function with
# two integer arguments, traced without values, with -A (both arguments),
# and with -A and -R (and its return value), against uftrace's -A/-R on the
# same binary, in one run.
#
#   bench/args.sh [RUNS]     (default 7)
#
# Workload: bench/run/args.c, gcc -O2 -pg -mfentry: N calls of add2(a, b).
# Configurations:
#   plain        untraced
#   fntrace      fntrace record (function_graph)
#   fntrace-A    fntrace record -A 'add2@arg1/i32,arg2/i32'
#   fntrace-AR   ... and -R 'add2@retval/i32'
#   uftrace      uftrace record
#   uftrace-A    uftrace record -A 'add2@arg1/i32,arg2/i32'
#   uftrace-AR   ... and -R 'add2@retval/i32'
# ns per call: the workload's own clock around its work, median of RUNS,
# minus plain's, divided by N; and the bytes of events per call.
set -euo pipefail
runs=${1:-7}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
out=$here/out/args
mkdir -p "$out"
for tool in gcc uftrace python3; do
    command -v "$tool" >/dev/null || { echo "bench/args.sh needs $tool (apt-get install $tool)" >&2; exit 1; }
done
[ -n "${BENCH_NO_BUILD:-}" ] || (cd "$root" && cargo build --release -q -p fntrace -p fntrace-runtime)
fntrace=$root/target/release/fntrace

gcc -O2 -pg -mfentry -I"$here/run" "$here/run/args.c" -o "$out/args"
n=2000000
A='add2@arg1/i32,arg2/i32'
R='add2@retval/i32'
configs=(plain fntrace fntrace-A fntrace-AR uftrace uftrace-A uftrace-AR)
run() { # config -> the workload's "NS RESULT"
    local c=$1 d=$out/data-$1 cmd=("$out/args" "$n")
    rm -rf "$d"
    case $c in
    plain) "${cmd[@]}" ;;
    fntrace) "$fntrace" record -o "$d" --buffer-size 256M -- "${cmd[@]}" ;;
    fntrace-A) "$fntrace" record -o "$d" --buffer-size 256M -A "$A" -- "${cmd[@]}" ;;
    fntrace-AR) "$fntrace" record -o "$d" --buffer-size 256M -A "$A" -R "$R" -- "${cmd[@]}" ;;
    uftrace) uftrace record -d "$d" "${cmd[@]}" ;;
    uftrace-A) uftrace record -d "$d" -A "$A" "${cmd[@]}" ;;
    uftrace-AR) uftrace record -d "$d" -A "$A" -R "$R" "${cmd[@]}" ;;
    esac
}
: >"$out/ns"
for ((r = 0; r < runs; r++)); do
    for c in "${configs[@]}"; do
        line=$(run "$c" 2>"$out/err") || true
        read -r ns _ <<<"$line"
        [ -n "${ns:-}" ] || { echo "bench/args.sh: $c printed nothing:" >&2; cat "$out/err" >&2; exit 1; }
        echo "$c $ns $(du -sb "$out/data-$c" 2>/dev/null | cut -f1 || echo 0)" >>"$out/ns"
    done
done
python3 - "$out" "$runs" "$n" <<'PY'
import statistics, sys
out, runs, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
ns, size = {}, {}
for line in open(f"{out}/ns"):
    c, v, b = line.split()
    ns.setdefault(c, []).append(float(v))
    size[c] = int(b)
med = {c: statistics.median(v) for c, v in ns.items()}
per = {c: (med[c] - med["plain"]) / n for c in med}
print(f"`bench/args.sh {runs}`: ns per call of add2(a, b) over the untraced run (median of {runs}), N = {n}\n")
print("| config | ns per call | over its tracer without values | data bytes per call |")
print("|---|---|---|---|")
for c in ["fntrace", "fntrace-A", "fntrace-AR", "uftrace", "uftrace-A", "uftrace-AR"]:
    base = per["fntrace" if c.startswith("fntrace") else "uftrace"]
    print(f"| {c} | {per[c]:.1f} | +{per[c] - base:.1f} | {size[c] / n:.1f} |")
print(f"\nplain itself: {med['plain'] / n:.2f} ns per call")
PY
