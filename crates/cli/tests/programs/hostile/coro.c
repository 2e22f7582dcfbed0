// Coroutines that switch stacks in the middle of traced calls (issue 16,
// case 3). Two coroutines each run a chain of traced calls (walk -> step ->
// leaf) and yield to the scheduler from inside `step`, through the traced
// `gswitch`. `ucontext`: the switch is swapcontext, the coroutines made
// with makecontext; `asm`: a hand-written switch in assembly (`raw_switch`)
// on stacks set up by hand. stdout is the same in every run; stderr says
// how many times each function was called (the truth the trace is
// compared with).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>

#define ROUNDS 2000
#define STACK (64 * 1024)

static int use_asm;
static ucontext_t sched_uc, co_uc[2];
static void *sched_sp, *co_sp[2];
static int finished[2];
static long sums[2];
static long calls_walk, calls_step, calls_leaf, calls_switch;

// raw_switch(save, to): saves the callee-saved registers and the stack
// pointer in *save, takes the stack `to` and returns into what it holds.
void raw_switch(void **save, void *to);
__asm__(".text\n"
        ".globl raw_switch\n"
        ".type raw_switch, @function\n"
        "raw_switch:\n"
        "  push %rbp\n  push %rbx\n  push %r12\n  push %r13\n  push %r14\n  push %r15\n"
        "  mov %rsp, (%rdi)\n"
        "  mov %rsi, %rsp\n"
        "  pop %r15\n  pop %r14\n  pop %r13\n  pop %r12\n  pop %rbx\n  pop %rbp\n"
        "  ret\n"
        ".size raw_switch, . - raw_switch\n");

static void co_main(int id);
static int starting;
// A new coroutine's first switch lands here, on its own stack.
__attribute__((noreturn)) static void co_boot(void) {
    co_main(starting);
    abort();
}
void co_boot_entry(void);
__asm__(".text\n"
        "co_boot_entry:\n"
        "  and $-16, %rsp\n"
        "  call co_boot_c\n"
        "  ud2\n");
__attribute__((used, noreturn)) void co_boot_c(void) { co_boot(); }

// Switches from the running context to another (id -1: the scheduler).
__attribute__((noinline)) void gswitch(int from, int to) {
    calls_switch++;
    if (use_asm) {
        raw_switch(from < 0 ? &sched_sp : &co_sp[from], to < 0 ? sched_sp : co_sp[to]);
    } else {
        swapcontext(from < 0 ? &sched_uc : &co_uc[from], to < 0 ? &sched_uc : &co_uc[to]);
    }
}

__attribute__((noinline, noipa)) long leaf(long x) {
    calls_leaf++;
    return x * 3 + 1;
}

__attribute__((noinline, noipa)) long step(int id, long i) {
    calls_step++;
    long v = leaf(i);
    gswitch(id, -1);
    return v + leaf(v);
}

__attribute__((noinline, noipa)) long walk(int id, int n) {
    calls_walk++;
    long s = 0;
    for (int i = 0; i < n; i++)
        s += step(id, i + id * 7);
    return s;
}

static void co_main(int id) {
    sums[id] = walk(id, ROUNDS);
    finished[id] = 1;
    gswitch(id, -1);
    abort();
}

static void *new_stack(int id) {
    char *stack = malloc(STACK);
    if (use_asm) {
        // What raw_switch pops: six registers, then the address it returns to.
        void **sp = (void **)(stack + STACK) - 8;
        memset(sp, 0, 8 * sizeof(void *));
        sp[6] = (void *)co_boot_entry;
        co_sp[id] = sp;
    } else {
        getcontext(&co_uc[id]);
        co_uc[id].uc_stack.ss_sp = stack;
        co_uc[id].uc_stack.ss_size = STACK;
        co_uc[id].uc_link = NULL;
        makecontext(&co_uc[id], (void (*)(void))co_main, 1, id);
    }
    return stack;
}

int main(int argc, char **argv) {
    use_asm = argc > 1 && strcmp(argv[1], "asm") == 0;
    void *stacks[2] = {new_stack(0), new_stack(1)};
    while (!finished[0] || !finished[1]) {
        for (int id = 0; id < 2; id++) {
            if (finished[id])
                continue;
            starting = id;
            gswitch(-1, id);
        }
    }
    free(stacks[0]);
    free(stacks[1]);
    printf("sums %ld %ld\n", sums[0], sums[1]);
    fprintf(stderr, "calls walk %ld step %ld leaf %ld gswitch %ld\n", calls_walk, calls_step, calls_leaf,
            calls_switch);
    return 0;
}
