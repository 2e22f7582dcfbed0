/* A library loaded with dlopen after start. */
#define NOINLINE __attribute__((noinline, noipa))
NOINLINE int plug_leaf(int x) { return x * 2; }
NOINLINE int plug_run(int n) {
    int s = 0;
    for (int i = 0; i < n; i++)
        s += plug_leaf(i);
    return s;
}
