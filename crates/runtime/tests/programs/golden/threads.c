/* Threads: four threads each run a traced worker, joined by main, which
 * then works too. Each thread's sequence differs (its id sets its length). */
#include <pthread.h>
#include <stdio.h>

#include "golden.h"

#define THREADS 4

static int results[THREADS];

TRACED int leaf(int x) {
    sink++;
    return x * x + 1;
}

TRACED int work(int id) {
    int s = 0;
    for (int i = 0; i < 3 + id * 2; i++)
        s += leaf(i + id);
    return s;
}

TRACED void *worker(void *arg) {
    long id = (long)arg;
    results[id] = work((int)id);
    return NULL;
}

int main(void) {
    pthread_t t[THREADS];
    for (long i = 0; i < THREADS; i++)
        if (pthread_create(&t[i], NULL, worker, (void *)i) != 0)
            return 1;
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    int total = work(9);
    printf("results:");
    for (int i = 0; i < THREADS; i++)
        printf(" %d", results[i]);
    printf(" main=%d\n", total);
    return 0;
}
