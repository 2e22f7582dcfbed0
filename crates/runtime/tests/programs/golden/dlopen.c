/* dlopen of an instrumented library (argv[1]), calls into it with a
 * callback into the program, dlclose, and the same again. */
#include <dlfcn.h>
#include <stdio.h>

#include "golden.h"

TRACED int main_cb(int x) {
    sink++;
    return x * 2;
}

TRACED int round_trip(const char *path, int n) {
    void *h = dlopen(path, RTLD_NOW);
    if (!h) {
        fprintf(stderr, "%s\n", dlerror());
        return -1000;
    }
    int (*run)(int, int (*)(int)) = (int (*)(int, int (*)(int)))dlsym(h, "plug_run");
    int r = run ? run(n, main_cb) : -100;
    dlclose(h);
    return r;
}

int main(int argc, char **argv) {
    if (argc < 2)
        return 2;
    int a = round_trip(argv[1], 3);
    int b = round_trip(argv[1], 4);
    printf("a=%d b=%d cb=%d\n", a, b, main_cb(5));
    return 0;
}
