/* Library calls (#19): the program calls libc and its own library libmid
 * a known number of times, from two threads too, and prints how many
 * times it called each: the truth `tests/libcall.rs` compares with.
 * Built with -fno-builtin so that every call in the source is a call. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mid.h"

static long n_malloc, n_free, n_getpid, n_strdup, n_cmp, n_mid, n_memcpy;

static int cmp(const void *a, const void *b)
{
    __atomic_add_fetch(&n_cmp, 1, __ATOMIC_RELAXED);
    return *(const int *)a - *(const int *)b;
}

static void *worker(void *arg)
{
    long k = (long)arg;
    for (long i = 0; i < 200 + k; i++) {
        void *p = malloc(16 + i);
        __atomic_add_fetch(&n_malloc, 1, __ATOMIC_RELAXED);
        free(p);
        __atomic_add_fetch(&n_free, 1, __ATOMIC_RELAXED);
        /* strdup allocates with malloc inside libc: not a call of the
           program's. */
        char *s = strdup("library call");
        __atomic_add_fetch(&n_strdup, 1, __ATOMIC_RELAXED);
        free(s);
        __atomic_add_fetch(&n_free, 1, __ATOMIC_RELAXED);
    }
    return NULL;
}

int main(void)
{
    int v[64];
    for (int i = 0; i < 64; i++)
        v[i] = (i * 7919) % 64;
    qsort(v, 64, sizeof *v, cmp);
    long pid = 0;
    for (int i = 0; i < 100; i++) {
        pid += getpid() > 0;
        n_getpid++;
    }
    /* memcpy, which glibc's strdup also reaches, by a tail call: that one
       is libc's own call, not the program's. */
    char copy[8];
    for (int i = 0; i < 30; i++) {
        memcpy(copy, "fntrace", 8);
        n_memcpy++;
    }
    long len = 0;
    for (int i = 0; i < 50; i++) {
        len += mid_len("fntrace");
        n_mid++;
    }
    pthread_t t[2];
    for (long k = 0; k < 2; k++)
        pthread_create(&t[k], NULL, worker, (void *)k);
    for (int k = 0; k < 2; k++)
        pthread_join(t[k], NULL);
    printf("sorted=%d pid=%ld len=%ld copy=%s\n", v[0] == 0 && v[63] == 63, pid, len, copy);
    printf("malloc=%ld free=%ld getpid=%ld strdup=%ld cmp=%ld mid_len=%ld memcpy=%ld\n", n_malloc,
           n_free, n_getpid, n_strdup, n_cmp, n_mid, n_memcpy);
    return 0;
}
