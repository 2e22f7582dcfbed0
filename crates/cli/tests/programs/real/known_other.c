/* The second static `helper` of the callgrind reader's test program
 * (known.c): two functions of one name, told apart by address. */
#define NOINLINE __attribute__((noinline))

/* 100 calls: two for each of helper_b's 50. */
NOINLINE static int helper(int x) { return x * 2; }

/* 50 calls, by known.c's worker. */
NOINLINE int helper_b(int x) { return helper(x) + helper(x + 1); }
