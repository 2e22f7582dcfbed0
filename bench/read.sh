#!/usr/bin/env bash
# Reading a 100-million-event trace (#21), side by side with uftrace: the
# same workload (bench/dump/calls.c: CALLS/2 rounds of main -> outer ->
# leaf, built once with gcc -O1 -pg, which both tools trace) recorded by
# each tool, then each reader timed on its own tool's recording with
# /usr/bin/time (wall time, peak RSS), output to /dev/null (the exports'
# sizes counted).
#
#   bench/read.sh [CALLS]     (default 50,000,000 calls = 100 M events)
#
# Writes bench/out/read.md and prints it.
set -euo pipefail
calls=${1:-50000000}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
out=$here/out/read
mkdir -p "$out"
for tool in gcc uftrace python3 /usr/bin/time; do
    command -v "$tool" >/dev/null || { echo "bench/read.sh needs $tool" >&2; exit 1; }
done
[ -n "${BENCH_NO_BUILD:-}" ] || (cd "$root" && cargo build --release -q -p fntrace -p fntrace-runtime)
fntrace=$root/target/release/fntrace
gcc -O1 -pg "$here/dump/calls.c" -o "$out/calls"
rm -rf "$out/f.data" "$out/u.data"
"$fntrace" record --no-libcall --buffer-size 64M -o "$out/f.data" -- "$out/calls" "$calls" >/dev/null
uftrace record --no-libcall -d "$out/u.data" "$out/calls" "$calls" >/dev/null
events=$("$fntrace" info "$out/f.data" | awk -F: '/^  events/ {gsub(/ /, "", $2); print $2}')

measure() { # tool name command... -> "tool|name|wall_s|rss_kb|bytes"
    local tool=$1 name=$2
    shift 2
    /usr/bin/time -f "%e %M" -o "$out/time" "$@" >"$out/output" 2>"$out/err" || { cat "$out/err" >&2; exit 1; }
    read -r wall rss <"$out/time"
    echo "$tool|$name|$wall|$rss|$(stat -c %s "$out/output")"
}
F=("$fntrace")
U=(uftrace)
{
    measure fntrace "replay" "${F[@]}" replay "$out/f.data"
    measure uftrace "replay" "${U[@]}" replay -d "$out/u.data"
    measure fntrace "replay -F outer -D 1" "${F[@]}" replay -F outer -D 1 "$out/f.data"
    measure uftrace "replay -F outer -D 1" "${U[@]}" replay -F outer -D 1 -d "$out/u.data"
    measure fntrace "replay -N leaf" "${F[@]}" replay -N leaf "$out/f.data"
    measure uftrace "replay -N leaf" "${U[@]}" replay -N leaf -d "$out/u.data"
    measure fntrace "replay -t 1us" "${F[@]}" replay -t 1us "$out/f.data"
    measure uftrace "replay -t 1us" "${U[@]}" replay -t 1us -d "$out/u.data"
    measure fntrace "report" "${F[@]}" report "$out/f.data"
    measure uftrace "report" "${U[@]}" report -d "$out/u.data"
    measure fntrace "report --diff" "${F[@]}" report "$out/f.data" --diff "$out/f.data"
    measure uftrace "report --diff" "${U[@]}" report -d "$out/u.data" --diff "$out/u.data"
    measure fntrace "graph" "${F[@]}" graph "$out/f.data"
    measure uftrace "graph" "${U[@]}" graph -d "$out/u.data"
    measure fntrace "dump --chrome" "${F[@]}" dump --chrome "$out/f.data"
    measure uftrace "dump --chrome" "${U[@]}" dump --chrome -d "$out/u.data"
    measure fntrace "dump --folded" "${F[@]}" dump --folded "$out/f.data"
    measure uftrace "dump --flame-graph" "${U[@]}" dump --flame-graph -d "$out/u.data"
    measure fntrace "dump --perfetto" "${F[@]}" dump --perfetto "$out/f.data"
    measure fntrace "dump --chrome -r ~100ms" "${F[@]}" dump --chrome -r '~100ms' "$out/f.data"
} >"$out/results"
python3 - "$out/results" "$events" "$(du -sb "$out/f.data" | cut -f1)" "$(du -sb "$out/u.data" | cut -f1)" <<'PY'
import os, sys, subprocess
results, events, fsize, usize = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
cpu = subprocess.run(["sh", "-c", "grep -m1 'model name' /proc/cpuinfo | cut -d: -f2"], capture_output=True, text=True).stdout.strip()
rows = {}
order = []
for line in open(results):
    tool, name, wall, rss, size = line.strip().split("|")
    key = name.replace("--flame-graph", "--folded")
    if key not in rows:
        order.append(key)
    rows.setdefault(key, {})[tool] = (float(wall), int(rss), int(size))
out = ["| reader | fntrace s | uftrace s | fntrace / uftrace | fntrace peak RSS MiB | uftrace peak RSS MiB | fntrace output MiB | uftrace output MiB |",
       "|---|---|---|---|---|---|---|---|"]
mib = lambda b: f"{b / 2**20:.1f}"
for key in order:
    f, u = rows[key].get("fntrace"), rows[key].get("uftrace")
    cell = lambda v, i, fmt: fmt(v[i]) if v else "—"
    ratio = f"{f[0] / u[0]:.2f}" if f and u and u[0] > 0 else "—"
    out.append(f"| `{key}` | {cell(f, 0, '{:.2f}'.format)} | {cell(u, 0, '{:.2f}'.format)} | {ratio} | "
               f"{cell(f, 1, lambda k: f'{k / 1024:.0f}')} | {cell(u, 1, lambda k: f'{k / 1024:.0f}')} | "
               f"{cell(f, 2, mib)} | {cell(u, 2, mib)} |")
text = "\n".join([f"Machine: {cpu}, {os.cpu_count()} cores. Trace: {events:,} events; fntrace's recording "
                  f"{fsize / 2**20:.0f} MiB, uftrace's {usize / 2**20:.0f} MiB.", "", *out])
open(os.path.join(os.path.dirname(results), "..", "read.md"), "w").write(text + "\n")
print(text)
PY
