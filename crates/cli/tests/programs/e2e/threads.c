/* Two threads with different work, both joined by main.
 * worker_a: square(1..3), each square calling twice (its own leaf).
 * worker_b: cube(1..2) and twice(5).
 * main: spawn both, join both, then report(). */
#include <pthread.h>
#include <stdio.h>

#define NOINLINE __attribute__((noinline))

NOINLINE int twice(int x)
{
    return 2 * x;
}

NOINLINE int square(int x)
{
    return twice(x) * x / 2;
}

NOINLINE int cube(int x)
{
    return x * x * x;
}

NOINLINE void *worker_a(void *arg)
{
    int sum = 0;
    for (int i = 1; i <= 3; i++)
        sum += square(i);
    *(int *)arg = sum;
    return NULL;
}

NOINLINE void *worker_b(void *arg)
{
    int sum = cube(1) + cube(2) + twice(5);
    *(int *)arg = sum;
    return NULL;
}

NOINLINE void report(int a, int b)
{
    printf("threads: a %d, b %d\n", a, b);
}

int main(void)
{
    pthread_t ta, tb;
    int ra = 0, rb = 0;
    if (pthread_create(&ta, NULL, worker_a, &ra) != 0 || pthread_create(&tb, NULL, worker_b, &rb) != 0)
        return 1;
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    report(ra, rb);
    return 0;
}
