/* Calls whose numbers are known from the source, for the test of the
 * callgrind reader (crates/testkit/src/callgrind_tests.rs): with no
 * arguments, it makes the calls counted in the comments. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define NOINLINE __attribute__((noinline))

int helper_b(int x);

/* Called 50 times, by worker; known_other.c has another static helper. */
NOINLINE static int helper(int x) { return x + 1; }

/* 89 calls from fib (the leaves of fib(10)'s tree) and 50 from tail. */
NOINLINE static int leaf(int x) { return x * 3 + 1; }

/* Recursion through a pointer the compiler cannot see through, so that
 * every build makes every call: 177 calls for fib(10). */
static int (*volatile fib_ptr)(int);
NOINLINE int fib(int n) { return n < 2 ? leaf(n) : fib_ptr(n - 1) + fib_ptr(n - 2); }

/* 50 calls (through fp); at -O2 its call of leaf is a tail jump, which
 * callgrind counts as a call of leaf. */
NOINLINE int tail(int x) { return leaf(x + 2); }
static int (*volatile fp)(int) = tail;

/* Tail recursion, a loop at -O2 whose back edge is not the function's
 * first instruction: 1 call in a plain build (callgrind's count), 4 in a
 * -finstrument-functions build, which keeps the recursion. */
NOINLINE unsigned gcd(unsigned a, unsigned b) { return b ? gcd(b, a % b) : a; }

/* Called by qsort in libc: as often as qsort compares. */
NOINLINE static int compare(const void *a, const void *b) { return *(const int *)a - *(const int *)b; }

/* Called once, by the dynamic linker, before main. */
static int started;
NOINLINE __attribute__((constructor)) static void start(void) { started = 1; }

/* A loop whose back edge is the function's first instruction, written in
 * assembly (no hooks): 2 calls, and 5 turns of the loop that callgrind
 * counts as 5 more calls. */
__asm__(".text\n"
        ".globl spin_to_entry\n"
        ".type spin_to_entry, @function\n"
        "spin_to_entry:\n"
        "\ttest %edi, %edi\n"
        "\tjz 1f\n"
        "\tdec %edi\n"
        "\tjmp spin_to_entry\n"
        "1:\tret\n"
        ".size spin_to_entry, .-spin_to_entry\n");
int spin_to_entry(int n);

/* Once, by the thread library. */
static void *worker(void *arg) {
    long sum = (long)arg;
    for (int i = 0; i < 50; i++) {
        sum += fp(i) + helper(i) + helper_b(i);
    }
    return (void *)sum;
}

int main(int argc, char **argv) {
    (void)argv;
    int v[7] = {5, 3, 6, 1, 4, 0, 2};
    pthread_t thread;
    void *result;
    fib_ptr = fib;
    if (pthread_create(&thread, NULL, worker, NULL) != 0) {
        return 1;
    }
    int f = fib(argc + 9);
    pthread_join(thread, &result);
    qsort(v, 7, sizeof v[0], compare);
    spin_to_entry(argc + 4);
    spin_to_entry(0);
    printf("%d %ld %u %d %d\n", f, (long)result, gcd(1071u * (unsigned)argc, 462u), v[0], started);
    return 0;
}
