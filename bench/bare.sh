#!/usr/bin/env bash
# The cost of a traced call of a function no compiler prepared (a bare
# site, #19) against a compiler site's, and against uftrace's full-dynamic
# mode (-P .) on the same plain build, in one run.
#
#   bench/bare.sh [RUNS]     (default 7)
#
# Workloads: bench/run/loop.c (N calls of a tiny leaf) and fib.c (deep
# recursion), built plain (gcc -O2) and with -pg -mfentry. Configurations:
#   plain         the plain build, untraced
#   fentry        fntrace record (function_graph) on the -pg -mfentry build
#   bare          fntrace record (function_graph) on the plain build
#   bare-function fntrace record --tracer function on the plain build
#   uftrace-P     uftrace record -P . --no-libcall on the plain build
# Two numbers per configuration and workload: ns per call (the workload's
# own clock around its work, median of RUNS, minus plain's, divided by the
# calls), and instructions per call (callgrind, exact: the difference
# between two sizes divided by the difference in calls).
set -euo pipefail
runs=${1:-7}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
out=$here/out/bare
mkdir -p "$out"
for tool in gcc uftrace valgrind python3; do
    command -v "$tool" >/dev/null || { echo "bench/bare.sh needs $tool (apt-get install $tool)" >&2; exit 1; }
done
[ -n "${BARE_NO_BUILD:-}" ] || (cd "$root" && cargo build --release -q -p fntrace -p fntrace-runtime)
fntrace=$root/target/release/fntrace

for w in loop fib; do
    gcc -O2 -I"$here/run" "$here/run/$w.c" -o "$out/$w-plain"
    gcc -O2 -pg -mfentry -mrecord-mcount -I"$here/run" "$here/run/$w.c" -o "$out/$w-fentry"
done
declare -A size=([loop]=2000000 [fib]=27)
declare -A cg=([loop]="100000 200000" [fib]="18 19")
calls() { # workload n -> calls made (main included)
    case $1 in
    loop) echo $(($2 + 1)) ;;
    fib) python3 -c "
f = [0, 1]
for i in range(2, $2 + 2): f.append(f[-1] + f[-2])
print(2 * f[$2 + 1] - 1 + 1)" ;;
    esac
}
configs=(plain fentry bare bare-function uftrace-P)
run() { # config workload n [prefix...] -> the workload's "NS RESULT"
    local c=$1 w=$2 n=$3 d=$out/data
    shift 3
    rm -rf "$d"
    case $c in
    plain) "$@" "$out/$w-plain" "$n" ;;
    fentry) "$@" "$fntrace" record -o "$d" --buffer-size 256M -- "$out/$w-fentry" "$n" ;;
    bare) "$@" "$fntrace" record -o "$d" --buffer-size 256M -- "$out/$w-plain" "$n" ;;
    bare-function) "$@" "$fntrace" record -o "$d" --buffer-size 256M --tracer function -- "$out/$w-plain" "$n" ;;
    uftrace-P) "$@" uftrace record --no-libcall -P . -d "$d" "$out/$w-plain" "$n" ;;
    esac
}

: >"$out/ns"
for ((r = 0; r < runs; r++)); do
    for w in loop fib; do
        for c in "${configs[@]}"; do
            line=$(run "$c" "$w" "${size[$w]}" 2>"$out/err") || true
            read -r ns _ <<<"$line"
            [ -n "${ns:-}" ] || { echo "bench/bare.sh: $c $w printed nothing:" >&2; cat "$out/err" >&2; exit 1; }
            echo "$w $c $ns" >>"$out/ns"
        done
    done
done
: >"$out/instr"
for w in loop fib; do
    for c in "${configs[@]}"; do
        for n in ${cg[$w]}; do
            rm -f "$out"/cg.*
            run "$c" "$w" "$n" valgrind --tool=callgrind --smc-check=all --trace-children=yes \
                --callgrind-out-file="$out/cg.%p" >/dev/null 2>&1 || true
            i=$(grep -lE "^cmd: +[^ ]*/$w-(plain|fentry) $n\$" "$out"/cg.* | head -1 | xargs grep -h '^totals:' | awk '{ print $2 }')
            echo "$w $c $n ${i:-0}" >>"$out/instr"
        done
    done
done

python3 - "$out" "$runs" "${size[loop]}" "${size[fib]}" "$(calls loop "${size[loop]}")" "$(calls fib "${size[fib]}")" \
    "$(calls loop 100000) $(calls loop 200000) $(calls fib 18) $(calls fib 19)" <<'PY'
import statistics, sys
out, runs = sys.argv[1], int(sys.argv[2])
calls = {"loop": int(sys.argv[5]), "fib": int(sys.argv[6])}
cl, cl2, cf, cf2 = map(int, sys.argv[7].split())
cg_calls = {"loop": (cl, cl2), "fib": (cf, cf2)}
ns = {}
for line in open(f"{out}/ns"):
    w, c, v = line.split()
    ns.setdefault((w, c), []).append(float(v))
instr = {}
for line in open(f"{out}/instr"):
    w, c, n, i = line.split()
    instr.setdefault((w, c), []).append(int(i))
configs = ["plain", "fentry", "bare", "bare-function", "uftrace-P"]
print(f"`bench/bare.sh {runs}`: ns per call (median of {runs}, minus plain's) and instructions per call (callgrind)\n")
print("| config | loop ns/call | fib ns/call | loop instr/call | fib instr/call | loop ×fentry | fib ×fentry |")
print("|---|---|---|---|---|---|---|")
per = {}
for c in configs:
    for w in ["loop", "fib"]:
        per[(w, c)] = (statistics.median(ns[(w, c)]) - statistics.median(ns[(w, "plain")])) / calls[w]
for c in configs:
    row = [c]
    for w in ["loop", "fib"]:
        row.append(f"{per[(w, c)]:.1f}")
    for w in ["loop", "fib"]:
        a, b = instr[(w, c)]
        p = (b - a) / (cg_calls[w][1] - cg_calls[w][0])
        # Under valgrind a PIE is loaded at 0x108000: no room below it for
        # the band a jump needs when an instruction ends at its last byte,
        # so such functions become trap sites there (see BENCHMARKS.md).
        row.append(f"{p:.0f}" + (" (trap)" if c.startswith("bare") else ""))
    for w in ["loop", "fib"]:
        f = per[(w, "fentry")]
        row.append(f"{per[(w, c)] / f:.2f}" if f > 0 and c != "plain" else "-")
    print("| " + " | ".join(row) + " |")
PY
