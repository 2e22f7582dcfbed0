/* A library no compiler prepared: mid_len calls its own mid_count, and
 * strlen in libc, once per call. */
#include <string.h>

#include "mid.h"

static long calls;

__attribute__((noinline)) static long mid_count(const char *s)
{
    calls++;
    return (long)strlen(s);
}

long mid_len(const char *s)
{
    return mid_count(s);
}

long mid_calls(void)
{
    return calls;
}
