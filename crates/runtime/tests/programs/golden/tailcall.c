/* Tail calls: built with sibling calls on (-O2), so f, h, even2 and odd2
 * end with a jump to another traced function. -finstrument-functions keeps
 * them real calls; a trace must still show f's call of g inside f. */
#include <stdio.h>

#include "golden.h"

TRACED int g(int x) {
    sink++;
    return x * 3 + 1;
}

TRACED int f(int x) {
    sink++;
    return g(x + 1);
}

TRACED int h(int x) {
    sink++;
    if (x & 1)
        return f(x);
    return g(x);
}

TRACED int odd2(int n);

TRACED int even2(int n) {
    sink++;
    if (n == 0)
        return 1;
    return odd2(n - 1);
}

TRACED int odd2(int n) {
    sink++;
    if (n == 0)
        return 0;
    return even2(n - 1);
}

TRACED int outer(int x) {
    int a = h(x);
    int b = h(x + 1);
    return a + b;
}

int main(void) {
    int r = outer(4);
    r += f(7);
    r += even2(7);
    r += outer(1);
    printf("r=%d\n", r);
    return 0;
}
