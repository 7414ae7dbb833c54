/* Monotonic time. */
#ifndef BP_CORE_TIMER_H
#define BP_CORE_TIMER_H

/* Seconds on the monotonic clock (CLOCK_MONOTONIC); only differences mean anything. */
double bp_now(void);

/* Sleep until the monotonic clock reads `deadline` (seconds, as bp_now); returns at
 * once when it is already past. */
void bp_sleep_until(double deadline);

#endif
