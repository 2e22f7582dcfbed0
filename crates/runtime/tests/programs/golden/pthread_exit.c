/* pthread_exit from inside nested traced frames (C); main joins each
 * thread and goes on calling. */
#include <pthread.h>
#include <stdio.h>

#include "golden.h"

TRACED void deepest(int n) {
    sink++;
    if (n == 0)
        pthread_exit((void *)42L);
    deepest(n - 1);
    sink++;
}

TRACED int middle(int n) {
    sink++;
    deepest(n);
    return -1;
}

TRACED void *worker(void *arg) {
    sink++;
    middle((int)(long)arg);
    return NULL;
}

TRACED int after(int x) {
    sink++;
    return x + 1;
}

static void *join(void *(*fn)(void *), long arg) {
    pthread_t t;
    void *value = NULL;
    if (pthread_create(&t, NULL, fn, (void *)arg) != 0)
        return NULL;
    pthread_join(t, &value);
    return value;
}

int main(void) {
    long a = (long)join(worker, 3);
    long b = (long)join(worker, 0);
    int c = after((int)(a + b));
    printf("a=%ld b=%ld c=%d\n", a, b, c);
    return 0;
}
