#!/usr/bin/env bash
# Builds the seed corpus of the `readers` fuzz target from real recordings:
# each data directory packed into one input, its files after markers
# `%%F:<letter>` (see fuzz_targets/readers.rs). Needs a built fntrace and its
# runtime: FNTRACE (default: target/debug/fntrace, with
# libfntrace_runtime.so beside it; `cargo build -p fntrace -p fntrace-runtime`).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$here/..
fntrace=${FNTRACE:-$root/target/debug/fntrace}
out=$here/corpus/readers
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$out"
cd "$work"
gcc -O2 -pg -mfentry -mrecord-mcount "$root/examples/demo.c" -o demo 2>/dev/null
gcc -O2 -pg -mfentry -mrecord-mcount -pthread "$root/crates/cli/tests/viewers/workers.c" -o workers 2>/dev/null

# pack NAME DIR: one input of DIR's files, the first process as p1, the
# second (if any) as p2.
pack() {
    local name=$1 dir=$2 letters=(p f r t) i=0
    {
        if [ -f "$dir/info.json" ]; then printf '%s' '%%F:i'; cat "$dir/info.json"; fi
        for p in "$dir"/p*/; do
            [ $i -lt 2 ] || break
            [ $i -eq 0 ] && letters=(p f r t) || letters=(P F R T)
            if [ -f "$p/process.json" ]; then printf '%s' "%%F:${letters[0]}"; cat "$p/process.json"; fi
            if [ -f "$p/functions.tsv" ]; then printf '%s' "%%F:${letters[1]}"; cat "$p/functions.tsv"; fi
            if [ -f "$p/profile.tsv" ]; then printf '%s' "%%F:${letters[2]}"; cat "$p/profile.tsv"; fi
            for t in "$p"/t*.events; do
                [ -f "$t" ] || continue
                printf '%s' "%%F:${letters[3]}"; cat "$t"
            done
            i=$((i + 1))
        done
    } > "$out/$name"
}

record() { # NAME ARGS...
    local name=$1; shift
    "$fntrace" record -o "$name.data" "$@" > /dev/null 2>&1
    pack "$name" "$name.data"
}
record graph -- ./demo 6
record function --tracer function -- ./demo 4
record profile --tracer profile -- ./demo 6
record time-filter -t 1us -- ./demo 12
record trigger -T 'fib@trace_off' -T 'apply@trace_on' -- ./demo 5
record depth -D 2 -- ./demo 8
record flight --flight-recorder 4K -- ./demo 14
record threads -- ./workers
record exec --force -- sh -c './demo 3 && exec ./demo 2'
ls "$out" | wc -l
