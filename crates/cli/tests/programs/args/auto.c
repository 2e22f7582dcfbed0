/* Arguments and return values from DWARF (-a, #20): every function prints
 * its call as `fntrace replay` shows it with -a, just before it returns:
 *     NAME(ARG, ...) = VALUE     (NAME(ARG, ...) for a void function)
 * (floating-point values in C's exact %a; the test reads both sides as
 * numbers). Types: integers of each width and sign, bool, char, enums
 * (shown by name, or the number for a value without one), pointers, C
 * strings, float and double mixed with integers, a struct by value (not
 * read: {...}), and more arguments than registers. */
#include <stdbool.h>
#include <stdio.h>

#ifdef __clang__
#define F __attribute__((noinline))
#else
#define F __attribute__((noipa))
#endif

enum color { RED, GREEN = 5, BLUE = -2 };
struct pair { long a, b; };
struct big { long v[4]; };

F int ints(signed char a, unsigned short b, int c, unsigned long d, long long e) {
    int r = a + b + c;
    printf("ints(%d, %u, %d, %lu, %lld) = %d\n", a, b, c, d, e, r);
    return r;
}

F bool flag(bool on, char c) {
    printf("flag(%s, '%c') = %s\n", on ? "true" : "false", c, on ? "false" : "true");
    return !on;
}

F enum color paint(enum color c, enum color d) {
    printf("paint(%s, %s) = GREEN\n", c == RED ? "RED" : c == BLUE ? "BLUE" : "?", d == BLUE ? "BLUE" : "?");
    return GREEN;
}

F enum color unnamed(int x) {
    printf("unnamed(%d) = %d\n", x, x);
    return (enum color)x;
}

F const char *name(const char *s, void *p) {
    printf("name(\"%s\", %#lx) = \"%s\"\n", s, (unsigned long)p, s + 1);
    return s + 1;
}

F double mix(float f, int i, double d, long l) {
    double r = f + i + d + l;
    printf("mix(%a, %d, %a, %ld) = %a\n", (double)f, i, d, l, r);
    return r;
}

F long bypair(struct pair p, int after) {
    printf("bypair({...}) = %ld\n", p.a + p.b + after);
    return p.a + p.b + after;
}

F long bybig(int first, struct big b, int after) {
    long r = first + b.v[0] + b.v[3] + after;
    printf("bybig(%d, {...}, %d) = %ld\n", first, after, r);
    return r;
}

F long eight(long a, long b, long c, long d, long e, long f, long g, long h) {
    long r = a + b + c + d + e + f + g + h;
    printf("eight(%ld, %ld, %ld, %ld, %ld, %ld, %ld, %ld) = %ld\n", a, b, c, d, e, f, g, h, r);
    return r;
}

F void nothing(void) {
    printf("nothing()\n");
}

int main(void) {
    ints(-5, 65000, -70000, 1ul << 63, -(1ll << 40));
    flag(true, 'x');
    paint(RED, BLUE);
    unnamed(3);
    name("hello", (void *)0x1234);
    mix(0.5f, -3, 1e-3, 1l << 33);
    bypair((struct pair){1, 2}, 3);
    bybig(7, (struct big){{1, 2, 3, 4}}, 9);
    eight(1, 2, 3, 4, 5, 6, -7, 8);
    nothing();
    return 0;
}
