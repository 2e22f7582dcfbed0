/* The traced program's code near the trampolines: the "kernel". */
#define NOINLINE __attribute__((noinline, noipa))

#ifdef REDIRECTED
/* What `leaf` computes once redirected to `leaf_v2`: the truth the
 * redirect's results are compared with. */
NOINLINE int leaf(int x) { return x * 5 - 7; }
#else
NOINLINE int leaf(int x) { return x * 3 + 1; }
#endif

NOINLINE int mid(int x) { return leaf(x) + 2 * leaf(x + 1); }

NOINLINE int many(int a, int b, int c, int d, int e, int f, int g, int h)
{
	return a - b + 2 * c - d + 3 * e - f + 4 * g - h;
}

NOINLINE int calls_many(int x) { return many(x, 1, 2, 3, 4, 5, 6, 7) + 1; }

NOINLINE int frame(int x)
{
	volatile int buf[40];
	for (int i = 0; i < 40; i++)
		buf[i] = x + i;
	int sum = 0;
	for (int i = 0; i < 40; i++)
		sum += buf[i] * (i & 3);
	return sum;
}

/* The replacement a direct call redirects `leaf` to. */
NOINLINE int leaf_v2(int x) { return x * 5 - 7; }

/* Never instrumented (the first attribute for -pg, the second for
 * -fpatchable-function-entry). */
__attribute__((no_instrument_function, patchable_function_entry(0, 0), noinline, noipa)) int plain(int x)
{
	return leaf(x) - 1;
}
