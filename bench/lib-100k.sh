# Sourced by bench/patch.sh and bench/run.sh: the program with 100,000
# functions (bench/patch/throughput.c as main, not instrumented).
#   build_100k OUT NAME "FLAGS"  ->  OUT/NAME/prog
# The generated sources and objects are kept in OUT between runs (gcc -O0
# takes ~0.45 ms per function here); delete OUT to rebuild.
build_100k() {
    local out=$1 name=$2 flags=$3
    local sites=100000 chunks=8 per c o
    local here inc
    here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
    inc=$here/../crates/runtime/include
    per=$((sites / chunks))
    mkdir -p "$out/$name"
    for ((c = 0; c < chunks; c++)); do
        [ -s "$out/f-$c.c" ] || awk -v lo=$((c * per)) -v hi=$(((c + 1) * per)) 'BEGIN {
            for (i = lo; i < hi; i++)
                printf "int f%05d(int x) { return x * %d + %d; }\n", i, i % 7 + 1, i
        }' >"$out/f-$c.c"
    done
    [ -s "$out/table.c" ] || awk -v n=$sites 'BEGIN {
        for (i = 0; i < n; i++)
            printf "int f%05d(int);\n", i
        printf "int (*const fntab[])(int) = {\n"
        for (i = 0; i < n; i++)
            printf "    f%05d,\n", i
        printf "};\nconst int fncount = %d;\n", n
    }' >"$out/table.c"
    [ -s "$out/table.o" ] || gcc -O2 -c "$out/table.c" -o "$out/table.o"
    gcc -O2 -Wall -I"$inc" -c "$here/patch/throughput.c" -o "$out/throughput.o"
    for ((c = 0; c < chunks; c++)); do
        o=$out/$name/f-$c.o
        [ -s "$o" ] && [ "$o" -nt "$out/f-$c.c" ] || echo "$c"
    done | xargs -r -P "$(nproc)" -I{} sh -c "gcc -O0 $flags -c '$out/f-{}.c' -o '$out/$name/f-{}.o'"
    # -mrecord-mcount's __mcount_loc is a read-only section with absolute
    # addresses: ld warns about DT_TEXTREL in a PIE (as for any such PIE).
    gcc "$out/throughput.o" "$out/table.o" "$out/$name"/f-*.o -o "$out/$name/prog" 2>&1 |
        grep -v -e 'relocation in read-only section' -e 'creating DT_TEXTREL' >&2 || true
}
