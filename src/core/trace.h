/* A trace of what one process did, as Chrome trace events (the JSON that Perfetto
 * and chrome://tracing open): complete events ("X") with a start and a duration in
 * microseconds on a thread of the process, and metadata events ("M") that name the
 * process and its threads.
 *
 * A bp_trace is a context object passed explicitly: the layers that record into it
 * get it from whoever set them up (comm/ from its group, bp_comm_set_trace), never
 * from a global. Appending is thread-safe (one mutex), so the communication
 * threads record on the same trace as the main thread; each thread gets its own
 * track (tid), numbered in the order the threads first record, and named by
 * bp_trace_thread. Memory is bounded: the events live in a ring of `cap` entries;
 * when it is full the oldest are dropped and counted (bp_trace_dropped).
 *
 * Every recording call is an inline NULL check in front of the real work, so that
 * code which records costs nothing when tracing is off. Names and categories must be
 * string literals (or strings from bp_trace_intern): events keep the pointer. */
#ifndef BP_CORE_TRACE_H
#define BP_CORE_TRACE_H

#include <stddef.h>
#include <stdint.h>

#include "bagpipe/status.h"
#include "core/timer.h"

typedef struct bp_trace bp_trace;

/* What an event carries besides its name and time; -1 or NULL: not shown. */
typedef struct bp_trace_args {
    int micro, pipeline;           /* pipeline work: micro-batch and AvgPipe pipeline */
    int peer;                      /* point-to-point: the other process (its world rank) */
    int64_t bytes_sent, bytes_recv; /* communication */
    const char *group;             /* communication: the group (its axis: the name's prefix) */
    const char *codec;             /* compression */
} bp_trace_args;

#define BP_TRACE_NO_ARGS \
    ((bp_trace_args){.micro = -1, .pipeline = -1, .peer = -1, .bytes_sent = -1, .bytes_recv = -1})

/* A trace of at most cap events (cap >= 1). The calling thread is track 0, "main".
 * Times are taken relative to bp_now() at creation (bp_trace_set_origin moves it). */
bp_status bp_trace_create(size_t cap, bp_trace **out, bp_err *err);
void bp_trace_destroy(bp_trace *t);

/* Times of events are microseconds since `origin` (seconds of bp_now()). Processes
 * that agree on an instant (leaving a barrier) and set it as origin share an axis. */
void bp_trace_set_origin(bp_trace *t, double origin);
/* Times of events recorded from now on are divided by k (>= 1): an emulated
 * device's dilation, so that the trace shows the device's time, not the host's. */
void bp_trace_set_dilation(bp_trace *t, double k);
/* The optimizer step that events recorded from now on belong to (shown as "step"). */
void bp_trace_set_step_(bp_trace *t, int64_t step);
/* Name the calling thread's track. */
void bp_trace_thread_(bp_trace *t, const char *name);
/* A copy of s owned by the trace, for names that do not live as long as it; s
 * itself when the trace is full of names (64) or out of memory. */
const char *bp_trace_intern(bp_trace *t, const char *s);
/* An event [t0, now) on the calling thread; t0 in seconds of bp_now(). */
void bp_trace_add_(bp_trace *t, const char *cat, const char *name, double t0,
                   const bp_trace_args *a);

static inline void bp_trace_set_step(bp_trace *t, int64_t step) {
    if (t) bp_trace_set_step_(t, step);
}
static inline void bp_trace_thread(bp_trace *t, const char *name) {
    if (t) bp_trace_thread_(t, name);
}
/* bp_now() when tracing, else 0: the start of a span that only the trace needs. */
static inline double bp_trace_clock(const bp_trace *t) { return t ? bp_now() : 0; }
/* A span of work without arguments. */
static inline void bp_trace_span(bp_trace *t, const char *cat, const char *name, double t0) {
    if (t) bp_trace_add_(t, cat, name, t0, &BP_TRACE_NO_ARGS);
}
/* Pipeline work on micro-batch `micro` of pipeline `pipeline`. */
static inline void bp_trace_micro(bp_trace *t, const char *name, double t0, int micro,
                                  int pipeline) {
    if (!t) return;
    bp_trace_args a = BP_TRACE_NO_ARGS;
    a.micro = micro;
    a.pipeline = pipeline;
    bp_trace_add_(t, "compute", name, t0, &a);
}
static inline void bp_trace_add(bp_trace *t, const char *cat, const char *name, double t0,
                                const bp_trace_args *a) {
    if (t) bp_trace_add_(t, cat, name, t0, a);
}

/* Events dropped because the ring was full. */
uint64_t bp_trace_dropped(bp_trace *t);
size_t bp_trace_cap(const bp_trace *t);

/* This process's events as trace-event JSON objects separated by ",\n" (no
 * enclosing array): first "M" events naming the process `pid` as `process_name`
 * and its threads, then the "X" events oldest first. *out is malloc'ed and
 * NUL-terminated; *n its length. */
bp_status bp_trace_format(bp_trace *t, int pid, const char *process_name, char **out, size_t *n,
                          bp_err *err);

#endif
