#!/usr/bin/env bash
# The cost of library calls (#19): a program's call of a tiny function of a
# plain shared library traced at the callee behind its guard, against the
# same call untraced, a bare program function traced (the anchor), and
# uftrace's PLT hooking, in one run; and what the guard costs the calls a
# library makes of its own traced function.
#
#   bench/libcall.sh [RUNS]     (default 7)
#
# Workloads (bench/run/libloop.c, libtiny.c, loop.c, all gcc -O2):
#   call    N calls of libtiny's `tiny` from the program (PLT)
#   inner   one call of libtiny's `inner`, which calls `tiny` N times
#   leaf    N calls of the program's own `leaf` (loop.c), for the anchor
# Configurations:
#   plain         untraced
#   fntrace       fntrace record (function_graph): `tiny` a library call
#   fntrace-mod   fntrace record -P '*:mod:libtiny' (every caller traced)
#   uftrace       uftrace record -P . (its library calls: PLT hooks)
# ns per call: the workload's own clock around its work, median of RUNS,
# minus plain's, divided by N.
set -euo pipefail
runs=${1:-7}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
out=$here/out/libcall
mkdir -p "$out"
for tool in gcc uftrace python3; do
    command -v "$tool" >/dev/null || { echo "bench/libcall.sh needs $tool (apt-get install $tool)" >&2; exit 1; }
done
[ -n "${BARE_NO_BUILD:-}" ] || (cd "$root" && cargo build --release -q -p fntrace -p fntrace-runtime)
fntrace=$root/target/release/fntrace

gcc -O2 -fPIC -shared "$here/run/libtiny.c" -o "$out/libtiny.so"
gcc -O2 -fno-builtin -I"$here/run" "$here/run/libloop.c" -o "$out/libloop" -L"$out" -ltiny -Wl,-rpath,"$out"
gcc -O2 -I"$here/run" "$here/run/loop.c" -o "$out/loop"
n=2000000
configs=(plain fntrace fntrace-mod uftrace)
run() { # config workload -> the workload's "NS RESULT"
    local c=$1 w=$2 d=$out/data cmd
    rm -rf "$d"
    case $w in
    call) cmd=("$out/libloop" "$n") ;;
    inner) cmd=("$out/libloop" "$n" inner) ;;
    leaf) cmd=("$out/loop" "$n") ;;
    esac
    case $c in
    plain) "${cmd[@]}" ;;
    fntrace) "$fntrace" record -o "$d" --buffer-size 256M -- "${cmd[@]}" ;;
    fntrace-mod) "$fntrace" record -o "$d" --buffer-size 256M --force -P '*:mod:libtiny' -P 'leaf' -- "${cmd[@]}" ;;
    uftrace) uftrace record -P . -d "$d" "${cmd[@]}" ;;
    esac
}
: >"$out/ns"
for ((r = 0; r < runs; r++)); do
    for w in call inner leaf; do
        for c in "${configs[@]}"; do
            line=$(run "$c" "$w" 2>"$out/err") || true
            read -r ns _ <<<"$line"
            [ -n "${ns:-}" ] || { echo "bench/libcall.sh: $c $w printed nothing:" >&2; cat "$out/err" >&2; exit 1; }
            echo "$w $c $ns" >>"$out/ns"
        done
    done
done
python3 - "$out" "$runs" "$n" <<'PY'
import statistics, sys
out, runs, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
ns = {}
for line in open(f"{out}/ns"):
    w, c, v = line.split()
    ns.setdefault((w, c), []).append(float(v))
med = {k: statistics.median(v) for k, v in ns.items()}
per = {(w, c): (med[(w, c)] - med[(w, "plain")]) / n for (w, c) in med}
print(f"`bench/libcall.sh {runs}`: ns per call over the untraced run (median of {runs}), N = {n}\n")
print("| config | call (program → libtiny) | inner (libtiny → itself) | leaf (program's own, bare) | call ×leaf |")
print("|---|---|---|---|---|")
for c in ["plain", "fntrace", "fntrace-mod", "uftrace"]:
    ratio = per[("call", c)] / per[("leaf", "fntrace")] if per[("leaf", "fntrace")] > 0 else 0
    print(f"| {c} | {per[('call', c)]:.1f} | {per[('inner', c)]:.1f} | {per[('leaf', c)]:.1f} | {ratio:.2f} |")
print(f"\nplain itself: call {med[('call', 'plain')] / n:.2f} ns, inner {med[('inner', 'plain')] / n:.2f} ns, leaf {med[('leaf', 'plain')] / n:.2f} ns per call")
PY
