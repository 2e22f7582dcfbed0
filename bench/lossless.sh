#!/usr/bin/env bash
# Events per second that the default recording keeps without loss, fntrace
# against uftrace, on the same machine and binaries, in one run.
#
#   bench/lossless.sh [RUNS]      (default 5)
#
# The workload is tests' flood.c: two threads calling a traced leaf as fast
# as they can (2 × 25 million calls, 100 million events); it prints how
# long its threads ran. Each tool records it with its default settings:
# fntrace record (lossless by default: a thread that outruns the writer
# waits for it), uftrace record --no-libcall (its defaults); and, to see
# the waiting at work, fntrace with the smallest buffers (64 KiB a
# thread), lossless and --lossy. For each run: the threads' run time (the
# program's own clock), the whole recording's wall time, the events the
# trace holds (fntrace: `info`'s events; uftrace: 2 × `report`'s leaf
# calls + main's), and the losses each tool says. Sustained rate = events
# kept ÷ the threads' run time. The table goes to stdout and
# bench/out/lossless.md.
set -euo pipefail
runs=${1:-5}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
out=$here/out/lossless
mkdir -p "$out"
calls=25000000
events=$((2 * 2 * calls + 2))

for tool in gcc uftrace python3; do
    command -v "$tool" >/dev/null || { echo "bench/lossless.sh needs $tool" >&2; exit 1; }
done
(cd "$root" && cargo build --release -q -p fntrace -p fntrace-runtime)
fntrace=$root/target/release/fntrace
src=$root/crates/cli/tests/programs/lossless/flood.c
quiet_ld() { grep -v -e 'relocation in read-only section' -e 'creating DT_TEXTREL' >&2 || true; }
gcc -O2 -pg -mfentry -mrecord-mcount "$src" -o "$out/flood-fentry" -pthread 2>&1 | quiet_ld
gcc -O2 -pg "$src" -o "$out/flood-pg" -pthread 2>&1 | quiet_ld

# seconds events-kept lost-said, one line per run and configuration.
: >"$out/runs"
for ((r = 0; r < runs; r++)); do
    for c in fntrace fntrace-64k fntrace-64k-lossy uftrace; do
        d=$out/$c.data
        rm -rf "$d"
        start=$(date +%s.%N)
        case $c in
        fntrace) "$fntrace" record -o "$d" -- "$out/flood-fentry" $calls >"$out/stdout" 2>"$out/err" ;;
        fntrace-64k) "$fntrace" record --buffer-size 64K -o "$d" -- "$out/flood-fentry" $calls >"$out/stdout" 2>"$out/err" ;;
        fntrace-64k-lossy) "$fntrace" record --lossy --buffer-size 64K -o "$d" -- "$out/flood-fentry" $calls >"$out/stdout" 2>"$out/err" ;;
        uftrace) uftrace record --no-libcall -d "$d" "$out/flood-pg" $calls >"$out/stdout" 2>"$out/err" ;;
        esac
        end=$(date +%s.%N)
        case $c in
        fntrace*)
            kept=$("$fntrace" info "$d" | awk -F: '/^  events/ { gsub(/ /, "", $2); s += $2 } END { print s + 0 }')
            lost=$("$fntrace" info "$d" | awk -F: '/lost events/ { split($2, a, " "); s += a[1] } END { print s + 0 }')
            ;;
        uftrace)
            leaf=$(uftrace report -d "$d" 2>/dev/null | awk '$NF == "leaf" { print $(NF - 1) }')
            kept=$((2 * ${leaf:-0} + 4))
            lost=$(grep -ciE 'lost' "$out/err" || true)
            ;;
        esac
        ns=$(awk '$1 == "ns" { print $2 }' "$out/stdout")
        echo "$c $(python3 -c "print($end - $start)") $kept $lost ${ns:-0}" >>"$out/runs"
    done
done

python3 - "$out/runs" "$events" "$runs" <<'EOF' | tee "$out/../lossless.md"
import statistics, sys
path, events, runs = sys.argv[1], int(sys.argv[2]), sys.argv[3]
rows = {}
for line in open(path):
    c, secs, kept, lost, ns = line.split()
    rows.setdefault(c, []).append((float(secs), int(kept), int(lost), int(ns) / 1e9))
names = {
    "fntrace": "fntrace record (default: lossless, 4 MiB a thread)",
    "fntrace-64k": "fntrace record --buffer-size 64K (lossless: threads wait)",
    "fntrace-64k-lossy": "fntrace record --buffer-size 64K --lossy",
    "uftrace": "uftrace record --no-libcall",
}
print(f"Workload: flood (2 threads x {(events - 2) // 4:,} calls of a leaf; {events:,} events); {runs} runs.\n")
print("| configuration | threads' run s, median (min-max) | recording wall s, median | events kept, min | lost (said), max | sustained M events/s, median |")
print("|---|---|---|---|---|---|")
for c in ("fntrace", "fntrace-64k", "fntrace-64k-lossy", "uftrace"):
    r = rows.get(c, [])
    if not r:
        continue
    run = [x[3] for x in r]
    wall = statistics.median(x[0] for x in r)
    kept = min(x[1] for x in r)
    lost = max(x[2] for x in r)
    rate = statistics.median(x[1] / x[3] / 1e6 for x in r if x[3] > 0)
    print(f"| {names[c]} | {statistics.median(run):.2f} ({min(run):.2f}-{max(run):.2f}) | {wall:.2f} | {kept:,} | {lost:,} | {rate:.1f} |")
EOF
