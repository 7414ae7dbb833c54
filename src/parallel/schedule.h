/* Pipeline schedules (docs/algorithms.md#pipeline-schedules): the order in which a stage runs the
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
 * min(M, S - s + K) for afp:K.
 *
 * A stream of K steps without a flush between them (AvgPipe between two meeting
 * points, parallel/step.h): the K x N x M positions v = t N M + i N + j (step t,
 * pipeline j, micro-batch i) in one list, each stage going on with the rule above,
 * "forward while at most w positions are held, else backward", w of one step
 * (N M positions). Pipeline j's update U(t, j) at this stage comes right after its
 * last backward of step t, and step t+1's forwards of pipeline j wait for it and,
 * while backwards of step t remain, for s more of them (the first stage sends that
 * forward only after its own update, s stages of backwards away): so forwards of
 * step t+1 fill the drain of step t. The last step's updates are left to the caller
 * (they end the stream); K = 1 is the plain step. With a tied tensor the first and
 * last stages meet in each update (a collective), so the last stage delays U(t, j)
 * by S - 1 positions' backwards (at most to step t's last), about the time the
 * first stage needs to reach it, instead of waiting. Positions held stay
 * consecutive and at most w + 1 (bp_schedule_stream's peak). */
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
    bool forward; /* F, else B (or U) */
    int micro;    /* F, B: the position; U: t N + j */
    bool update;  /* U: pipeline j's update of step t */
} bp_pipe_op;

/* One stage's stream: K steps of N pipelines x M micro-batches. */
typedef struct bp_stream {
    int S, s;  /* stages, this stage */
    int N, M;  /* pipelines; micro-batches per pipeline and step */
    int stream_len; /* steps, the first stream_len - 1 with their updates inline */
    bool tied; /* the first and last stages sync a tied tensor in each update */
} bp_stream;

/* "gpipe", "1f1b" or "afp:K" (K >= 0); BP_EUSAGE naming --schedule otherwise. */
bp_status bp_schedule_parse(const char *text, bp_schedule *out, bp_err *err);
/* "gpipe", "1f1b", "afp:2" */
void bp_schedule_name(const bp_schedule *s, char *buf, size_t n);
/* Warm-up forwards of stage s of S with M micro-batches. */
int bp_schedule_warmup(const bp_schedule *sched, int S, int s, int M);
/* The 2M operations of stage s, in order, into ops[2M] (a stream of one step). */
void bp_schedule_ops(const bp_schedule *sched, int S, int s, int M, bp_pipe_op *ops);
/* The stream's operations in order into ops (NULL: not wanted): 2 K N M forwards
 * and backwards and (K - 1) N updates; returns their number, *peak the most
 * positions held at once. */
int bp_schedule_stream(const bp_schedule *sched, const bp_stream *st, bp_pipe_op *ops, int *peak);
/* Most micro-batches whose activations stage s holds at once. */
int bp_schedule_peak_stash(const bp_schedule *sched, int S, int s, int M);

#endif
