#!/usr/bin/env bash
# Events per second that the default recording keeps without loss, fntrace
# against uftrace, on the same machine and binaries, in one run.
#
#   bench/lossless.sh [RUNS]      (default 5)
#
# The workload is tests' flood.c: two threads calling a traced leaf as fast
# as they can (2 × 10 million calls, 40 million events). Each tool records
# it with its default settings: fntrace record (lossless by default: a
# thread that outruns the writer waits for it), fntrace record --lossy (for
# comparison: drops what the writer cannot take), uftrace record
# --no-libcall (its defaults). For each run: the program's wall time
# (hyperfine-free: /usr/bin/time of the whole recording), the calls the
# trace holds (fntrace: `info`'s events; uftrace: `report`'s leaf calls),
# and the losses each tool says. Sustained rate = events kept ÷ wall time.
# The tables go to stdout and bench/out/lossless.md.
set -euo pipefail
runs=${1:-5}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
out=$here/out/lossless
mkdir -p "$out"
calls=10000000
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
    for c in fntrace fntrace-lossy uftrace; do
        d=$out/$c.data
        rm -rf "$d"
        start=$(date +%s.%N)
        case $c in
        fntrace) "$fntrace" record -o "$d" -- "$out/flood-fentry" $calls >/dev/null 2>"$out/err" ;;
        fntrace-lossy) "$fntrace" record --lossy -o "$d" -- "$out/flood-fentry" $calls >/dev/null 2>"$out/err" ;;
        uftrace) uftrace record --no-libcall -d "$d" "$out/flood-pg" $calls >/dev/null 2>"$out/err" ;;
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
        echo "$c $(python3 -c "print($end - $start)") $kept $lost" >>"$out/runs"
    done
done

python3 - "$out/runs" "$events" "$runs" <<'EOF' | tee "$out/../lossless.md"
import statistics, sys
path, events, runs = sys.argv[1], int(sys.argv[2]), sys.argv[3]
rows = {}
for line in open(path):
    c, secs, kept, lost = line.split()
    rows.setdefault(c, []).append((float(secs), int(kept), int(lost)))
names = {
    "fntrace": "fntrace record (default: lossless)",
    "fntrace-lossy": "fntrace record --lossy",
    "uftrace": "uftrace record --no-libcall",
}
print(f"Workload: flood (2 threads x 10,000,000 calls of a leaf; {events:,} events); {runs} runs.\n")
print("| configuration | wall s, median (min-max) | events kept, min | lost (said), max | sustained M events/s, median |")
print("|---|---|---|---|---|")
for c in ("fntrace", "fntrace-lossy", "uftrace"):
    r = rows.get(c, [])
    if not r:
        continue
    secs = [x[0] for x in r]
    med = statistics.median(secs)
    kept = min(x[1] for x in r)
    lost = max(x[2] for x in r)
    rate = statistics.median(x[1] / x[0] / 1e6 for x in r)
    print(f"| {names[c]} | {med:.2f} ({min(secs):.2f}-{max(secs):.2f}) | {kept:,} | {lost:,} | {rate:.1f} |")
EOF
