/* The emulated device's timeline (core/backend_emu.h): operations queued per
 * stream, served by the device's engines (one kernel at a time; one copy at a time
 * over the host link in each direction), and placed again whenever one is issued.
 *
 * The rule. A stream runs its operations in issue order; an operation is ready at
 * the latest of its issue, the end of its stream's previous operation and, for a
 * stream's wait on an event, the end of the event's operation. An engine, when it
 * falls free (at each kernel boundary for the kernel engine), starts among the
 * streams' next operations for it the one ready longest (the earliest ready time;
 * ties by issue order): a kernel that another stream issues during a queued
 * backward runs at the next kernel boundary, and two streams with work queued
 * alternate kernel by kernel, as a GPU's streams share its SMs over time.
 *
 * An operation whose start the clock has passed is fixed (the device does not
 * preempt); the others may move later when another stream's operation is issued
 * before them, so that an end read before it is only an estimate: waits read it
 * again when they wake. Internal to the emulated backend; not thread-safe (the
 * backend holds its lock around every call). */
#ifndef BP_CORE_BACKEND_EMU_TIMELINE_H
#define BP_CORE_BACKEND_EMU_TIMELINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/backend.h"

enum { BP_EMU_KERNEL, BP_EMU_TO_DEVICE, BP_EMU_TO_HOST, BP_EMU_ENGINES };
/* An operation of no engine and no duration: a stream's wait for an event. */
#define BP_EMU_WAIT BP_EMU_ENGINES

struct bp_dev_stream {
    double done;   /* the end of its last started operation (0: none) */
    uint64_t last; /* its last operation issued (0: none) */
    double at;     /* while placing: the end of its last operation placed */
    size_t next;   /* while placing: the index of its next operation to place */
};

typedef struct bp_emu_op bp_emu_op;

/* At most this many operations issued and not yet over: a host that issues more
 * waits, as a full launch queue blocks a GPU's host. */
#define BP_EMU_QUEUE 1024

typedef struct bp_emu_timeline {
    bp_emu_op *ops; /* BP_EMU_QUEUE slots; ops[0..n) in issue order */
    size_t n;
    uint64_t seq;                   /* the last operation's number */
    double engine[BP_EMU_ENGINES]; /* the end of each engine's last started operation */
} bp_emu_timeline;

bool bp_emu_tl_init(bp_emu_timeline *tl);
void bp_emu_tl_free(bp_emu_timeline *tl);

/* Fixes what started by `now` and forgets what ended by then. */
void bp_emu_tl_advance(bp_emu_timeline *tl, double now);
/* Whether another operation fits; if not, *until is when the first one ends. */
bool bp_emu_tl_room(const bp_emu_timeline *tl, double *until);
/* Issues at `now` (after bp_emu_tl_advance to it, with room) an operation of
 * `dur` seconds on `engine` and stream s, or a wait of s for operation `after`
 * (engine BP_EMU_WAIT, dur 0; after 0: for nothing); places every operation again
 * and returns its number. */
uint64_t bp_emu_tl_issue(bp_emu_timeline *tl, bp_dev_stream *s, int engine, double now, double dur,
                         uint64_t after);
/* The end of operation `op` as placed now; 0 when it ended before the last
 * advance (and was forgotten). */
double bp_emu_tl_end(const bp_emu_timeline *tl, uint64_t op);
/* The end of the last operation issued on s. */
double bp_emu_tl_stream_end(const bp_emu_timeline *tl, const bp_dev_stream *s);

#endif
