/* A wall clock shifted by CLOCK_SHIFT_SECONDS for one process tree (tests only): preloaded into
 * a test host's Ray (LD_PRELOAD), its workers read CLOCK_REALTIME that many seconds off, as on a
 * node whose NTP is not running. Monotonic clocks and sleeps stay untouched. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <time.h>

int clock_gettime(clockid_t id, struct timespec *ts) {
    static int (*real)(clockid_t, struct timespec *);
    if (!real)
        real = (int (*)(clockid_t, struct timespec *))dlsym(RTLD_NEXT, "clock_gettime");
    int rc = real(id, ts);
    const char *shift = getenv("CLOCK_SHIFT_SECONDS");
    if (rc == 0 && shift && (id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE))
        ts->tv_sec += atol(shift);
    return rc;
}
