/* pthread_exit from inside nested traced frames of C code (no
 * -fexceptions) under a traced cleanup handler: the unwinder reaches the
 * handler with a longjmp into the frame that pushed it; the frames it
 * skipped never return (-finstrument-functions logs no exit for them). */
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

TRACED void cleanup(void *arg) {
    sink += (int)(long)arg;
}

TRACED void with_cleanup(int n) {
    pthread_cleanup_push(cleanup, (void *)7L);
    deepest(n);
    pthread_cleanup_pop(0);
}

TRACED void *worker(void *arg) {
    sink++;
    with_cleanup((int)(long)arg);
    return NULL;
}

TRACED int after(int x) {
    sink++;
    return x + 1;
}

int main(void) {
    pthread_t t;
    void *value = NULL;
    if (pthread_create(&t, NULL, worker, (void *)2L) != 0)
        return 1;
    pthread_join(t, &value);
    int d = after((int)(long)value);
    printf("value=%ld d=%d\n", (long)value, d);
    return 0;
}
