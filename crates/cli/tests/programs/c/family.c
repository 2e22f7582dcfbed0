/* --no-follow (#21): a process that forks a child (which calls a traced
 * function and exits) and starts another program (itself, with an
 * argument) that does too; each process prints its pid, so that the test
 * knows which process directories to expect. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

__attribute__((noinline)) int work(int x) {
    printf("work %d in %d\n", x, (int)getpid());
    fflush(stdout);
    return x * 2;
}

int main(int argc, char **argv) {
    if (argc > 1) {
        printf("pid exec %d\n", (int)getpid());
        return work(3) == 6 ? 0 : 1;
    }
    printf("pid root %d\n", (int)getpid());
    fflush(stdout);
    work(1);
    pid_t forked = fork();
    if (forked == 0) {
        printf("pid forked %d\n", (int)getpid());
        _exit(work(2) == 4 ? 0 : 1);
    }
    int status;
    waitpid(forked, &status, 0);
    pid_t started = fork();
    if (started == 0) {
        execl("/proc/self/exe", argv[0], "child", (char *)NULL);
        _exit(127);
    }
    waitpid(started, &status, 0);
    printf("done %d\n", WEXITSTATUS(status));
    return 0;
}
