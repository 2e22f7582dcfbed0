#!/usr/bin/env bash
# The profile tracer against function_graph on a realistic call mix (#17).
#
#   bench/profile.sh [RUNS]     (default 7; FNTRACE=dir with fntrace and
#                                libfntrace_runtime.so to measure another build)
#
# Workload "calltree" (bench/profile/gen.py): 600 generated functions in a
# call tree 10 levels deep with recursion, 4 threads, ~62 calls per root
# call. Built with gcc -O2 plain, -fpatchable-function-entry=5 and
# -pg -mfentry -mrecord-mcount; each traced build recorded with the
# default tracer (function_graph) and with --tracer profile. Also bench/run's
# loop (a single hot leaf), fib (recursion) and lua (the Lua 5.4.7
# interpreter of the crates.io package lua-src 547.0.0, as in bench/run.sh:
# its sources are taken from bench/run.sh's download or fetched with cargo).
#
# - instructions per call: callgrind of the workload's process (the writer
#   thread included) at two sizes, the difference divided by the
#   difference in calls (counted by fntrace's own function_graph trace);
#   "over plain" subtracts the uninstrumented build's per-call count;
# - wall time: the workload's own CLOCK_MONOTONIC time, RUNS rounds with the
#   configurations taking turns; median (min-max).
set -euo pipefail
runs=${1:-7}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
out=$here/out/profile
mkdir -p "$out"
if [ -n "${FNTRACE:-}" ]; then
    bin=$FNTRACE
else
    (cd "$root" && cargo build --release -q -p fntrace -p fntrace-runtime)
    bin=$root/target/release
fi
fntrace=$bin/fntrace
export FNTRACE_RUNTIME=$bin/libfntrace_runtime.so

# The Lua sources: bench/run.sh's download, else the registry's copy
# (checksum pinned by Cargo.lock's rule: cargo checks the crate's).
lua_src=$here/out/run/lua-src-547.0.0/lua-5.4.7
if [ ! -d "$lua_src" ]; then
    fetch=$out/luafetch
    mkdir -p "$fetch/src"
    printf '[package]\nname = "luafetch"\nversion = "0.1.0"\nedition = "2021"\n\n[dependencies]\nlua-src = "=547.0.0"\n\n[workspace]\n' >"$fetch/Cargo.toml"
    echo 'fn main() {}' >"$fetch/src/main.rs"
    (cd "$fetch" && cargo fetch -q)
    lua_src=$(ls -d "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/lua-src-547.0.0/lua-5.4.7 | head -1)
fi

python3 "$here/profile/gen.py" >"$out/calltree.c"
cp "$here/run/loop.c" "$here/run/fib.c" "$out/"
quiet_ld() { grep -v -e 'relocation in read-only section' -e 'DT_TEXTREL' -e 'tmpnam' -e 'in function .os_tmpname' >&2 || true; }
builds=("plain|" "pfe|-fpatchable-function-entry=5" "fentry|-pg -mfentry -mrecord-mcount")
for e in "${builds[@]}"; do
    IFS='|' read -r name flags <<<"$e"
    for w in calltree loop fib; do
        [ "$out/$w-$name" -nt "$out/$w.c" ] ||
            gcc -O2 $flags -I"$here/run" "$out/$w.c" -o "$out/$w-$name" -lpthread 2>&1 | quiet_ld
    done
    if [ ! -e "$out/lua-$name" ]; then
        mkdir -p "$out/lua-obj-$name"
        ls "$lua_src"/*.c | grep -v -e '/lua\.c$' -e '/luac\.c$' |
            xargs -P "$(nproc)" -I{} sh -c 'gcc -O2 $2 -c "$1" -o "$0/$(basename "$1" .c).o"' "$out/lua-obj-$name" {} "$flags"
        gcc -O2 $flags -I"$here/run" -I"$lua_src" "$here/run/lua.c" "$out/lua-obj-$name"/*.o -o "$out/lua-$name" -lm 2>&1 | quiet_ld
    fi
done
declare -A size=([calltree]=100000 [loop]=1000000 [fib]=27 [lua]=6000)
declare -A cg=([calltree]="10000 20000" [loop]="100000 200000" [fib]="20 21" [lua]="300 600")

run() { # workload build tracer n [prefix...] -> the workload's "NS RESULT"
    local w=$1 b=$2 t=$3 n=$4
    shift 4
    local d=$out/data.$$.$RANDOM
    if [ "$t" = none ]; then
        "$@" "$out/$w-$b" "$n"
    else
        "$@" "$fntrace" record -o "$d" --tracer "$t" -- "$out/$w-$b" "$n" 2>/dev/null
    fi
    rm -rf "$d" 2>/dev/null || true
}
calls() { # workload build n -> calls traced
    local d=$out/calls.$$
    rm -rf "$d"
    "$fntrace" record --buffer-size 256M -o "$d" -- "$out/$1-$2" "$3" >/dev/null 2>&1
    "$fntrace" report --json "$d" | python3 -c 'import json, sys; print(sum(f["calls"] for f in json.load(sys.stdin)))'
    rm -rf "$d"
}
instr() { # workload build tracer n -> instructions of the workload's process
    local d=$out/cg.$$
    rm -rf "$d" && mkdir -p "$d"
    run "$1" "$2" "$3" "$4" valgrind --tool=callgrind --smc-check=all --trace-children=yes \
        --callgrind-out-file="$d/cg.%p" >/dev/null 2>&1
    grep -lE "^cmd: +[^ ]+/$1-$2 $4\$" "$d"/cg.* | head -1 | xargs grep -h '^totals:' | awk '{ print $2 }'
    rm -rf "$d"
}

configs=("plain none" "pfe function_graph" "pfe profile" "fentry function_graph" "fentry profile")
echo "| workload | configuration | ms, median (min–max) | instr per call | instr per call over plain |"
echo "|---|---|---|---|---|"
for w in calltree lua loop fib; do
    read -r n1 n2 <<<"${cg[$w]}"
    c1=$(calls "$w" pfe "$n1")
    c2=$(calls "$w" pfe "$n2")
    declare -A ipc=()
    for c in "${configs[@]}"; do
        read -r b t <<<"$c"
        i1=$(instr "$w" "$b" "$t" "$n1")
        i2=$(instr "$w" "$b" "$t" "$n2")
        ipc[$c]=$(python3 -c "print(f'{($i2 - $i1) / ($c2 - $c1):.1f}')")
    done
    declare -A ms=()
    for ((r = 0; r < runs; r++)); do
        for c in "${configs[@]}"; do
            read -r b t <<<"$c"
            read -r ns _ < <(run "$w" "$b" "$t" "${size[$w]}")
            ms[$c]+=" $ns"
        done
    done
    for c in "${configs[@]}"; do
        read -r b t <<<"$c"
        m=$(python3 -c "import statistics as s; v=[float(x)/1e6 for x in '${ms[$c]}'.split()]; print(f'{s.median(v):.1f} ({min(v):.1f}–{max(v):.1f})')")
        over=$(python3 -c "print(f'{${ipc[$c]} - ${ipc[plain none]}:+.1f}')")
        label=$([ "$t" = none ] && echo "gcc -O2, not instrumented" || echo "$t, $b build")
        echo "| $w | $label | $m | ${ipc[$c]} | $over |"
    done
done
