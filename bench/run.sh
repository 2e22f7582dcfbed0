#!/usr/bin/env bash
# fntrace against uftrace, LLVM XRay and the physical limit, in one run.
#
#   bench/run.sh [RUNS]      (default 5; one command from a clean checkout)
#
# Installs what it needs (Debian: gcc, clang-16 + libclang-rt-16-dev for
# XRay, uftrace, valgrind, hyperfine), builds fntrace (release) and its own
# workloads (bench/run/*.c; "lua" is the Lua 5.4.7 interpreter from the
# crates.io package lua-src 547.0.0, checksum pinned), and measures, on the
# same workloads and in the same run:
#   - each workload uninstrumented (gcc and clang), built with each
#     instrumentation but not traced, and with fntrace loaded but nothing
#     enabled ("off");
#   - fntrace function_graph (on -pg -mfentry, -fpatchable-function-entry,
#     -pg and XRay builds), function, a 1% filter, profile;
#   - uftrace record (-pg build, and -fpatchable-function-entry with -P .),
#     XRay basic and FDR modes;
#   - one rdtsc and one clock_gettime (the floor of a timestamped event);
#   - bytes per event, instructions per call (callgrind: two sizes, the
#     difference divided by the difference in calls), patching throughput
#     and start-up on 100,000 functions, `fntrace dump --perfetto` speed.
# Each workload times its own work (CLOCK_MONOTONIC around it); RUNS rounds,
# the configurations taking turns within a round. The tables go to
# bench/out/run.md, to stdout, and into BENCHMARKS.md (between the
# "bench/run.sh" markers). bench/run/report.py computes them.
set -euo pipefail
runs=${1:-5}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
out=$here/out/run
mkdir -p "$out"
start=$(date +%s)
say() { printf '[%4ds] %s\n' $(($(date +%s) - start)) "$*" >&2; }

# --- what the run needs -------------------------------------------------------
xray_rt=/usr/lib/llvm-16/lib/clang/16/lib/linux/libclang_rt.xray-fdr-x86_64.a
need=()
for tool in gcc clang-16 uftrace valgrind hyperfine python3 curl; do
    command -v "$tool" >/dev/null || need+=("$tool")
done
[ -e "$xray_rt" ] || need+=(libclang-rt-16-dev)
if ((${#need[@]})); then
    say "installing ${need[*]}"
    apt-get update -qq
    printf '%s\n' "${need[@]}" | sed 's/^clang-16$/clang-16 libclang-rt-16-dev/' |
        xargs apt-get install -y -qq >/dev/null
fi
say "building fntrace (release)"
(cd "$root" && cargo build --release -q -p fntrace -p fntrace-runtime)
fntrace=$root/target/release/fntrace
so=$root/target/release/libfntrace_runtime.so

# --- the Lua sources (a registry package's C sources) ----------------------------
lua_crate=lua-src-547.0.0
lua_sha=1edaf29e3517b49b8b746701e5648ccb5785cde1c119062cbabbc5d5cd115e42
if [ ! -d "$out/$lua_crate" ]; then
    say "fetching $lua_crate from crates.io"
    curl -sSfL -o "$out/$lua_crate.crate" "https://static.crates.io/crates/lua-src/$lua_crate.crate"
    echo "$lua_sha  $out/$lua_crate.crate" | sha256sum -c --quiet
    tar -xzf "$out/$lua_crate.crate" -C "$out"
fi
lua_src=$out/$lua_crate/lua-5.4.7

# --- builds -------------------------------------------------------------------
# build name | compiler | flags
builds=(
    "gcc-plain|gcc|"
    "gcc-fentry|gcc|-pg -mfentry -mrecord-mcount"
    "gcc-pg|gcc|-pg"
    "gcc-pfe|gcc|-fpatchable-function-entry=5"
    "clang-plain|clang-16|"
    "clang-xray|clang-16|-fxray-instrument -fxray-instruction-threshold=1"
)
workloads=(loop fib threads lua)
quiet_ld() { grep -v -e 'relocation in read-only section' -e 'creating DT_TEXTREL' -e 'tmpnam' -e 'in function .os_tmpname' >&2 || true; }
say "building the workloads"
for entry in "${builds[@]}"; do
    IFS='|' read -r name cc flags <<<"$entry"
    dir=$out/build/$name
    mkdir -p "$dir/lua-obj"
    extra=()
    [ "$name" = clang-xray ] && extra=("$here/run/xray-flush.c")
    for w in loop fib threads; do
        $cc -O2 $flags -I"$here/run" "$here/run/$w.c" "${extra[@]}" -o "$dir/$w" -lpthread 2>&1 | quiet_ld
    done
    # Lua: one object per source file, in parallel, kept between runs.
    ls "$lua_src"/*.c | grep -v -e '/lua\.c$' -e '/luac\.c$' |
        xargs -P "$(nproc)" -I{} sh -c 'o="$0/lua-obj/$(basename "$1" .c).o"; [ -s "$o" ] || $2 -O2 $3 -c "$1" -o "$o"' "$dir" {} "$cc" "$flags"
    $cc -O2 $flags -I"$here/run" -I"$lua_src" "$here/run/lua.c" "$dir"/lua-obj/*.o "${extra[@]}" -o "$dir/lua" -lm 2>&1 | quiet_ld
done
gcc -O2 -I"$here/run" "$here/run/anchors.c" -o "$out/build/anchors"

# --- sizes ----------------------------------------------------------------------
# Timed size; the two callgrind sizes (small, then large).
declare -A size=([loop]=1000000 [fib]=28 [threads]=1000000 [lua]=6000)
declare -A cg_sizes=([loop]="100000 200000" [fib]="20 21" [threads]="100000 200000" [lua]="300 600")

# --- configurations -------------------------------------------------------------
# config | build | how it runs (see run_config)
configs=(
    "plain|gcc-plain"
    "pfe-nop|gcc-pfe"
    "fentry-gprof|gcc-fentry"
    "off|gcc-pfe"
    "graph|gcc-fentry"
    "graph-pfe|gcc-pfe"
    "graph-mcount|gcc-pg"
    "graph-xray|clang-xray"
    "function|gcc-fentry"
    "filter1|gcc-fentry"
    "profile|gcc-fentry"
    "uftrace-pg|gcc-pg"
    "uftrace-pfe|gcc-pfe"
    "clang-plain|clang-plain"
    "xray-nop|clang-xray"
    "xray-basic|clang-xray"
    "xray-fdr|clang-xray"
)
build_of() { local e; for e in "${configs[@]}"; do [ "${e%%|*}" = "$1" ] && echo "${e#*|}"; done; }

# The 1% filter: every 100th function of the workload (by name) for lua;
# the small workloads have 2-4 functions, where it selects main alone.
filter_of() { # workload -> filter patterns, one per line
    if [ "$1" = lua ]; then
        "$fntrace" list "$out/build/gcc-fentry/lua" | awk '{ print $3 }' | sort -u | awk 'NR % 100 == 1'
    else
        echo main
    fi
}
declare -A filter_args
for w in "${workloads[@]}"; do
    args=""
    while read -r f; do args+=" -P $f"; done < <(filter_of "$w")
    filter_args[$w]=$args
done

# The XRay FDR buffers: enough to hold the whole run (FDR is a flight
# recorder; sized so that it keeps every event, like the others).
fdr_config() { echo "func_duration_threshold_us=0 buffer_size=1048576 buffer_max=${1:-64}"; }

# run_config CONFIG WORKLOAD N DATA [PREFIX...] -> the program's stdout.
# PREFIX (e.g. valgrind ...) goes before the command that is run.
run_config() {
    local c=$1 w=$2 n=$3 data=$4
    shift 4
    local prog=$out/build/$(build_of "$c")/$w
    rm -rf "$data"
    mkdir -p "$data"
    case $c in
    plain | pfe-nop | clang-plain) (cd "$data" && "$@" "$prog" "$n") ;;
    fentry-gprof) (cd "$data" && "$@" "$prog" "$n") ;; # gmon.out lands in $data
    off) env LD_PRELOAD="$so" "$@" "$prog" "$n" ;;
    graph | graph-pfe | graph-mcount | graph-xray) "$@" "$fntrace" record -o "$data/t" -- "$prog" "$n" ;;
    function | profile) "$@" "$fntrace" record -o "$data/t" --tracer "$c" -- "$prog" "$n" ;;
    filter1) "$@" "$fntrace" record -o "$data/t" ${filter_args[$w]} -- "$prog" "$n" ;;
    uftrace-pg) "$@" uftrace record --no-libcall -d "$data/t" "$prog" "$n" ;;
    uftrace-pfe) "$@" uftrace record --no-libcall -P . -d "$data/t" "$prog" "$n" ;;
    xray-nop) env XRAY_OPTIONS="patch_premain=false" "$@" "$prog" "$n" ;;
    xray-basic)
        env XRAY_OPTIONS="patch_premain=true xray_mode=xray-basic verbosity=0 xray_logfile_base=$data/xray-" \
            XRAY_BASIC_OPTIONS="func_duration_threshold_us=0" "$@" "$prog" "$n" 2> >(grep -v 'CPU frequency' >&2)
        ;;
    xray-fdr)
        env XRAY_OPTIONS="patch_premain=true xray_mode=xray-fdr verbosity=0 xray_logfile_base=$data/xray-" \
            BENCH_XRAY_FDR="$(fdr_config "${FDR_BUFFERS:-64}")" "$@" "$prog" "$n" 2> >(grep -v 'CPU frequency' >&2)
        ;;
    *) echo "unknown configuration $c" >&2 && return 1 ;;
    esac
}
data_bytes() { # config data-dir -> bytes of trace data (events only) [events recorded]
    case $1 in
    graph* | function)
        # fntrace's own count too: a loop of tiny calls can outrun the
        # writer on 2 cores, and dropped events are not in the file.
        echo "$(cat "$2"/t/p*/t*.events | wc -c) $("$fntrace" info "$2/t" | awk '/^  events/ { s += $3 } END { print s }')"
        ;;
    uftrace*) cat "$2"/t/*.dat | wc -c ;;
    xray*) cat "$2"/xray-* 2>/dev/null | wc -c ;;
    *) echo 0 ;;
    esac
}
calls_of() { # build workload n -> calls traced by fntrace function_graph
    local d=$out/calls.$$
    rm -rf "$d"
    # Buffers large enough that nothing is dropped: every call counted.
    "$fntrace" record --buffer-size 256M -o "$d" -- "$out/build/$1/$2" "$3" >/dev/null
    "$fntrace" report --json "$d" | python3 -c 'import json, sys; print(sum(f["calls"] for f in json.load(sys.stdin)))'
    rm -rf "$d"
}

# --- calls per run (fntrace's own count, checked against the truth where known)
say "counting calls"
: >"$out/calls"
for w in "${workloads[@]}"; do
    for b in gcc-fentry gcc-pg gcc-pfe clang-xray; do
        for n in ${size[$w]} ${cg_sizes[$w]}; do
            echo "$w $b $n $(calls_of "$b" "$w" "$n")" >>"$out/calls"
        done
    done
done
# FDR buffers (1 MiB each) for the largest run: 16 bytes per event, 2 per call.
max_calls=$(awk '{ if ($4 > m) m = $4 } END { print m }' "$out/calls")
FDR_BUFFERS=$((max_calls * 2 * 16 / 1048576 + 16))
export FDR_BUFFERS

# --- timed runs -----------------------------------------------------------------
say "timed runs: $runs rounds x ${#workloads[@]} workloads x ${#configs[@]} configurations"
: >"$out/ns"
: >"$out/bytes"
for ((r = 0; r < runs; r++)); do
    for w in "${workloads[@]}"; do
        for e in "${configs[@]}"; do
            c=${e%%|*}
            data=$out/data/$w-$c
            # A command substitution waits for the whole run (the
            # recorders write their data after the program's last line).
            line=$(run_config "$c" "$w" "${size[$w]}" "$data")
            read -r ns _ <<<"$line"
            echo "$w $c $ns" >>"$out/ns"
            [ "$r" -gt 0 ] || echo "$w $c $(data_bytes "$c" "$data")" >>"$out/bytes"
            # Keep one function_graph trace of lua for the dump benchmark.
            [ "$w-$c" = lua-graph ] && { rm -rf "$out/lua.trace"; mv "$data/t" "$out/lua.trace"; }
            rm -rf "$data"
        done
        for a in rdtsc clock; do
            line=$("$out/build/anchors" "$a" 5000000)
            read -r ns _ <<<"$line"
            echo "- $a $(python3 -c "print($ns / 5000000)")" >>"$out/ns"
        done
    done
    say "round $((r + 1)) of $runs done"
done

# --- instructions (callgrind) ----------------------------------------------------
say "callgrind: ${#workloads[@]} workloads x ${#configs[@]} configurations x 2 sizes"
cg_one() { # workload config n -> "workload config n instructions"
    local w=$1 c=$2 n=$3 d=$out/cg/$1-$2-$3
    mkdir -p "$d"
    run_config "$c" "$w" "$n" "$d/data" valgrind --tool=callgrind --smc-check=all --trace-children=yes \
        --callgrind-out-file="$d/cg.%p" >/dev/null 2>"$d/err" || { echo "callgrind failed: $w $c $n" >&2; cat "$d/err" >&2; }
    # The workload's own process (fntrace record and uftrace run it as a child).
    local i
    i=$(grep -lE "^cmd: +[^ ]+/build/[^ ]+/$w $n\$" "$d"/cg.* | head -1 | xargs grep -h '^totals:' | awk '{ print $2 }')
    echo "$w $c $n ${i:-0}"
    rm -rf "$d"
}
cg_jobs=()
for w in "${workloads[@]}"; do
    for e in "${configs[@]}"; do
        for n in ${cg_sizes[$w]}; do cg_jobs+=("$w ${e%%|*} $n"); done
    done
done
# Instruction counts do not depend on what else runs: one worker per core.
jobs=$(nproc)
for ((k = 0; k < jobs; k++)); do
    (
        for ((j = k; j < ${#cg_jobs[@]}; j += jobs)); do cg_one ${cg_jobs[j]}; done
    ) >"$out/instr.$k" &
done
wait
cat "$out"/instr.[0-9]* >"$out/instr"
rm -f "$out"/instr.[0-9]*
for a in rdtsc clock; do
    for n in 100000 200000; do
        i=$(valgrind --tool=callgrind --callgrind-out-file=/dev/null "$out/build/anchors" "$a" "$n" 2>&1 >/dev/null |
            sed -n 's/.*Collected : \([0-9]*\).*/\1/p')
        echo "- $a $n $i" >>"$out/instr"
    done
done

# --- patching and start-up on 100,000 functions -----------------------------------
say "patching and start-up on 100,000 functions (building them the first time)"
. "$here/lib-100k.sh"
build_100k "$out/100k" gcc-pfe "-fpatchable-function-entry=5"
prog100k=$out/100k/gcc-pfe/prog
LD_PRELOAD=$so "$prog100k" patch 10 >"$out/patch"
hyperfine -N -w 2 -r 10 --export-json "$out/startup.json" \
    "env FNTRACE_DISABLE=1 LD_PRELOAD=$so $prog100k" "env LD_PRELOAD=$so $prog100k" >/dev/null

# --- dump --perfetto ------------------------------------------------------------------
say "fntrace dump --perfetto"
hyperfine -N -w 1 -r 3 --export-json "$out/dump.json" \
    "$fntrace dump $out/lua.trace --perfetto -o $out/lua.pftrace" >/dev/null
"$fntrace" info "$out/lua.trace" | awk '/^  events/ { s += $3 } END { print s }' >"$out/dump.events"

# --- the tables -----------------------------------------------------------------------
say "report"
elapsed=$(($(date +%s) - start))
python3 "$here/run/report.py" "$out" "$runs" "$elapsed" "${size[loop]} ${size[fib]} ${size[threads]} ${size[lua]}" >"$out/../run.md"
cat "$out/../run.md"
python3 - "$root/BENCHMARKS.md" "$out/../run.md" <<'PY'
import sys
path, table = sys.argv[1], open(sys.argv[2]).read()
begin, end = "<!-- bench/run.sh: begin -->", "<!-- bench/run.sh: end -->"
text = open(path).read()
block = f"{begin}\n{table}{end}"
if begin in text and end in text:
    text = text[:text.index(begin)] + block + text[text.index(end) + len(end):]
else:
    text = text.rstrip("\n") + "\n\n" + block + "\n"
open(path, "w").write(text)
PY
say "done: bench/out/run.md and BENCHMARKS.md"
