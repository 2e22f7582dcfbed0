/* A program that takes SIGTRAP for itself (issue 19, design 4.8): it
 * installs its own SIGTRAP handler, raises SIGTRAP once, then blocks
 * SIGTRAP in its thread and calls tiny() — one `ret` with the next
 * function right after it, traced through a trap site — and ramp(), whose
 * first instructions a traced jump covers. Traced, its handler must still
 * run exactly for its own trap, and the traced calls must not kill it.
 * Prints "own=1 calls=N sum=S". */
#include <signal.h>
#include <stdio.h>
#include <string.h>

static volatile sig_atomic_t own;
static void on_trap(int sig) { (void)sig; own++; }

void tiny(void);
int ramp(int x);
__asm__(".text\n.globl tiny\n.type tiny,@function\ntiny:\n  ret\n.size tiny,.-tiny\n"
        ".globl ramp\n.type ramp,@function\nramp:\n  push %rbx\n  mov %edi,%ebx\n  lea 1(%rbx,%rbx,2),%eax\n"
        "  pop %rbx\n  ret\n.size ramp,.-ramp\n");

int main(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_trap;
    sigaction(SIGTRAP, &sa, NULL);
    raise(SIGTRAP);
    sigset_t block;
    sigemptyset(&block);
    sigaddset(&block, SIGTRAP);
    pthread_sigmask(SIG_BLOCK, &block, NULL);
    long sum = 0;
    int n = 1000;
    for (int i = 0; i < n; i++) {
        tiny();
        sum += ramp(i);
    }
    printf("own=%d calls=%d sum=%ld\n", (int)own, n, sum);
    return 0;
}
