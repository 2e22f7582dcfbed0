/* The -pg function of aarch64_plans.c: FORMULA + 1. */
long traced_pg(long a, long b, long c, long d, long e, long f, long g, long h)
{ return a + 2 * b + 3 * c + 4 * d + 5 * e + 6 * f + 7 * g + 8 * h + 1; }
