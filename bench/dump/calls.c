/* bench/dump.sh's workload: CALLS/2 rounds of main -> outer -> leaf
 * (2 calls, 4 events per round). Built with gcc -O1 -pg -mfentry. */
#include <stdio.h>
#include <stdlib.h>

volatile long sink;

__attribute__((noinline)) void leaf(long i) { sink += i; }
__attribute__((noinline)) void outer(long i) { leaf(i); }

int main(int argc, char **argv) {
    long calls = argc > 1 ? atol(argv[1]) : 1000000;
    for (long i = 0; i < calls / 2; i++)
        outer(i);
    printf("%ld\n", (long)sink);
    return 0;
}
