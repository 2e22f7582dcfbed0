/* fib(5), the textbook recursion: fib(n) calls fib(n-1) then fib(n-2),
 * and fib(0), fib(1) return at once: 15 calls of fib in all. The exit
 * status is fib(5), 5. */
#include <stdio.h>

#define NOINLINE __attribute__((noinline))

NOINLINE int fib(int n)
{
    if (n < 2)
        return n;
    int x = fib(n - 1);
    int y = fib(n - 2);
    return x + y;
}

int main(void)
{
    int r = fib(5);
    printf("recursion: fib(5) = %d\n", r);
    return r;
}
