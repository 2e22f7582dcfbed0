#!/usr/bin/env bash
# Writes gen.c: N functions f<i> and gen_calls(n), which calls 20 of them
# (a different 20 each time), for bench/attach.sh's large target.
set -euo pipefail
n=${1:-100000}
awk -v n="$n" 'BEGIN {
    for (i = 0; i < n; i++)
        printf "__attribute__((noinline)) int f%06d(int x) { return x * %d + %d; }\n", i, i % 7 + 1, i
    printf "typedef int (*fn)(int);\nstatic const fn table[] = {\n"
    for (i = 0; i < n; i++)
        printf "    f%06d,\n", i
    printf "};\nvolatile int gen_sink;\nvoid gen_calls(int k) {\n"
    printf "    for (int i = 0; i < 20; i++)\n        gen_sink += table[(unsigned)(k * 20 + i) %% %d](i);\n}\n", n
}'
