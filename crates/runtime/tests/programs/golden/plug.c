/* The library of dlopen.c: loaded, called (it calls back into the
 * program), closed, and loaded again. */
#include "golden.h"

TRACED int plug_leaf(int x) {
    sink++;
    return x + 1;
}

TRACED int plug_run(int n, int (*cb)(int)) {
    int s = 0;
    for (int i = 0; i < n; i++)
        s += cb(plug_leaf(i));
    return s;
}
