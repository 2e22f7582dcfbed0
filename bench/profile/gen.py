#!/usr/bin/env python3
"""Writes the C source of the "calltree" workload to stdout (bench/profile.sh).

LEVELS x WIDTH generated functions (10 x 60 = 600) in a call tree: a
function of level l does a little arithmetic and calls 0 to 3 functions of
level l + 1 (0, 1, 2 or 3 with probabilities 1/4, 1/4, 3/8, 1/8), which
ones chosen from a hash of its argument; every 7th function of a level is
recursive (it calls itself down to a depth of 0-3 taken from its argument
before going on), so the tree has recursion and a spread of depths. main
starts THREADS threads (argv[2], default 4), each calling a root function
of level 0, N / THREADS times (N = argv[1]). Deterministic: the same
arguments give the same calls.
"""
import sys

LEVELS, WIDTH = 10, 60
out = []
w = out.append
w('#include <pthread.h>\n#include <stdlib.h>\n#include "bench.h"\n')
w("#define NI __attribute__((noinline))\n")
for l in range(LEVELS):
    for i in range(WIDTH):
        w(f"NI unsigned f{l}_{i}(unsigned x);\n")
for l in range(LEVELS):
    for i in range(WIDTH):
        w(f"NI unsigned f{l}_{i}(unsigned x) {{\n")
        w(f"    unsigned h = x * {2 * (l * WIDTH + i) + 40503}u + {i}u;\n")
        w(f"    h ^= h >> {i % 5 + 7};\n")
        w('    __asm__ volatile("" : "+r"(h));\n')
        if i % 7 == 3:
            w(f"    if ((x & 0x3000) != 0)\n        return f{l}_{i}(x - 0x1000) + h;\n")
        if l + 1 < LEVELS:
            w("    unsigned k = (h >> 4) & 7;\n")
            w("    unsigned n = k < 2 ? 0 : k < 4 ? 1 : k < 7 ? 2 : 3;\n")
            w("    for (unsigned j = 0; j < n; j++) {\n")
            w(f"        switch ((h >> (8 + 3 * j)) % {WIDTH}u) {{\n")
            for c in range(WIDTH):
                w(f"        case {c}: h += f{l + 1}_{c}(h + j); break;\n")
            w("        }\n    }\n")
        w("    return h;\n}\n")
w("static long per_thread;\n")
w("NI void *body(void *arg) {\n")
w("    unsigned s = (unsigned)(unsigned long)arg * 7919u;\n")
w("    for (long r = 0; r < per_thread; r++) {\n")
w(f"        switch ((s >> 3) % {WIDTH}u) {{\n")
for c in range(WIDTH):
    w(f"        case {c}: s += f0_{c}(s + (unsigned)r); break;\n")
w("        }\n        s = s * 1103515245u + 12345u;\n    }\n")
w("    return (void *)(unsigned long)s;\n}\n")
w("""int main(int argc, char **argv) {
    BENCH_START();
    long n = argc > 1 ? atol(argv[1]) : 100000;
    int threads = argc > 2 ? atoi(argv[2]) : 4;
    if (threads < 1 || threads > 64)
        threads = 4;
    per_thread = n / threads;
    pthread_t t[64];
    unsigned long sum = 0;
    double t0 = bench_now();
    for (int i = 0; i < threads; i++)
        pthread_create(&t[i], NULL, body, (void *)(unsigned long)(i + 1));
    for (int i = 0; i < threads; i++) {
        void *r;
        pthread_join(t[i], &r);
        sum += (unsigned long)r;
    }
    double t1 = bench_now();
    BENCH_REPORT(t1 - t0, sum);
    return 0;
}
""")
sys.stdout.write("".join(out))
