/* Runs until a signal: main -> work -> leaf x1000, then a short sleep.
 * The Ctrl-C test stops it with SIGINT sent to the whole group. */
#include <stdio.h>
#include <unistd.h>

volatile int sink;

__attribute__((noinline)) int leaf(int x) {
    volatile int y = x;
    return y + 1;
}

__attribute__((noinline)) void work(void) {
    for (int i = 0; i < 1000; i++)
        sink += leaf(i);
}

int main(void) {
    printf("start\n");
    fflush(stdout);
    for (;;) {
        work();
        usleep(1000);
    }
}
