/* Modules: a library linked in (far from the executable: its sites need
 * their own trampolines) and one loaded with dlopen after start, closed and
 * loaded again. Counts calls per function name through the C API.
 *
 * usage: far PLUGIN_PATH */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fntrace.h"

#define NOINLINE __attribute__((noinline, noipa))

int lib_twice(int x);

NOINLINE int main_leaf(int x) { return x - 1; }

static const char *names[] = {"main_leaf", "lib_leaf", "lib_twice", "plug_leaf", "plug_run"};
static unsigned long counts[5];

static void count(uintptr_t ip, uintptr_t parent, fntrace_ops *ops, struct fntrace_regs *regs) {
    (void)parent, (void)ops, (void)regs;
    char name[64];
    if (fntrace_lookup(ip, name, sizeof name) != 0)
        return;
    for (int i = 0; i < 5; i++)
        if (strcmp(name, names[i]) == 0)
            counts[i]++;
}

static int run_plugin(const char *path, int n) {
    void *h = dlopen(path, RTLD_NOW);
    if (!h) {
        fprintf(stderr, "far: %s\n", dlerror());
        exit(2);
    }
    int (*run)(int) = (int (*)(int))dlsym(h, "plug_run");
    uintptr_t a = (uintptr_t)main_leaf, b = (uintptr_t)run;
    printf("plugin distance %lu GiB\n", (unsigned long)((a > b ? a - b : b - a) >> 30));
    int r = run(n);
    dlclose(h);
    return r;
}

int main(int argc, char **argv) {
    if (argc < 2)
        return 2;
    fntrace_ops *ops = fntrace_ops_new(count, NULL, NULL, 0);
    if (!ops || fntrace_ops_set_filter(ops, "*_leaf *_twice plug_*", NULL) || fntrace_ops_register(ops)) {
        fprintf(stderr, "far: %s\n", fntrace_last_error());
        return 2;
    }
    long s = 0;
    for (int i = 0; i < 10; i++)
        s += main_leaf(i) + lib_twice(i);
    s += run_plugin(argv[1], 4);
    s += run_plugin(argv[1], 6);
    uintptr_t a = (uintptr_t)main_leaf, b = (uintptr_t)lib_twice;
    printf("distance %lu GiB\n", (unsigned long)((a > b ? a - b : b - a) >> 30));
    printf("sum %ld\n", s);
    for (int i = 0; i < 5; i++)
        printf("%s %lu\n", names[i], counts[i]);
    return 0;
}
