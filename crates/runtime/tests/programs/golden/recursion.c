/* Recursion: fib, mutual recursion (even/odd), a sum that is not a tail
 * call. argv[1] is fib's argument (10 by default; 30 makes millions of
 * calls). */
#include <stdio.h>
#include <stdlib.h>

#include "golden.h"

TRACED int fib(int n) {
    sink++;
    if (n < 2)
        return n;
    int a = fib(n - 1);
    int b = fib(n - 2);
    return a + b;
}

TRACED int is_odd(int n);

TRACED int is_even(int n) {
    sink++;
    if (n == 0)
        return 1;
    return is_odd(n - 1);
}

TRACED int is_odd(int n) {
    sink++;
    if (n == 0)
        return 0;
    return is_even(n - 1);
}

TRACED int sum_to(int n) {
    sink++;
    if (n == 0)
        return 0;
    return n + sum_to(n - 1);
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 10;
    int f = fib(n);
    int e = is_even(n + 3);
    int s = sum_to(n % 20);
    printf("fib(%d)=%d even(%d)=%d sum=%d\n", n, f, n + 3, e, s);
    return f % 7;
}
