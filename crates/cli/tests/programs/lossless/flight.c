// The flight recorder's dump on SIGUSR2, then more calls and a normal exit
// (issue 17): both dumps must read back. N calls before the signal, N
// after; stdout says how many in all. Traced, it waits until the dump is
// in the trace (its thread file is not empty) before going on.
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

__attribute__((noinline)) long leaf(long x) {
    __asm__ volatile("");
    return x + 1;
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 1000, s = 0;
    for (long i = 0; i < n; i++)
        s += leaf(i);
    raise(SIGUSR2);
    const char *data = getenv("FNTRACE_DATA");
    if (data) {
        char path[4096];
        snprintf(path, sizeof path, "%s/p%d/t%ld.events", data, (int)getpid(), (long)syscall(SYS_gettid));
        struct stat st;
        for (int i = 0; i < 10000 && (stat(path, &st) != 0 || st.st_size == 0); i++)
            usleep(1000);
    }
    for (long i = 0; i < n; i++)
        s += leaf(i);
    printf("leaf %ld\n", 2 * n);
    return 0;
}
