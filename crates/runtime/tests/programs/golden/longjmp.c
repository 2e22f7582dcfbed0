/* setjmp/longjmp out of several traced frames, then more calls: from a
 * helper's setjmp (twice, at two depths) and from main's. */
#include <setjmp.h>
#include <stdio.h>

#include "golden.h"

static jmp_buf env, top;

TRACED void dive(int n) {
    sink++;
    if (n == 0)
        longjmp(env, 7);
    dive(n - 1);
    sink++;
}

TRACED int level1(int n) {
    sink++;
    dive(n);
    return -1;
}

TRACED int after(int x) {
    sink++;
    return x + 1;
}

TRACED int attempt(int n) {
    volatile int r = setjmp(env);
    if (r == 0) {
        int v = level1(n);
        return v - 1;
    }
    return after(r) + n;
}

TRACED void escape(int n) {
    sink++;
    if (n == 0)
        longjmp(top, 3);
    escape(n - 1);
    sink++;
}

int main(void) {
    int total = attempt(3);
    total += attempt(5);
    total += after(1);
    volatile int r = setjmp(top);
    if (r == 0)
        escape(4);
    else
        total += after(r);
    total += attempt(1);
    printf("total=%d\n", total);
    return 0;
}
