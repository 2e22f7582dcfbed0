/* Linked into the XRay builds only. XRay's FDR mode is selected by
 * XRAY_OPTIONS but must be initialised by the program
 * (`__xray_log_init_mode`) and finalized and flushed at the end, or it
 * writes nothing: bench_start() does the first when BENCH_XRAY_FDR is set
 * (its value is the FDR configuration), a destructor the second. The
 * functions are declared here because their header is C++. */
#include <stdio.h>
#include <stdlib.h>

int __xray_log_init_mode(const char *mode, const char *config);
int __xray_log_finalize(void);
int __xray_log_flushLog(void);

enum { XRAY_LOG_INITIALIZED = 2 };

__attribute__((xray_never_instrument)) void bench_start(void) {
    const char *config = getenv("BENCH_XRAY_FDR");
    if (config && __xray_log_init_mode("xray-fdr", config) != XRAY_LOG_INITIALIZED) {
        fprintf(stderr, "xray-flush: FDR mode did not initialise\n");
        exit(3);
    }
}

__attribute__((destructor, xray_never_instrument)) static void xray_flush_at_exit(void) {
    if (getenv("BENCH_XRAY_FDR")) {
        __xray_log_finalize();
        __xray_log_flushLog();
    }
}
