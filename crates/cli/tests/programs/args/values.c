/* Arguments and return values (#20): every function prints its own call,
 * as `fntrace replay` shows it, just before it returns:
 *     T<thread> NAME(ARG, ...) = VALUE
 * Floating-point values are printed exactly, in C's hexadecimal notation
 * (%a); the test reads both sides as numbers. This output is the truth the
 * recorded values are compared with (crates/cli/tests/args.rs holds the
 * -A/-R specs, one per function). */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Called as declared: never inlined, cloned or given another convention. */
#ifdef __clang__
#define F __attribute__((noinline))
#else
#define F __attribute__((noipa))
#endif

static __thread int me;

#define SAY(...)                                                               \
    do {                                                                       \
        char line_[512];                                                       \
        int n_ = snprintf(line_, sizeof line_, "T%d ", me);                    \
        snprintf(line_ + n_, sizeof line_ - n_, __VA_ARGS__);                  \
        puts(line_);                                                           \
    } while (0)

F signed char s8(signed char a, unsigned char b) {
    signed char r = (signed char)(a - 1);
    SAY("s8(%d, %u) = %d", a, b, r);
    return r;
}

F short s16(short a, unsigned short b) {
    short r = (short)(a * 2);
    SAY("s16(%d, %u) = %d", a, b, r);
    return r;
}

F int s32(int a, unsigned b) {
    int r = a - (int)b;
    SAY("s32(%d, %u) = %d", a, b, r);
    return r;
}

F long s64(long a, unsigned long b, long c) {
    long r = a + c;
    SAY("s64(%ld, %lu, %#lx) = %ld", a, b, c, r);
    return r;
}

F unsigned octal(unsigned mode) {
    unsigned r = mode & 0777;
    SAY("octal(0%o) = 0%o", mode, r);
    return r;
}

F char letter(char c, int shift) {
    char r = (char)(c + shift);
    SAY("letter('%c', %d) = '%c'", c, shift, r);
    return r;
}

F void *ptr(void *p) {
    void *r = (char *)p + 16;
    SAY("ptr(%#lx) = %#lx", (unsigned long)p, (unsigned long)r);
    return r;
}

F const char *str(const char *s, int skip) {
    const char *r = s + skip;
    SAY("str(\"%s\", %d) = \"%s\"", s, skip, r);
    return r;
}

/* Pointers that are not strings: `shown` is how the trace must show it.
 * `s` is used, so that no compiler leaves its register unset. */
static const char *volatile sink;
F int bad(const char *s, const char *shown) {
    SAY("bad(%s) = %d", shown, 0);
    sink = s;
    return 0;
}

F double mixed(int a, double x, long b, float y, char c) {
    double r = a + x + b + y + c;
    SAY("mixed(%d, %a, %ld, %a, '%c') = %a", a, x, b, (double)y, c, r);
    return r;
}

F float fret(float a, float b) {
    float r = a * b;
    SAY("fret(%a, %a) = %a", (double)a, (double)b, (double)r);
    return r;
}

F long stack10(long a1, long a2, long a3, long a4, long a5, long a6, long a7, long a8, long a9, long a10) {
    long r = a1 + a2 + a3 + a4 + a5 + a6 + a7 + a8 + a9 + a10;
    SAY("stack10(%ld, %ld, %ld, %ld, %ld, %ld, %ld, %ld, %ld, %ld) = %ld", a1, a2, a3, a4, a5, a6, a7, a8,
        a9, a10, r);
    return r;
}

/* d9 and d10 are passed on the stack (eight vector registers). */
F double fstack(double d1, double d2, double d3, double d4, double d5, double d6, double d7, double d8,
                double d9, double d10) {
    double r = d1 + d2 + d3 + d4 + d5 + d6 + d7 + d8 + d9 + d10;
    SAY("fstack(%a, %a, %a, %a) = %a", d1, d8, d9, d10, r);
    return r;
}

F int sumv(int n, ...) {
    va_list ap;
    int r = 0, v[3] = {0, 0, 0};
    va_start(ap, n);
    for (int i = 0; i < n; i++) {
        v[i] = va_arg(ap, int);
        r += v[i];
    }
    va_end(ap);
    SAY("sumv(%d, %d, %d, %d) = %d", n, v[0], v[1], v[2], r);
    return r;
}

F int fib(int n) {
    int r = n < 2 ? n : fib(n - 1) + fib(n - 2);
    SAY("fib(%d) = %d", n, r);
    return r;
}

static void *worker(void *arg) {
    me = (int)(long)arg;
    for (int k = 0; k < 40; k++) {
        s32(me * 1000 + k, (unsigned)k);
        s64(-(long)me * k, (unsigned long)k * 3000000000ul, 0x10 + k);
        fret((float)me + 0.25f, (float)k);
    }
    return NULL;
}

int main(void) {
    s8(-128, 255);
    s8(5, 0);
    s16(-300, 65535);
    s32(-2147483647, 4000000000u);
    s64(-5000000000l, 18000000000000000000ul, 0x7fffffffffffl);
    octal(0100755);
    letter('a', 2);
    ptr((void *)0x1000);
    str("hello world", 6);
    str("", 0);

    long page = sysconf(_SC_PAGESIZE);
    char *two = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (two == MAP_FAILED)
        return 1;
    mprotect(two + page, page, PROT_NONE);
    memcpy(two + page - 5, "abcde", 5); /* no terminator before the guard page */
    char *gone = two + page; /* as unreadable as freed memory, and stays so */
    char shown[64];
    bad(NULL, "NULL");
    bad((const char *)8, "<unreadable 0x8>");
    snprintf(shown, sizeof shown, "<unreadable %#lx>", (unsigned long)gone);
    bad(gone, shown);
    bad(two + page - 5, "\"abcde\"...");

    mixed(-3, 0.1, 1l << 40, 2.5f, 'z');
    fret(1.5f, -0.1f);
    stack10(1, -2, 3, -4, 5, -6, 7, -8, 9, 10000000000l);
    fstack(0.5, 1, 2, 3, 4, 5, 6, -7.125, 1e300, -0.0);
    sumv(3, 10, -20, 30);
    fib(5);

    pthread_t t[3];
    for (long i = 0; i < 3; i++)
        pthread_create(&t[i], NULL, worker, (void *)(i + 1));
    for (int i = 0; i < 3; i++)
        pthread_join(t[i], NULL);
    return 0;
}
