/* Function pointers: a table of callbacks called through a dispatcher, and
 * qsort (in the C library, not traced) calling a traced comparator. */
#include <stdio.h>
#include <stdlib.h>

#include "golden.h"

typedef int (*op_fn)(int, int);

TRACED int op_add(int a, int b) {
    sink++;
    return a + b;
}

TRACED int op_sub(int a, int b) {
    sink++;
    return a - b;
}

TRACED int op_mul(int a, int b) {
    sink++;
    return a * b;
}

static op_fn table[] = {op_add, op_sub, op_mul};

TRACED int apply(op_fn f, int a, int b) {
    sink++;
    return f(a, b) + 0 * sink;
}

TRACED int cmp_int(const void *a, const void *b) {
    sink++;
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

TRACED void sort_all(int *v, size_t n) {
    qsort(v, n, sizeof *v, cmp_int);
    sink++;
}

int main(void) {
    int acc = 1;
    for (int i = 0; i < 7; i++)
        acc = apply(table[i % 3], acc, i + 2);
    int v[] = {42, 7, 19, 3, 88, 21, 5, 64, 13, 50, 1, 30};
    size_t n = sizeof v / sizeof *v;
    sort_all(v, n);
    printf("acc=%d sorted:", acc);
    for (size_t i = 0; i < n; i++)
        printf(" %d", v[i]);
    printf("\n");
    return 4;
}
