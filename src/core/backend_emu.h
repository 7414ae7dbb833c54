/* The emulated backend: a GPU of a data sheet (core/devsheet.h) that computes
 * nothing but takes the time the GPU would take. Its memory is address space the
 * host never touches (reserved, inaccessible, no pages behind it), counted against
 * the GPU's capacity; its operations run on an emulated device timeline:
 *
 *  - each stream runs its operations in issue order, each lasting its modeled
 *    duration;
 *  - the device runs one kernel at a time, whichever stream or thread issued it;
 *    copies over the host link use the link's copy engine of their direction
 *    instead, so they overlap kernels;
 *  - streams interleave: when the device finishes a kernel it starts, of the
 *    streams' next kernels, the one ready longest (ready: issued, and its stream's
 *    previous work done; ties by issue order), so a kernel that the communication
 *    thread issues during a queued backward runs at the next kernel boundary, not
 *    after the backward (core/backend_emu_timeline.h);
 *  - the host returns at once from a kernel; it waits (sleeping) for what it must
 *    see: event_sync, to_host and to_device (both wait for their copy, as the cuda
 *    backend's do), and the results of all_finite, sumsq and zero_nonfinite; a wait
 *    reads the end again when it wakes, since work issued meanwhile on another
 *    stream may have moved it, and drives the progress hook meanwhile
 *    (bp_backend_emu_set_progress), as a GPU's host thread stays free to;
 *  - each thread's default stream (stream NULL) is its own, as with CUDA's
 *    per-thread default streams: the communication thread's copies wait for the
 *    kernels it issued, not for the step's later ones.
 *
 * Values are not computed: all_finite is true, sumsq 0, to_host writes zeros. Every
 * modeled duration lasts `dilation` times longer on the host's clock; emulated time
 * is the clock's time divided by it. */
#ifndef BP_CORE_BACKEND_EMU_H
#define BP_CORE_BACKEND_EMU_H

#include <stdint.h>

#include "core/backend.h"
#include "core/devsheet.h"

/* The clock the timeline runs on: the monotonic clock and real sleeps unless a test
 * gives a virtual one. Times in seconds. */
typedef struct bp_emu_clock {
    double (*now)(void *ctx);
    void (*sleep_until)(void *ctx, double t);
    void *ctx;
} bp_emu_clock;

typedef struct bp_emu_config {
    const bp_device_sheet *sheet;
    bp_device_rate rate;
    double dilation;    /* >= 1 */
    bp_emu_clock clock; /* now == NULL: bp_now and bp_sleep_until */
} bp_emu_config;

bp_status bp_backend_emu_create(const bp_emu_config *c, bp_backend **out, bp_err *err);
void bp_backend_emu_destroy(bp_backend *be);
/* What a thread does while it waits on the device. An emulated wait lasts the
 * device's time on the host's clock, and messages the rank has in flight may move
 * only while it calls its communication library (comm/: bp_comm_progress), which
 * lives above this layer and hands this down: fn(ctx) runs when a wait begins and
 * every `every_s` (> 0, the host's clock) until it ends or fn returns false (no
 * message in flight: the wait sleeps to its end). fn NULL: none (the default). */
typedef struct bp_emu_progress {
    bool (*fn)(void *ctx);
    void *ctx;
    double every_s;
} bp_emu_progress;
/* Set before the threads that wait on be start; the hook outlives be's waits. */
void bp_backend_emu_set_progress(const bp_backend *be, const bp_emu_progress *p);

/* Whether be is an emulated backend. */
bool bp_backend_is_emu(const bp_backend *be);
const bp_emu_config *bp_backend_emu_config(const bp_backend *be);

/* A kernel of `seconds` (modeled, before dilation) on stream s (NULL: the calling
 * thread's default stream): what the models' device operations issue. Returns the
 * kernel's number, for bp_backend_emu_sync. */
uint64_t bp_backend_emu_kernel(const bp_backend *be, bp_dev_stream *s, double seconds);
/* The host waits (sleeps) until the kernel numbered `op` has run. */
void bp_backend_emu_sync(const bp_backend *be, uint64_t op);
/* The end on the clock of the work issued so far on s (NULL: the calling thread's
 * default stream), as the timeline stands now. */
double bp_backend_emu_busy(const bp_backend *be, bp_dev_stream *s);
/* Modeled seconds (before dilation) of every kernel and copy issued so far: what
 * the device was busy with, however the host kept it fed. */
double bp_backend_emu_work_s(const bp_backend *be);
/* Bytes allocated now, and the most at any time. */
size_t bp_backend_emu_used(const bp_backend *be, size_t *peak);

#endif
