#!/usr/bin/env bash
# Conversion speed of `fntrace dump` and `fntrace flamegraph` on a large
# trace, in bounded memory: records bench/dump/calls.c making CALLS calls
# (2 events each: entry and exit; default 50,000,000 calls = 100 million
# events) with a buffer large enough to lose nothing, then times each
# conversion (output to /dev/null, except flamegraph's small SVG) with
# /usr/bin/time: wall time, events per second, peak RSS.
# Usage: bench/dump.sh [CALLS]   (writes bench/out/dump.md and prints it)
set -euo pipefail
calls=${1:-50000000}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
out=$here/out/dump
mkdir -p "$out"
command -v /usr/bin/time >/dev/null || { apt-get update -qq; apt-get install -y -qq time >/dev/null; }
(cd "$root" && cargo build --release -q -p fntrace -p fntrace-runtime)
fntrace=$root/target/release/fntrace
gcc -O1 -pg -mfentry -mrecord-mcount "$here/dump/calls.c" -o "$out/calls" 2>/dev/null
rm -rf "$out/data"
"$fntrace" record -o "$out/data" --buffer-size 64M -- "$out/calls" "$calls" >/dev/null
events=$("$fntrace" info "$out/data" | awk -F: '/^  events/ {gsub(/ /, "", $2); print $2}')
lost=$("$fntrace" info "$out/data" | awk -F: '/lost events/ {print $2}' | xargs)
bytes=$(du -sb "$out/data" | cut -f1)
measure() { # name command... -> "name wall_s rss_kb"
    local name=$1
    shift
    /usr/bin/time -f "%e %M" -o "$out/time" "$@" >/dev/null 2>"$out/err" || { cat "$out/err" >&2; exit 1; }
    echo "$name $(cat "$out/time")"
}
{
    measure "dump --chrome" "$fntrace" dump "$out/data" --chrome -o /dev/null
    measure "dump --perfetto" "$fntrace" dump "$out/data" --perfetto -o /dev/null
    measure "dump --folded" "$fntrace" dump "$out/data" --folded -o /dev/null
    measure "flamegraph" "$fntrace" flamegraph "$out/data" -o "$out/fg.svg"
    measure "report" "$fntrace" report "$out/data" --json
} >"$out/results"
python3 - "$out/results" "$events" "$bytes" "$lost" <<'PY'
import os, sys, subprocess
results, events, size, lost = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
cpu = subprocess.run(["sh", "-c", "grep -m1 'model name' /proc/cpuinfo | cut -d: -f2"], capture_output=True, text=True).stdout.strip()
rows = ["| command | wall time, s | million events per second | peak RSS, MiB |", "|---|---|---|---|"]
for line in open(results):
    *name, wall, rss = line.split()
    wall, rss = float(wall), int(rss)
    rows.append(f"| `fntrace {' '.join(name)}` | {wall:.2f} | {events / wall / 1e6:.1f} | {rss / 1024:.1f} |")
text = "\n".join([f"Machine: {cpu}, {os.cpu_count()} cores. Trace: {events:,} events ({size / 2**20:.0f} MiB on disk), lost: {lost}.", "", *rows])
open(os.path.join(os.path.dirname(results), "..", "dump.md"), "w").write(text + "\n")
print(text)
PY
