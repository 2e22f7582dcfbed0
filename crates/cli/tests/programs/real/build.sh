#!/usr/bin/env bash
# Real programs nobody here wrote, from Debian's source packages, built the
# way the tests of plain builds need them (crates/cli/tests/plain_real.rs,
# docs/design/REAL_PROGRAMS.md):
#
#   build.sh CACHE [PROGRAM...]     (PROGRAM: pigz, pbzip2, zstd; default all)
#
# Each program's source package is fetched with `apt-get source` into
# CACHE/src (kept: a second run fetches nothing; it needs a deb-src line,
# which .ci/run adds) and compiled directly, without its build system, in
# three ways, into CACHE/STYLE/PROGRAM:
#
#   plain       gcc/g++ -O2 with Debian's hardening flags and -fcf-protection
#               (endbr64 at entries, as distributions build): no compiler
#               sites, what users have;
#   fentry      the same with -pg -mfentry -mrecord-mcount: compiler sites,
#               which fntrace already traces (the harness is checked on it);
#   instrument  the same with -finstrument-functions, linked with enters.c,
#               which logs every entry per thread under $FNTRACE_ENTERS.
#
# A build is redone when this script, enters.c or the sources change (a
# stamp holds their digest). Prints nothing but errors. Exits with 3, and
# says what is missing, when this machine cannot build them (no source
# package to be had, no compiler, no library headers: .ci/run installs
# them); with 1 when something else fails.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
[ $# -ge 1 ] || { echo "usage: $0 CACHE [pigz|pbzip2|zstd]..." >&2; exit 2; }
cache=$(mkdir -p "$1" && cd "$1" && pwd)
shift
[ $# -ge 1 ] || set -- pigz pbzip2 zstd
mkdir -p "$cache/src"

# Debian's default flags (dpkg-buildflags with hardening=+all), without -g,
# and without the sources' warnings (-w: not ours to fix).
common=(-O2 -w -fstack-protector-strong -fcf-protection -D_FORTIFY_SOURCE=2)
link=(-pie -Wl,-z,relro -Wl,-z,now)
declare -A style_flags=(
    [plain]=""
    [fentry]="-pg -mfentry -mrecord-mcount"
    [instrument]="-finstrument-functions"
)

# The unpacked source tree of source package $1 (fetched if absent).
source_of() {
    local package=$1 dir
    dir=$(find "$cache/src" -mindepth 1 -maxdepth 1 -type d -name "$package-*" | sort | tail -n 1)
    if [ -z "$dir" ]; then
        (cd "$cache/src" && apt-get source -qq "$package" >/dev/null 2>"$cache/src/$package.log") || {
            echo "apt-get source $package failed (is there a deb-src line? .ci/run adds one):" >&2
            cat "$cache/src/$package.log" >&2
            rm -rf "$cache/src/$package"-* "$cache/src/$package"_*
            exit 3
        }
        dir=$(find "$cache/src" -mindepth 1 -maxdepth 1 -type d -name "$package-*" | sort | tail -n 1)
    fi
    [ -n "$dir" ] || { echo "no $package-* directory after apt-get source" >&2; exit 1; }
    echo "$dir"
}

# build PROGRAM COMPILER SRCDIR "CFLAGS" "LIBS" SOURCE...: every style,
# each object compiled in parallel (two at a time: CI has two cores).
build() {
    local program=$1 compiler=$2 srcdir=$3 cflags=$4 libs=$5
    shift 5
    local digest
    digest=$( (cat "$0" "$here/enters.c"; cd "$srcdir" && cat "$@") | sha256sum | cut -c1-16)
    for style in plain fentry instrument; do
        local out="$cache/$style/$program" objs="$cache/$style/$program.o"
        if [ -x "$out" ] && [ "$(cat "$out.stamp" 2>/dev/null)" = "$digest" ]; then
            continue
        fi
        rm -rf "$objs" && mkdir -p "$objs"
        local flags=(${style_flags[$style]} "${common[@]}" $cflags)
        (cd "$srcdir" && printf '%s\n' "$@" | xargs -P 2 -I{} sh -c \
            "$compiler $(printf '%q ' "${flags[@]}") -c {} -o $(printf '%q' "$objs")/\$(echo {} | tr / _).o")
        local extra=()
        if [ "$style" = fentry ]; then
            # gcc's __mcount_loc is read-only with absolute relocations:
            # the linker makes a PIE with text relocations, and says so.
            extra=(-Wl,-z,notext)
        elif [ "$style" = instrument ]; then
            gcc "${common[@]}" -c "$here/enters.c" -o "$objs/enters.o"
            extra=(-pthread)
        fi
        # Linked without -pg: no gcrt1.o, so no gprof (no SIGPROF timer, no
        # gmon.out); __fentry__ is libc's, which does nothing unprofiled.
        $compiler "${link[@]}" -o "$out" "$objs"/*.o $libs "${extra[@]}"
        echo "$digest" >"$out.stamp"
    done
}

# missing WHAT: exits with 3, naming what this machine lacks.
missing() {
    echo "cannot build the real programs here: no $1 (.ci/run installs it)" >&2
    exit 3
}
for tool in gcc g++ apt-get dpkg-source; do
    command -v "$tool" >/dev/null || missing "$tool"
done
[ -f /usr/include/zlib.h ] || missing "zlib.h (zlib1g-dev)"
[ -f /usr/include/bzlib.h ] || missing "bzlib.h (libbz2-dev)"

for program in "$@"; do
    case $program in
    pigz)
        # pigz 2.6: pigz, its thread library yarn, try (its exceptions) and
        # zopfli (-11), as its Makefile builds them; zlib from the system.
        dir=$(source_of pigz)
        build pigz gcc "$dir" "" "-lm -lpthread -lz" \
            pigz.c yarn.c try.c \
            zopfli/src/zopfli/{deflate,blocksplitter,tree,lz77,cache,hash,util,squeeze,katajainen,symbols}.c
        ;;
    pbzip2)
        # pbzip2 1.1.13 (C++), with the defines of its Makefile; libbz2
        # from the system.
        dir=$(source_of pbzip2)
        build pbzip2 g++ "$dir" \
            "-pthread -D_POSIX_PTHREAD_SEMANTICS -D_LARGEFILE64_SOURCE -D_FILE_OFFSET_BITS=64 -DUSE_STACKSIZE_CUSTOMIZATION" \
            "-lbz2 -lpthread" \
            pbzip2.cpp BZ2StreamScanner.cpp ErrorContext.cpp
        ;;
    zstd)
        # zstd 1.5.4's command-line program with its library compiled in
        # (as its Makefile builds `zstd`), multi-threaded (-T), without the
        # optional gzip/xz/lz4 formats and without the assembly decoder
        # loop (huf_decompress_amd64.S: a function with no C source).
        dir=$(source_of libzstd)
        sources=$(cd "$dir" && ls lib/common/*.c lib/compress/*.c lib/decompress/*.c lib/dictBuilder/*.c \
            programs/{zstdcli,util,timefn,fileio,fileio_asyncio,benchfn,benchzstd,datagen,dibio,zstdcli_trace}.c)
        # shellcheck disable=SC2086
        build zstd gcc "$dir" \
            "-pthread -DZSTD_MULTITHREAD -DZSTD_DISABLE_ASM -DZSTD_LEGACY_SUPPORT=0 -Ilib -Ilib/common -Iprograms" \
            "-lpthread" $sources
        ;;
    *)
        echo "unknown program $program" >&2
        exit 2
        ;;
    esac
done
