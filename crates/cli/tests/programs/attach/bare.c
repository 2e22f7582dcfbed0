/* A workload of functions no compiler prepared (bare sites), patched and
 * unpatched live while threads are inside their first five bytes
 * (tests/attach_bare.rs; issue 19, item 3; docs/design/UNPREPARED.md 4.9).
 * Built plain: gcc -O2 -pthread, no -pg, no -fpatchable-function-entry.
 *
 * The hot functions are assembly, so that their first instructions are
 * known: each has instruction boundaries inside its first five bytes
 * (the "interior boundaries" the jump's rel32 makes int3):
 *   bare_frame  push %rbp; mov %rsp,%rbp     e+1, e+4     5x+3
 *   bare_regs   push %r15; push %r14         e+2, e+4     7x+1
 *   bare_call   sub $8,%rsp; call bare_g     e+4          4x+1
 *   bare_g      lea; ret                     e+4          3x+1
 *   bare_short  test; jne; mov; ret (padded) e+2, e+4     x ? 5x+3 : 0
 *   bare_cet    endbr64; push %rbx; mov      e+1, e+3     9x+2 (e after endbr64)
 *   bare_sys    push $110; pop %rax; syscall e+2, e+3     getppid() + 5x+3
 *   bare_tiny   lea; ret (4 bytes, padded)   e+3          x+1
 *   bare_read   push $0; pop %rax; syscall   e+2, e+3     read(fd, buf, n)
 * bare_call's call is the last instruction of its first five bytes: g
 * returns right after them. Each has a C twin the results are checked
 * against.
 *
 * Threads: three workers call all of them in a loop (with the two
 * parkers, five busy threads on two cores: preempted inside the first
 * bytes now and then); two parkers, which `park` holds in a SIGUSR1
 * handler that made the interrupted context a call of one function
 * stopped at one of its interior boundaries (the registers and stack as
 * the instructions before it left them; the thirteen such places in
 * turn), released by `release`; a reader blocked in bare_read's
 * `syscall`, whose restarts after SIGUSR2 (SA_RESTART) resume at
 * bare_read+3. Each of these six gets a SIGUSR2 every 50 us from a
 * timer of its own, whose handler calls the functions and checks them.
 *
 * Commands on stdin, one line each, one line answered:
 *   park      every parker parked at an interior boundary: `parked`
 *   release   every parker resumed, a byte for the reader: `released`
 *   report    rounds=R bad=B parks=P value=V signals=S reads=N traps=T
 *             worker_rounds=W (rounds of the three workers alone)
 *             (T: the runtime's count of threads its SIGTRAP handler moved,
 *             fntrace_get_stats' `traps`; -1 while it is not loaded)
 *   quit      the report, then exit 0
 * It prints `ready PID` first. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#define WORKERS 3
#define PARKERS 2
#define PARK_ARG 7

int bare_frame(int), bare_regs(int), bare_call(int), bare_g(int), bare_short(int);
int bare_cet(int), bare_sys(int), bare_tiny(int);
long bare_read(int, void *, long);

#define FN(name) ".p2align 4\n.globl " #name "\n.type " #name ",@function\n" #name ":\n"
#define END(name) ".size " #name ", .-" #name "\n"
__asm__(".text\n"
        FN(bare_frame)
        "  push %rbp\n"
        "  mov %rsp, %rbp\n"
        "  lea 3(%rdi,%rdi,4), %eax\n"
        "  pop %rbp\n"
        "  ret\n"
        END(bare_frame)
        FN(bare_regs)
        "  push %r15\n"
        "  push %r14\n"
        "  mov %edi, %r15d\n"
        "  imul $7, %r15d, %r14d\n"
        "  lea 1(%r14), %eax\n"
        "  pop %r14\n"
        "  pop %r15\n"
        "  ret\n"
        END(bare_regs)
        FN(bare_call)
        "  sub $8, %rsp\n"
        "  call bare_g\n"
        "  add $8, %rsp\n"
        "  add %edi, %eax\n"
        "  ret\n"
        END(bare_call)
        FN(bare_g)
        "  lea 1(%rdi,%rdi,2), %eax\n"
        "  ret\n"
        END(bare_g)
        FN(bare_short)
        "  test %edi, %edi\n"
        "  jne 1f\n"
        "  mov %edi, %eax\n"
        "  ret\n"
        "1:\n"
        "  lea 3(%rdi,%rdi,4), %eax\n"
        "  ret\n"
        END(bare_short)
        FN(bare_cet)
        "  endbr64\n"
        "  push %rbx\n"
        "  mov %edi, %ebx\n"
        "  lea (%rbx,%rbx,8), %eax\n"
        "  add $2, %eax\n"
        "  pop %rbx\n"
        "  ret\n"
        END(bare_cet)
        FN(bare_sys)
        "  push $110\n" /* getppid */
        "  pop %rax\n"
        "  syscall\n"
        "  lea 3(%rdi,%rdi,4), %edx\n"
        "  add %edx, %eax\n"
        "  ret\n"
        END(bare_sys)
        FN(bare_tiny)
        "  lea 1(%rdi), %eax\n"
        "  ret\n"
        END(bare_tiny)
        FN(bare_read)
        "  push $0\n" /* read */
        "  pop %rax\n"
        "  syscall\n"
        "  ret\n"
        END(bare_read)
        ".p2align 4\n");

#define TWIN __attribute__((noinline))
static int ppid;
TWIN static int twin_frame(int x) { return x * 5 + 3; }
TWIN static int twin_regs(int x) { return x * 7 + 1; }
TWIN static int twin_call(int x) { return x * 4 + 1; }
TWIN static int twin_g(int x) { return x * 3 + 1; }
TWIN static int twin_short(int x) { return x ? x * 5 + 3 : 0; }
TWIN static int twin_cet(int x) { return x * 9 + 2; }
TWIN static int twin_sys(int x) { return ppid + x * 5 + 3; }
TWIN static int twin_tiny(int x) { return x + 1; }

static atomic_long rounds, worker_rounds, bad, parks, last, signals, reads, written, next_point;
static __thread int is_worker;
static atomic_int wanted[PARKERS], parked[PARKERS], released;
static pthread_t parker_threads[PARKERS];
static int pipe_fds[2];

/* Calls every function with x, checks each result; their sum (getppid
 * taken out). */
TWIN static long check_all(int x) {
    int got[8] = {bare_frame(x), bare_regs(x), bare_call(x), bare_g(x),
                  bare_short(x), bare_cet(x), bare_sys(x),  bare_tiny(x)};
    int want[8] = {twin_frame(x), twin_regs(x), twin_call(x), twin_g(x),
                   twin_short(x), twin_cet(x), twin_sys(x),  twin_tiny(x)};
    long sum = -ppid;
    for (int i = 0; i < 8; i++) {
        if (got[i] != want[i])
            atomic_fetch_add(&bad, 1);
        sum += got[i];
    }
    return sum;
}

TWIN static void *loop(void *arg);

/* The parked call's expected result; where it returns, its result in rax. */
static __thread int park_expect;
void parker_land(void);
__asm__(".text\n"
        "parker_land:\n"
        "  mov %rax, %rdi\n"
        "  and $-16, %rsp\n"
        "  call parker_resume\n"
        "  ud2\n");
__attribute__((used, noreturn, noinline)) void parker_resume(long v) {
    if ((int)v != park_expect)
        atomic_fetch_add(&bad, 1);
    loop(NULL);
    __builtin_unreachable();
}

static uintptr_t push(uintptr_t sp, uintptr_t value) {
    sp -= 8;
    *(uintptr_t *)sp = value;
    return sp;
}

#define POINTS 13
#define AT(f, off) ((greg_t)((uintptr_t)(f) + (off)))

/* Makes `g` a call of one function from parker_land, stopped at interior
 * boundary `point`: what the instructions before it did is done. */
static void park_at(greg_t *g, int point) {
    uintptr_t sp = ((uintptr_t)g[REG_RSP] - 256) & ~(uintptr_t)15;
    sp = push(sp, (uintptr_t)parker_land);
    int x = PARK_ARG;
    g[REG_RDI] = x;
    switch (point) {
    case 0: /* bare_frame+1: push %rbp done */
    case 1: /* bare_frame+4: mov %rsp,%rbp done */
        sp = push(sp, (uintptr_t)g[REG_RBP]);
        if (point == 1)
            g[REG_RBP] = (greg_t)sp;
        g[REG_RIP] = AT(bare_frame, point ? 4 : 1);
        park_expect = twin_frame(x);
        break;
    case 2: /* bare_regs+2, +4 */
    case 3:
        sp = push(sp, (uintptr_t)g[REG_R15]);
        if (point == 3)
            sp = push(sp, (uintptr_t)g[REG_R14]);
        g[REG_RIP] = AT(bare_regs, point == 3 ? 4 : 2);
        park_expect = twin_regs(x);
        break;
    case 4: /* bare_call+4: the call next */
        sp -= 8;
        g[REG_RIP] = AT(bare_call, 4);
        park_expect = twin_call(x);
        break;
    case 5: /* bare_g+4, called from bare_call: returns to bare_call+9 */
        sp -= 8;
        sp = push(sp, (uintptr_t)bare_call + 9);
        g[REG_RAX] = twin_g(x);
        g[REG_RIP] = AT(bare_g, 4);
        park_expect = twin_call(x);
        break;
    case 6: /* bare_short+2: test done (x != 0: ZF clear) */
        g[REG_EFL] &= ~(greg_t)0x40;
        g[REG_RIP] = AT(bare_short, 2);
        park_expect = twin_short(x);
        break;
    case 7: /* bare_short+4: jne not taken, so x == 0 */
        g[REG_RDI] = 0;
        g[REG_EFL] |= 0x40;
        g[REG_RIP] = AT(bare_short, 4);
        park_expect = twin_short(0);
        break;
    case 8: /* bare_cet+4+1, +4+3 (e is after endbr64) */
    case 9:
        sp = push(sp, (uintptr_t)g[REG_RBX]);
        if (point == 9)
            g[REG_RBX] = x;
        g[REG_RIP] = AT(bare_cet, point == 9 ? 7 : 5);
        park_expect = twin_cet(x);
        break;
    case 10: /* bare_sys+2: 110 pushed */
        sp = push(sp, 110);
        g[REG_RIP] = AT(bare_sys, 2);
        park_expect = twin_sys(x);
        break;
    case 11: /* bare_sys+3: rax = 110, the syscall next */
        g[REG_RAX] = 110;
        g[REG_RIP] = AT(bare_sys, 3);
        park_expect = twin_sys(x);
        break;
    default: /* bare_tiny+3: the ret next */
        g[REG_RAX] = twin_tiny(x);
        g[REG_RIP] = AT(bare_tiny, 3);
        park_expect = twin_tiny(x);
        break;
    }
    g[REG_RSP] = (greg_t)sp;
}

TWIN static void on_park(int sig, siginfo_t *info, void *ctx) {
    (void)sig;
    (void)info;
    int id = -1;
    for (int i = 0; i < PARKERS; i++)
        if (pthread_equal(pthread_self(), parker_threads[i]))
            id = i;
    /* A signal still pending from the last `park` is not another park. */
    if (id < 0 || !atomic_exchange(&wanted[id], 0))
        return;
    park_at(((ucontext_t *)ctx)->uc_mcontext.gregs, (int)(atomic_fetch_add(&next_point, 1) % POINTS));
    atomic_store(&parked[id], 1);
    while (!atomic_load(&released))
        usleep(200);
    atomic_fetch_add(&parks, 1);
    atomic_store(&parked[id], 0);
}

TWIN static void on_usr2(int sig) {
    (void)sig;
    long n = atomic_fetch_add(&signals, 1);
    check_all((int)(n % 1000));
}

TWIN static void *loop(void *arg) {
    (void)arg;
    for (;;) {
        long sum = 0;
        for (int i = 0; i < 1000; i++)
            sum += check_all(i);
        atomic_store(&last, sum);
        atomic_fetch_add(&rounds, 1);
        if (is_worker)
            atomic_fetch_add(&worker_rounds, 1);
    }
    return NULL;
}

/* Blocked in bare_read's syscall; each byte is the count of bytes before. */
TWIN static void *reader(void *arg) {
    (void)arg;
    for (;;) {
        unsigned char c;
        long r = bare_read(pipe_fds[0], &c, 1);
        if (r != 1 || c != (unsigned char)atomic_load(&reads))
            atomic_fetch_add(&bad, 1);
        atomic_fetch_add(&reads, 1);
    }
    return NULL;
}

/* SIGUSR2 to the calling thread every 50 us, from a timer of its own: a
 * sender thread, on two cores busy with five threads, woke 300 times a
 * second, not 20,000; the kernel's timers keep the rate. */
#ifndef sigev_notify_thread_id
#define sigev_notify_thread_id _sigev_un._tid
#endif
TWIN static void storm(void) {
    struct sigevent ev;
    memset(&ev, 0, sizeof ev);
    ev.sigev_notify = SIGEV_THREAD_ID;
    ev.sigev_signo = SIGUSR2;
    ev.sigev_notify_thread_id = gettid();
    timer_t timer;
    struct itimerspec every = {{0, 50 * 1000}, {0, 50 * 1000}};
    if (timer_create(CLOCK_MONOTONIC, &ev, &timer) != 0 || timer_settime(timer, 0, &every, NULL) != 0)
        atomic_fetch_add(&bad, 1);
}

/* The busy threads run at nice 10: two cores stay shared between five of
 * them (preempted anywhere, inside the patched bytes too), and the
 * commands, fntrace and the runtime's own thread still get the CPU. */
TWIN static void *busy(void *arg) {
    if (setpriority(PRIO_PROCESS, (id_t)gettid(), 10) != 0)
        atomic_fetch_add(&bad, 1);
    storm();
    if (arg == (void *)1)
        return reader(NULL);
    is_worker = arg == (void *)2;
    return loop(NULL);
}

/* The runtime fntrace attach loaded, found by its file's name. */
static int find_runtime(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    if (!strstr(info->dlpi_name, "libfntrace"))
        return 0;
    *(void **)data = dlopen(info->dlpi_name, RTLD_LAZY | RTLD_NOLOAD);
    return 1;
}

/* fntrace.h's counters, as the runtime exports them. */
struct fntrace_stats {
    uint64_t modules, sites, converted, canonical, skipped;
    uint64_t batches, written, syncs, protects, refused, traps, recursions;
};

TWIN static long runtime_traps(void) {
    void *runtime = NULL;
    dl_iterate_phdr(find_runtime, &runtime);
    if (!runtime)
        return -1;
    int (*get)(struct fntrace_stats *) = (int (*)(struct fntrace_stats *))dlsym(runtime, "fntrace_get_stats");
    struct fntrace_stats stats;
    long traps = get && get(&stats) == 0 ? (long)stats.traps : -1;
    dlclose(runtime);
    return traps;
}

TWIN static void report(void) {
    printf("rounds=%ld bad=%ld parks=%ld value=%ld signals=%ld reads=%ld traps=%ld worker_rounds=%ld\n",
           atomic_load(&rounds), atomic_load(&bad), atomic_load(&parks), atomic_load(&last),
           atomic_load(&signals), atomic_load(&reads), runtime_traps(), atomic_load(&worker_rounds));
    fflush(stdout);
}

TWIN static void handle(int sig, void (*f)(int, siginfo_t *, void *), void (*g)(int)) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    if (f)
        sa.sa_sigaction = f;
    else
        sa.sa_handler = g;
    sa.sa_flags = SA_RESTART | (f ? SA_SIGINFO : 0);
    sigaction(sig, &sa, NULL);
}

int main(void) {
    ppid = (int)getppid();
    handle(SIGUSR1, on_park, NULL);
    handle(SIGUSR2, NULL, on_usr2);
    if (pipe(pipe_fds) != 0)
        return 1;
    pthread_t t;
    for (int i = 0; i < WORKERS; i++)
        pthread_create(&t, NULL, busy, (void *)2);
    for (int i = 0; i < PARKERS; i++)
        pthread_create(&parker_threads[i], NULL, busy, NULL);
    pthread_create(&t, NULL, busy, (void *)1);
    printf("ready %d\n", (int)getpid());
    fflush(stdout);
    char line[256];
    while (fgets(line, sizeof line, stdin)) {
        if (strncmp(line, "park", 4) == 0) {
            atomic_store(&released, 0);
            for (int i = 0; i < PARKERS; i++)
                atomic_store(&wanted[i], 1);
            for (int i = 0; i < PARKERS; i++) {
                pthread_kill(parker_threads[i], SIGUSR1);
                while (!atomic_load(&parked[i]))
                    usleep(100);
            }
            printf("parked\n");
            fflush(stdout);
        } else if (strncmp(line, "release", 7) == 0) {
            atomic_store(&released, 1);
            for (int i = 0; i < PARKERS; i++)
                while (atomic_load(&parked[i]))
                    usleep(100);
            unsigned char c = (unsigned char)atomic_fetch_add(&written, 1);
            if (write(pipe_fds[1], &c, 1) != 1)
                atomic_fetch_add(&bad, 1);
            printf("released\n");
            fflush(stdout);
        } else if (strncmp(line, "report", 6) == 0) {
            /* Every byte written read first (at most 20 s). */
            for (int i = 0; i < 200000 && atomic_load(&reads) < atomic_load(&written); i++)
                usleep(100);
            report();
        } else if (strncmp(line, "quit", 4) == 0) {
            report();
            return 0;
        }
    }
    return 0;
}
