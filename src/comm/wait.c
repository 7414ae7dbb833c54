/* Timed waits on the monotonic clock (the clock of bp_now), for the watchdog and
 * the averaging thread: a condition variable's default clock is the wall clock,
 * which jumps when the system time is set. */
#include <time.h>

#include "comm/internal.h"

void bpc_cond_init_monotonic(pthread_cond_t *cv) {
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(cv, &attr);
    pthread_condattr_destroy(&attr);
}

bool bpc_cond_wait_until(pthread_cond_t *cv, pthread_mutex_t *mu, double until) {
    struct timespec ts;
    ts.tv_sec = (time_t)until;
    ts.tv_nsec = (long)((until - (double)ts.tv_sec) * 1e9);
    if (ts.tv_nsec >= 1000000000L) ts.tv_nsec = 999999999L;
    return pthread_cond_timedwait(cv, mu, &ts) == 0;
}
