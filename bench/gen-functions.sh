#!/usr/bin/env bash
# Writes a C program with N functions (default 20000) to stdout:
# f00000 ... f<N-1>, each a leaf, and a main that calls every 100th.
set -euo pipefail
n=${1:-20000}
awk -v n="$n" 'BEGIN {
    for (i = 0; i < n; i++)
        printf "int f%05d(int x) { return x * %d + %d; }\n", i, i % 7 + 1, i
    printf "int main(int argc, char **argv) {\n    int s = 0;\n"
    for (i = 0; i < n; i += 100)
        printf "    s += f%05d(argc);\n", i
    printf "    return s & 1;\n}\n"
}'
