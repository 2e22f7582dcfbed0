// A recursion N calls deep (100,000 by default), in a thread with a stack
// large enough for it (issue 17): recorded whole up to the runtime's
// nesting limit, the rest counted and said.
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

__attribute__((noinline, noipa)) long down(long n) {
    if (n == 0)
        return 0;
    long r = down(n - 1);
    __asm__ volatile("" : "+r"(r));
    return r + 1;
}

static void *run(void *arg) { return (void *)down((long)arg); }

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 100000;
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setstacksize(&a, 256 << 20);
    pthread_t t;
    void *r;
    pthread_create(&t, &a, run, (void *)n);
    pthread_join(t, &r);
    printf("down %ld\n", (long)r + 1);
    return 0;
}
