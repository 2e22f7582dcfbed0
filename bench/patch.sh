#!/usr/bin/env bash
# Benchmark of the runtime's live patching and of one traced call, against
# anchors measured in the same run.
#
# 1. Patching throughput: a program with 100,000 functions (-O0), built
#    with gcc -fpatchable-function-entry=5 and with -pg -mfentry
#    -mrecord-mcount, run under LD_PRELOAD=libfntrace_runtime.so; its main
#    (bench/patch/throughput.c) times fntrace_ops_register (one
#    RECURSION_SAFE ops, filter "": enables every site) and
#    fntrace_ops_unregister (disables them) RUNS times with
#    clock_gettime(CLOCK_MONOTONIC), checks that every function calls the
#    ops while registered and none after, and reports the fntrace_get_stats
#    deltas (batches, sites written, syncs, mprotect calls). Anchors: the
#    issue's target (100,000 sites in under 20 ms) and mprotect + memcpy of
#    5 bytes at the same 100,000 offsets of a plain buffer (no protocol).
#    Start-up: hyperfine -N of the program doing nothing, without the
#    runtime, with the runtime loaded but disabled (FNTRACE_DISABLE), and
#    with the runtime (which converts the 100,000 sites before main).
# 2. Cost of one traced call: bench/patch/call.c calls a noinline leaf
#    (bench/patch/leaf.c, -O2 -fpatchable-function-entry=5) CALLS times in
#    each configuration (see call.c); ns per call, median of RUNS runs
#    (each a process), and instructions per call from callgrind (two runs,
#    100,000 and 200,000 calls: the difference cancels start-up). Anchors:
#    one __rdtsc() and one clock_gettime(CLOCK_MONOTONIC).
#
# Usage: bench/patch.sh [RUNS]   (writes bench/out/patch.md and prints it)
set -euo pipefail
runs=${1:-10}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
out=$here/out/patch
mkdir -p "$out"
sites=100000
calls=10000000
cg_small=100000
cg_large=200000

need=()
for tool in hyperfine valgrind gcc python3; do
    command -v "$tool" >/dev/null || need+=("$tool")
done
if ((${#need[@]})); then
    apt-get update -qq
    printf '%s\n' "${need[@]}" | xargs apt-get install -y -qq >/dev/null
fi

(cd "$root" && cargo build --release -q -p fntrace-runtime)
so=$root/target/release/libfntrace_runtime.so
inc=$root/crates/runtime/include

# --- the 100,000-function program -------------------------------------------
. "$here/lib-100k.sh"
styles=(
    "gcc-patchable|-fpatchable-function-entry=5"
    "gcc-fentry-recorded|-pg -mfentry -mrecord-mcount"
)
for entry in "${styles[@]}"; do
    build_100k "$out" "${entry%%|*}" "${entry#*|}"
done

# --- 1. patching throughput and start-up ------------------------------------
for entry in "${styles[@]}"; do
    name=${entry%%|*}
    prog=$out/$name/prog
    LD_PRELOAD=$so "$prog" patch "$runs" >"$out/$name.patch"
    "$prog" anchor "$runs" >"$out/$name.anchor"
    hyperfine -N -w 2 -r "$runs" --export-json "$out/$name.startup.json" \
        "env $prog" "env FNTRACE_DISABLE=1 LD_PRELOAD=$so $prog" "env LD_PRELOAD=$so $prog" >/dev/null
done

# --- 2. cost of one traced call ---------------------------------------------
gcc -O2 -fpatchable-function-entry=5 -c "$here/patch/leaf.c" -o "$out/leaf.o"
gcc -O2 -Wall -I"$inc" -c "$here/patch/call.c" -o "$out/call.o"
gcc "$out/call.o" "$out/leaf.o" -o "$out/call"
configs=(bare nop ops guarded list regs rdtsc clock)
preload() { # config -> the env arguments that load the runtime, if it needs it
    case $1 in bare | rdtsc | clock) ;; *) echo "LD_PRELOAD=$so" ;; esac
}
: >"$out/call.ns"
for ((r = 0; r < runs; r++)); do # round-robin: noise spreads over all configs
    for c in "${configs[@]}"; do
        env $(preload "$c") "$out/call" "$c" "$calls" >>"$out/call.ns"
    done
done
instructions() { # command... -> instruction count (the exec'd program's)
    valgrind --tool=callgrind --callgrind-out-file=/dev/null --smc-check=all --trace-children=yes \
        "$@" 2>&1 >/dev/null | sed -n 's/.*Collected : \([0-9]*\).*/\1/p' | tail -1
}
: >"$out/call.instr"
for c in "${configs[@]}"; do
    small=$(instructions env $(preload "$c") "$out/call" "$c" $cg_small)
    large=$(instructions env $(preload "$c") "$out/call" "$c" $cg_large)
    echo "$c $small $large" >>"$out/call.instr"
done

# --- the table ----------------------------------------------------------------
table=$here/out/patch.md
python3 - "$out" "$runs" "$sites" "$calls" "$cg_small" "$cg_large" >"$table" <<'EOF'
import json, statistics, sys
out, runs, sites, calls, cg_small, cg_large = sys.argv[1], *map(int, sys.argv[2:])
styles = [("gcc-patchable", "gcc `-fpatchable-function-entry=5`"),
          ("gcc-fentry-recorded", "gcc `-pg -mfentry -mrecord-mcount`")]
med = statistics.median
def span(xs, f="%.1f"):
    return f"{f % med(xs)} ({f % min(xs)}–{f % max(xs)})"

print(f"### Patching {sites:,} sites (one ops, filter \"\"; {runs} register/unregister pairs in one process)")
print()
print("| style | sites written | register ms, median (min–max) | 1st register ms | unregister ms, median (min–max) "
      "| M sites/s register | M sites/s unregister | batches | syncs / batch | mprotect / batch "
      "| anchor: mprotect + memcpy ms | register / 20 ms | register / anchor |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
startup = []
for name, label in styles:
    reg, unreg, written, batches, syncs, protects = [], [], set(), [], [], []
    for line in open(f"{out}/{name}.patch"):
        w = line.split()
        if w[0] != "run":
            continue
        reg.append(float(w[2])); unreg.append(float(w[3]))
        for what in ("reg", "unreg"):
            i = w.index(what)
            d = dict(zip(w[i + 1:i + 13:2], map(int, w[i + 2:i + 13:2])))
            written.add(d["written"]); batches.append(d["batches"])
            syncs.append(d["syncs"] / d["batches"]); protects.append(d["protects"] / d["batches"])
    anchor = [float(l.split()[2]) for l in open(f"{out}/{name}.anchor")]
    one = lambda xs: "%g" % xs[0] if len(set(xs)) == 1 else "%g–%g" % (min(xs), max(xs))
    print(f"| {label} | {one(sorted(written))} | {span(reg, '%.2f')} | {reg[0]:.2f} | {span(unreg, '%.2f')} "
          f"| {sites / med(reg) / 1e3:.2f} | {sites / med(unreg) / 1e3:.2f} | {one(batches)} | {one(syncs)} "
          f"| {one(protects)} | {span(anchor, '%.2f')} | {med(reg) / 20:.2f} | {med(reg) / med(anchor):.0f} |")
    r = json.load(open(f"{out}/{name}.startup.json"))["results"]
    startup.append((label, [x["times"] for x in r]))

print()
print(f"### Start-up of the same programs (doing nothing; hyperfine -N, {runs} runs after 2 warm-ups)")
print()
print("| style | no runtime ms | runtime loaded, `FNTRACE_DISABLE` ms | runtime ms, median (min–max) "
      "| start-up cost ms (runtime − disabled) | ns per site |")
print("|---|---|---|---|---|---|")
for label, (none, disabled, full) in startup:
    none, disabled, full = ([t * 1e3 for t in ts] for ts in (none, disabled, full))
    cost = med(full) - med(disabled)
    print(f"| {label} | {span(none)} | {span(disabled)} | {span(full)} | {cost:.1f} | {cost * 1e6 / sites:.0f} |")

ns = {}
for line in open(f"{out}/call.ns"):
    c, n, v = line.split()
    ns.setdefault(c, []).append(float(v))
instr = {}
for line in open(f"{out}/call.instr"):
    c, small, large = line.split()
    instr[c] = (int(large) - int(small)) / (cg_large - cg_small)
labels = {
    "bare": "no runtime (gcc's 5 one-byte NOPs)",
    "nop": "(a) runtime, no ops (5-byte NOP)",
    "ops": "(b) one ops, RECURSION_SAFE (per-ops trampoline)",
    "guarded": "(c) one ops, guarded (no RECURSION_SAFE)",
    "list": "(d) two ops, RECURSION_SAFE (list trampoline)",
    "regs": "(e) one ops, SAVE_REGS + RECURSION_SAFE",
    "rdtsc": "anchor: `__rdtsc()`",
    "clock": "anchor: `clock_gettime(CLOCK_MONOTONIC)`",
}
nop_ns, nop_i = med(ns["nop"]), instr["nop"]
rdtsc, clock = med(ns["rdtsc"]), med(ns["clock"])
print()
print(f"### One call of a traced leaf ({calls:,} calls per run, median of {runs} runs; "
      f"callgrind: ({cg_large:,} − {cg_small:,} calls))")
print()
print("| configuration | ns / call, median (min–max) | − (a) ns | instr / call | − (a) instr "
      "| (− (a) ns) / rdtsc | (− (a) ns) / clock_gettime |")
print("|---|---|---|---|---|---|---|")
for c in ("bare", "nop", "ops", "guarded", "list", "regs", "rdtsc", "clock"):
    d = med(ns[c]) - nop_ns
    traced = c not in ("rdtsc", "clock")
    cols = [labels[c], span(ns[c], "%.2f"), f"{d:+.2f}" if traced else "",
            f"{instr[c]:.1f}" + (" ¹" if c == "clock" else ""), f"{instr[c] - nop_i:+.1f}" if traced else "",
            f"{d / rdtsc:.2f}" if traced else "", f"{d / clock:.2f}" if traced else ""]
    print("| " + " | ".join(cols) + " |")
print()
print("¹ Under valgrind the program has no vDSO: clock_gettime is the system call, whose kernel "
      "side callgrind does not count. The time column is the real (vDSO) call.")
EOF
{
    echo
    echo "Machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores, $(uname -r), $(date +%F)."
    echo "Command: bench/patch.sh $runs (runtime: target/release/libfntrace_runtime.so, LD_PRELOAD)."
} >>"$table"
cat "$table"
