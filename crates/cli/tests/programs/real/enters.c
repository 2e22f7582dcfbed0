/* The hooks of a -finstrument-functions build, for the tests only: every
 * function entry of the program is logged, per thread, as its offset from
 * the start of the executable (__executable_start: the hooks are linked
 * into the program), 8 bytes little-endian, in DIR/enters.TID, where DIR
 * is $FNTRACE_ENTERS (nothing is logged without it). A thread's log is
 * kept in memory and written when its buffer fills, when the thread ends
 * and when the process exits (for every thread still running then: the
 * program's threads are all joined or idle by then in the programs we
 * test). Exits are not logged: the tests count entries.
 *
 * Built without -finstrument-functions; every function here is also
 * marked no_instrument_function so that it can be compiled with the
 * program's flags. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define HOOK __attribute__((no_instrument_function))
#define ENTRIES 65536

extern char __executable_start[];

struct log {
    int fd;
    size_t used;
    struct log *next;
    uint64_t entries[ENTRIES];
};

static pthread_mutex_t logs_lock = PTHREAD_MUTEX_INITIALIZER;
static struct log *logs;
static pthread_key_t key;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static const char *dir;
static __thread struct log *mine;
static __thread int busy;

HOOK static void flush(struct log *log) {
    const char *p = (const char *)log->entries;
    size_t left = log->used * sizeof log->entries[0];
    while (left > 0) {
        ssize_t n = write(log->fd, p, left);
        if (n <= 0) {
            abort();
        }
        p += n;
        left -= (size_t)n;
    }
    log->used = 0;
}

HOOK static void thread_ended(void *arg) {
    struct log *log = arg;
    pthread_mutex_lock(&logs_lock);
    flush(log);
    pthread_mutex_unlock(&logs_lock);
}

HOOK static void setup(void) {
    dir = getenv("FNTRACE_ENTERS");
    if (pthread_key_create(&key, thread_ended) != 0) {
        abort();
    }
}

HOOK static struct log *open_log(void) {
    char path[4096];
    snprintf(path, sizeof path, "%s/enters.%ld", dir, (long)syscall(SYS_gettid));
    struct log *log = malloc(sizeof *log);
    if (log == NULL) {
        abort();
    }
    log->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (log->fd < 0) {
        abort();
    }
    log->used = 0;
    pthread_mutex_lock(&logs_lock);
    log->next = logs;
    logs = log;
    pthread_mutex_unlock(&logs_lock);
    pthread_setspecific(key, log);
    return log;
}

HOOK void __cyg_profile_func_enter(void *fn, void *site) {
    (void)site;
    if (busy) {
        return; /* a function the hook's own calls reached */
    }
    busy = 1;
    pthread_once(&once, setup);
    if (dir != NULL) {
        if (mine == NULL) {
            mine = open_log();
        }
        mine->entries[mine->used++] = (uint64_t)((char *)fn - __executable_start);
        if (mine->used == ENTRIES) {
            flush(mine);
        }
    }
    busy = 0;
}

HOOK void __cyg_profile_func_exit(void *fn, void *site) {
    (void)fn;
    (void)site;
}

/* At exit: what every thread still has in memory. */
HOOK __attribute__((destructor)) static void process_ended(void) {
    pthread_mutex_lock(&logs_lock);
    for (struct log *log = logs; log != NULL; log = log->next) {
        flush(log);
    }
    pthread_mutex_unlock(&logs_lock);
}
