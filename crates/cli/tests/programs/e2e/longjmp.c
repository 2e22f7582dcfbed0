/* longjmp out of traced frames.
 * run(): setjmp, then a -> b -> c, and c longjmps back into run, which
 *   calls after(): a, b and c never return (closed as unwound when
 *   after() starts).
 * partial(): setjmp, then mid1 -> mid2, which longjmps back into
 *   partial; partial returns normally (mid1, mid2 closed as unwound when
 *   partial returns). */
#include <setjmp.h>
#include <stdio.h>

#define NOINLINE __attribute__((noinline))

static jmp_buf env, env2;
static volatile int steps;

NOINLINE void c(void)
{
    printf("longjmp: c jumps\n");
    longjmp(env, 1);
}

NOINLINE void b(void)
{
    c();
    printf("longjmp: not reached (b)\n");
}

NOINLINE void a(void)
{
    b();
    printf("longjmp: not reached (a)\n");
}

NOINLINE void after(void)
{
    steps++;
    printf("longjmp: after\n");
}

NOINLINE void run(void)
{
    if (setjmp(env) == 0)
        a();
    else
        after();
}

NOINLINE void mid2(void)
{
    longjmp(env2, 2);
}

NOINLINE void mid1(void)
{
    mid2();
    printf("longjmp: not reached (mid1)\n");
}

NOINLINE int partial(void)
{
    int r = setjmp(env2);
    if (r == 0)
        mid1();
    return r;
}

int main(void)
{
    run();
    int r = partial();
    printf("longjmp: partial %d, steps %d\n", r, steps);
    return 0;
}
