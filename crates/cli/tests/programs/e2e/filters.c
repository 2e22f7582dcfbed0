/* One program for the record and replay filters:
 *   main { outer { inner { leaf leaf } leaf }  slow { nap leaf }  stop
 *          outer { inner { leaf leaf } leaf } }
 * nap() sleeps 30 ms, so nap, slow and main are the only calls longer
 * than 10 ms; stop() is the trace_off trigger's function. */
#include <stdio.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))

static volatile int sink;

NOINLINE int leaf(int x)
{
    sink += x;
    return x + 1;
}

NOINLINE int inner(int x)
{
    return leaf(x) + leaf(x + 1);
}

NOINLINE int outer(int x)
{
    return inner(x) + leaf(x);
}

NOINLINE void nap(void)
{
    usleep(30 * 1000);
}

NOINLINE int slow(int x)
{
    nap();
    return leaf(x);
}

NOINLINE void stop(void)
{
    sink++;
}

int main(void)
{
    int r = outer(1);
    r += slow(2);
    stop();
    r += outer(3);
    printf("filters: %d\n", r);
    return 0;
}
