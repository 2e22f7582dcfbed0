// A forked child that ends in one of the ways a child ends (issue 17):
// _exit, _Exit, abort, a segmentation fault. Its calls before the end
// must be in the trace; its status must be the untraced one's.
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

__attribute__((noinline)) long leaf(long x) {
    __asm__ volatile("");
    return x + 1;
}

__attribute__((noinline)) long work(long n) {
    long s = 0;
    for (long i = 0; i < n; i++)
        s += leaf(i);
    return s;
}

int main(int argc, char **argv) {
    const char *how = argc > 1 ? argv[1] : "_exit";
    pid_t pid = fork();
    if (pid == 0) {
        work(1000);
        if (!strcmp(how, "_exit"))
            _exit(3);
        if (!strcmp(how, "_Exit"))
            _Exit(4);
        if (!strcmp(how, "abort"))
            abort();
        if (!strcmp(how, "segv"))
            *(volatile int *)0 = 1;
        return 0;
    }
    int st;
    waitpid(pid, &st, 0);
    printf("child %s: %s %d\n", how, WIFEXITED(st) ? "exit" : "signal",
           WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
    return 0;
}
