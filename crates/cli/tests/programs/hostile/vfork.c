// vfork + exec while traced (issue 16, case 5). Until it execs, a vfork
// child runs in its parent's memory: nothing it does on the way to exec
// (the runtime's exec wrappers included) may stop or damage the parent's
// recording. A second thread keeps calling traced code meanwhile. stdout
// is the same in every run and says how often each function was called.
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#define CHILDREN 200
#define SIDE_CALLS 200000

static volatile int done;

__attribute__((noinline, noipa)) long side_leaf(long x) { return x ^ (x << 1); }

__attribute__((noinline, noipa)) long before_fork(long i) { return i * 2; }

__attribute__((noinline, noipa)) long after_fork(long i, int status) { return i + status; }

static void *side(void *arg) {
    long *calls = arg, acc = 0;
    for (long i = 0; i < SIDE_CALLS; i++) {
        acc += side_leaf(i);
        (*calls)++;
    }
    return (void *)acc;
}

int main(void) {
    long side_calls = 0, acc = 0;
    pthread_t t;
    pthread_create(&t, NULL, side, &side_calls);
    char *argv[] = {"true", NULL};
    for (long i = 0; i < CHILDREN; i++) {
        acc += before_fork(i);
        pid_t pid = vfork();
        if (pid == 0) {
            if (i % 2)
                execl("/bin/true", "true", (char *)NULL);
            else
                execv("/bin/true", argv);
            _exit(127);
        }
        int status = -1;
        waitpid(pid, &status, 0);
        acc += after_fork(i, status);
    }
    void *side_acc;
    pthread_join(t, &side_acc);
    printf("before_fork %d after_fork %d side_leaf %ld acc %ld %ld\n", CHILDREN, CHILDREN, side_calls, acc,
           (long)side_acc);
    return 0;
}
