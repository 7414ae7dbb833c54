/* Pipeline schedules (DESIGN.md section 4): the order in which one stage runs the
 * forward (F) and backward (B) passes of the M micro-batches of an iteration.
 *
 * Every schedule here is "w warm-up forwards, then one forward and one backward in
 * turn, then the remaining backwards", with micro-batches in order 0..M-1 in both
 * directions; only w differs. For stage s of S:
 *   gpipe:  w = M                   (all forwards, then all backwards)
 *   1f1b:   w = min(M, S - s - 1)
 *   afp:K:  w = min(M, S - s - 1 + K)  (advance forward propagation; K=0 is 1f1b,
 *                                       K=M is gpipe)
 * A stage holds the activations of every micro-batch between its F and its B, so
 * the most it holds at once is min(M, w + 1): M for gpipe, S - s for 1f1b,
 * min(M, S - s + K) for afp:K. */
#ifndef BP_PARALLEL_SCHEDULE_H
#define BP_PARALLEL_SCHEDULE_H

#include <stdbool.h>
#include <stddef.h>

#include "bagpipe/status.h"

typedef enum bp_sched_kind { BP_SCHED_GPIPE, BP_SCHED_1F1B, BP_SCHED_AFP } bp_sched_kind;

typedef struct bp_schedule {
    bp_sched_kind kind;
    int k; /* afp: advance */
} bp_schedule;

typedef struct bp_pipe_op {
    bool forward;
    int micro;
} bp_pipe_op;

/* "gpipe", "1f1b" or "afp:K" (K >= 0); BP_EUSAGE naming --schedule otherwise. */
bp_status bp_schedule_parse(const char *text, bp_schedule *out, bp_err *err);
/* "gpipe", "1f1b", "afp:2" */
void bp_schedule_name(const bp_schedule *s, char *buf, size_t n);
/* Warm-up forwards of stage s of S with M micro-batches. */
int bp_schedule_warmup(const bp_schedule *sched, int S, int s, int M);
/* The 2M operations of stage s, in order, into ops[2M]. */
void bp_schedule_ops(const bp_schedule *sched, int S, int s, int M, bp_pipe_op *ops);
/* Most micro-batches whose activations stage s holds at once. */
int bp_schedule_peak_stash(const bp_schedule *sched, int S, int s, int M);

#endif
