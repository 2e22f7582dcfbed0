/* fntrace.h — the in-process API of the fntrace runtime.
 *
 * Link with -lfntrace_runtime, or run under LD_PRELOAD=libfntrace_runtime.so
 * and declare these functions weak. An "ops" is a client (as the kernel's
 * struct ftrace_ops): callbacks, flags and a filter. While it is registered,
 * every site of every function its filter selects calls it.
 *
 * Callbacks get: ip — the return address of the site's call (the first
 * byte after an entry site; fntrace_lookup() names its function);
 * parent_ip — the traced function's return address; ops; regs — the
 * register frame, or NULL unless the ops has FNTRACE_OPS_FL_SAVE_REGS or
 * FNTRACE_OPS_FL_IPMODIFY. Unless FNTRACE_OPS_FL_RECURSION_SAFE is given,
 * a callback is not re-entered on the same thread and errno is preserved.
 */
#ifndef FNTRACE_H
#define FNTRACE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The register frame. Changing a field changes the register when the traced
 * code resumes. Changing ip at an entry site (FNTRACE_OPS_FL_IPMODIFY)
 * redirects the function: the code at ip runs instead, with the original
 * arguments, and returns to the original caller. */
#if defined(__aarch64__)
struct fntrace_regs {
    uint64_t x[31]; /* x0-x30 at the site; x[30] the function's return address;
                       x0-x15 are restored from here */
    uint64_t sp;    /* at the site (read only) */
    uint64_t ip;    /* where the traced code resumes */
    uint64_t pad;
};
#define FNTRACE_REGS_ARG0(regs) ((regs)->x[0])
#else
struct fntrace_regs {
    uint64_t r15, r14, r13, r12, rbp, rbx, r11, r10, r9, r8;
    uint64_t rax, rcx, rdx, rsi, rdi;
    uint64_t ip;    /* where the traced code resumes */
    uint64_t flags; /* at the site (not restored) */
    uint64_t sp;    /* after the site (read only) */
};
#define FNTRACE_REGS_ARG0(regs) ((regs)->rdi)
#endif

typedef struct fntrace_ops fntrace_ops;

typedef void (*fntrace_func_t)(uintptr_t ip, uintptr_t parent_ip, fntrace_ops *ops,
                               struct fntrace_regs *regs);

enum {
    FNTRACE_OPS_FL_SAVE_REGS = 1,      /* pass the register frame */
    FNTRACE_OPS_FL_IPMODIFY = 2,       /* may change regs->ip; one per function */
    FNTRACE_OPS_FL_RECURSION_SAFE = 4, /* call directly: no guard, no errno save */
};

/* A new ops (not registered; its filter selects every function). entry is
 * called at entry sites, exit at exit sites (XRay exit sleds, gcc
 * -minstrument-return); either may be NULL. Never freed. */
fntrace_ops *fntrace_ops_new(fntrace_func_t entry, fntrace_func_t exit, void *data, unsigned flags);

/* The data given to fntrace_ops_new. */
static inline void *fntrace_ops_data(const fntrace_ops *ops) { return *(void *const *)ops; }

/* Functions wanted (filter; NULL or "" for all) and never wanted (notrace),
 * as patterns of ftrace's set_ftrace_filter separated by spaces or commas:
 * "name", "glob*", "!name", "*:mod:libfoo". Applied at once if registered. */
int fntrace_ops_set_filter(fntrace_ops *ops, const char *filter, const char *notrace);

/* Start and stop calling the ops. When unregister returns, no site calls it
 * any more. Both return 0, or -1 with fntrace_last_error() set. */
int fntrace_ops_register(fntrace_ops *ops);
int fntrace_ops_unregister(fntrace_ops *ops);

/* The message of this thread's last error. */
const char *fntrace_last_error(void);

/* Every site that calls something, one per line (the kernel's
 * enabled_functions): "function (refs) module ops|list [R] kind address".
 * Writes at most len bytes (NUL-terminated) and returns the full length. */
size_t fntrace_enabled_functions(char *buf, size_t len);

/* The function name of a callback's ip, into buf; 0, or -1 if unknown. */
int fntrace_lookup(uintptr_t ip, char *buf, size_t len);

/* What the runtime did: modules with sites, sites found, converted to the
 * canonical NOP at load, already canonical, skipped; patch batches, sites
 * written, instruction-stream syncs, mprotect calls, sites refused, and
 * threads that met a site mid-patch and were steered past it; calls not
 * made because the thread was inside a callback already (a traced function
 * called from a callback, or from a signal handler that interrupted one). */
struct fntrace_stats {
    uint64_t modules, sites, converted, canonical, skipped;
    uint64_t batches, written, syncs, protects, refused, traps, recursions;
};
int fntrace_get_stats(struct fntrace_stats *out);

#ifdef __cplusplus
}
#endif

#endif
