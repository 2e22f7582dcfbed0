/* A small C program with the shapes real code has: static functions with
 * the same name in two files, recursion, tail calls, function pointers, a
 * function in its own section, a cold function. */
#include <stdio.h>
#include <stdlib.h>
#include "util.h"

/* util.c has a static function of the same name. */
static __attribute__((noinline)) int helper(int x) { return x * 3 + 1; }

__attribute__((noinline)) int leaf(int x) { return x + 7; }

__attribute__((noinline)) int fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }

/* At -O2 this ends in a tail call (jmp leaf). */
__attribute__((noinline)) int tail(int x) { return leaf(x + 1); }

__attribute__((noinline, section(".text.custom"))) int custom_section(int x) { return x ^ 0x55; }

__attribute__((noinline, cold)) void rarely(const char *why) { fprintf(stderr, "%s\n", why); }

static int (*const table[])(int) = {leaf, helper, custom_section};

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 10;
    int acc = 0;
    for (int i = 0; i < 3; i++)
        acc += table[i](n);
    acc += fib(n) + tail(n) + util_sum(n) + util_helper_value(n) + util_varargs(3, 1, 2, 3);
    if (acc < 0)
        rarely("negative");
    printf("%d\n", acc);
    return 0;
}
