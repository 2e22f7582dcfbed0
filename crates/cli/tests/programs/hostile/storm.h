// What the signal storm programs share: a traced recursion the signals
// interrupt, and the traced leaf their handler calls.
#define DEPTH 100

__attribute__((noinline)) long hleaf(long x) {
    __asm__ volatile("");
    return x + 1;
}

__attribute__((noinline, noipa)) long rec(int n) {
    if (n == 0)
        return 0;
    long r = rec(n - 1);
    __asm__ volatile("" : "+r"(r));
    return r + 1;
}
