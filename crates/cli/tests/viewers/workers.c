/* The viewer tests' program: main and two threads, every function spending
 * measurable time (a busy loop in spin()), so that each has a slice wide
 * enough to see in the Perfetto UI and a frame of its own in a flame graph
 * (inferno leaves out frames under 0.1% of the total).
 *   producer: transform(0..2), each calling parse, and spin after it.
 *   consumer: checksum(0..1), then spin.
 *   main: start both, join both, then summary(). */
#include <pthread.h>
#include <stdio.h>

#define NOINLINE __attribute__((noinline))

static volatile unsigned long sink;

NOINLINE void spin(unsigned long n)
{
    for (unsigned long i = 0; i < n; i++)
        sink += i;
}

NOINLINE void parse(int i)
{
    spin(200000 + i);
}

NOINLINE void transform(int i)
{
    parse(i);
    spin(100000);
}

NOINLINE void *producer(void *arg)
{
    for (int i = 0; i < 3; i++)
        transform(i);
    return arg;
}

NOINLINE void checksum(int i)
{
    spin(300000 + i);
}

NOINLINE void *consumer(void *arg)
{
    for (int i = 0; i < 2; i++)
        checksum(i);
    spin(50000);
    return arg;
}

NOINLINE void summary(void)
{
    spin(100000);
    printf("workers: done\n");
}

int main(void)
{
    pthread_t p, c;
    if (pthread_create(&p, NULL, producer, NULL) != 0 || pthread_create(&c, NULL, consumer, NULL) != 0)
        return 1;
    pthread_join(p, NULL);
    pthread_join(c, NULL);
    summary();
    return 0;
}
