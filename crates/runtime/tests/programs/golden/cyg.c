/* The truth of the golden tests: a shared library, built WITHOUT
 * instrumentation, that the -finstrument-functions builds link against.
 * Every __cyg_profile_func_enter/exit appends one line to the file of its
 * process image and thread, written at once with write(2) (O_APPEND), so
 * nothing is lost at exit(), pthread_exit(), fork() or exec():
 *
 *   $CYG_DIR/<pid>.<n>.image   the image: exe path, ppid, start (Unix ns)
 *   $CYG_DIR/<pid>.<n>.t<tid>  "E MODULE OFFSET" / "X MODULE OFFSET"
 *
 * <n> counts the images of one pid (0, then 1, 2, ... after each exec).
 * MODULE is "exe" for the executable, else the library's file name; OFFSET
 * (hex) is the function's address minus the module's load bias, i.e. its
 * address in the file, which `nm` names. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define NOI __attribute__((no_instrument_function))

static char image[4096];
static __thread int t_fd = -1;
static __thread pid_t t_pid;

/* Claims the first free image number of this pid. */
NOI static void new_image(void) {
    const char *dir = getenv("CYG_DIR");
    image[0] = 0;
    if (!dir)
        return;
    pid_t pid = getpid();
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = 0;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    for (int i = 0; i < 1000; i++) {
        char marker[4200];
        snprintf(marker, sizeof marker, "%s/%d.%d.image", dir, (int)pid, i);
        int fd = open(marker, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd < 0) {
            if (errno == EEXIST)
                continue;
            return;
        }
        dprintf(fd, "%s\n%d\n%lld\n", exe, (int)getppid(),
                (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec);
        close(fd);
        snprintf(image, sizeof image, "%s/%d.%d", dir, (int)pid, i);
        return;
    }
}

NOI __attribute__((constructor)) static void on_load(void) {
    new_image();
    pthread_atfork(NULL, NULL, new_image);
}

NOI static void log_call(char kind, void *fn) {
    if (!image[0])
        return;
    int saved = errno;
    pid_t pid = getpid();
    if (t_fd < 0 || t_pid != pid) {
        if (t_fd >= 0)
            close(t_fd); /* the parent's, inherited by fork */
        char path[4200];
        snprintf(path, sizeof path, "%s.t%ld", image, (long)syscall(SYS_gettid));
        t_fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        t_pid = pid;
    }
    Dl_info info;
    struct link_map *map = NULL;
    const char *module = "?";
    uintptr_t offset = (uintptr_t)fn;
    if (dladdr1(fn, &info, (void **)&map, RTLD_DL_LINKMAP) && map) {
        offset -= map->l_addr;
        if (map->l_name && map->l_name[0]) {
            const char *slash = strrchr(map->l_name, '/');
            module = slash ? slash + 1 : map->l_name;
        } else {
            module = "exe";
        }
    }
    char line[600];
    int len = snprintf(line, sizeof line, "%c %s %lx\n", kind, module, (unsigned long)offset);
    if (t_fd >= 0 && write(t_fd, line, len) != len)
        abort();
    errno = saved;
}

NOI void __cyg_profile_func_enter(void *fn, void *site) {
    (void)site;
    log_call('E', fn);
}

NOI void __cyg_profile_func_exit(void *fn, void *site) {
    (void)site;
    log_call('X', fn);
}
