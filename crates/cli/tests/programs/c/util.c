#include <stdarg.h>
#include "util.h"

/* main.c has a static function of the same name. */
static __attribute__((noinline)) int helper(int x) { return x - 2; }

int util_helper_value(int x) { return helper(x) * 2; }

int util_sum(int n) {
    int s = 0;
    for (int i = 0; i < n; i++)
        s += i;
    return s;
}

int util_varargs(int count, ...) {
    va_list ap;
    int s = 0;
    va_start(ap, count);
    for (int i = 0; i < count; i++)
        s += va_arg(ap, int);
    va_end(ap);
    return s;
}
