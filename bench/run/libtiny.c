/* The library of bench/libcall.sh, built plain (gcc -O2 -fPIC -shared):
 * `tiny`, a leaf the program calls, and `inner`, which calls `tiny` N
 * times itself (through its PLT: an exported function may be interposed),
 * so that the library's own calls of a traced library function are
 * measured too. */
__attribute__((noinline)) int tiny(int x)
{
    __asm__ volatile("");
    return x * 3 + 1;
}

unsigned long inner(long n)
{
    unsigned long sink = 0;
    for (long i = 0; i < n; i++)
        sink += (unsigned long)tiny((int)i);
    return sink;
}
