/* fork: a child that calls traced functions and exits from inside one; a
 * child that calls one and execs this program again (argument "exec"),
 * whose new image calls its own. argv[1] says how: "execv" (default) or
 * "execl". The parent waits for each, then works. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "golden.h"

TRACED int compute(int n) {
    sink++;
    return n <= 1 ? 1 : n + compute(n - 1);
}

TRACED void child_main(int n) {
    int c = compute(n);
    printf("child %d\n", c);
    exit(c % 5);
}

TRACED int before_exec(int n) {
    sink++;
    return n + 1;
}

TRACED int wait_for(pid_t pid) {
    int status = 0;
    if (waitpid(pid, &status, 0) != pid)
        return -1;
    sink++;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 100;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "execv";
    if (strcmp(mode, "exec") == 0) {
        printf("exec'd %d\n", compute(6));
        return 0;
    }
    int a = compute(4);
    printf("parent %d\n", a);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0)
        child_main(7);
    int s1 = wait_for(pid);
    pid = fork();
    if (pid == 0) {
        before_exec(3);
        if (strcmp(mode, "execl") == 0) {
            execl("/proc/self/exe", argv[0], "exec", (char *)NULL);
        } else {
            char *args[] = {argv[0], "exec", NULL};
            execv("/proc/self/exe", args);
        }
        _exit(99);
    }
    int s2 = wait_for(pid);
    printf("%s: statuses %d %d, again %d\n", mode, s1, s2, compute(3));
    return 0;
}
