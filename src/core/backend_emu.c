/* The emulated backend (backend_emu.h): a timeline of busy-until times, memory that
 * is only address space, and no arithmetic. */
#include "core/backend_emu.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/backend_emu_timeline.h"
#include "core/timer.h"

struct bp_dev_event {
    uint64_t op; /* the operation it completes with (0: none) */
};

typedef struct region {
    unsigned char *base;
    size_t bytes; /* mapped, page-rounded */
    struct region *next;
} region;

enum { MAX_THREADS = 64 };

typedef struct emu {
    bp_backend table; /* first: the table's address is the instance's */
    bp_emu_config cfg;
    pthread_mutex_t lock;
    region *regions;
    size_t used, peak, capacity;
    bp_emu_timeline tl;
    double work_s; /* modeled seconds issued (bp_backend_emu_work_s) */
    int n_threads;       /* threads with a default stream of their own */
    pthread_t thread[MAX_THREADS];
    bp_dev_stream own[MAX_THREADS];
    bp_emu_progress progress;
} emu;

static emu *self(const bp_backend *be) { return (emu *)be->ctx; }

static double real_now(void *ctx) {
    (void)ctx;
    return bp_now();
}
static void real_sleep(void *ctx, double t) {
    (void)ctx;
    bp_sleep_until(t);
}

static double now(const emu *b) { return b->cfg.clock.now(b->cfg.clock.ctx); }

/* Sleeps until t on the clock, running the progress hook when it begins and every
 * every_s until then while it has messages in flight, which move on meanwhile. */
static void wait_until(emu *b, double t) {
    pthread_mutex_lock(&b->lock);
    bp_emu_progress p = b->progress;
    pthread_mutex_unlock(&b->lock);
    if (!p.fn) {
        b->cfg.clock.sleep_until(b->cfg.clock.ctx, t);
        return;
    }
    for (double at = now(b); at < t; at = now(b)) {
        bool more = p.fn(p.ctx);
        b->cfg.clock.sleep_until(b->cfg.clock.ctx, more && at + p.every_s < t ? at + p.every_s : t);
    }
}

void bp_backend_emu_set_progress(const bp_backend *be, const bp_emu_progress *p) {
    emu *b = self(be);
    pthread_mutex_lock(&b->lock);
    b->progress = p && p->fn && p->every_s > 0 ? *p : (bp_emu_progress){0};
    pthread_mutex_unlock(&b->lock);
}

/* The calling thread's default stream (under the lock); threads beyond MAX_THREADS
 * share the last. */
static bp_dev_stream *stream_of(emu *b, bp_dev_stream *s) {
    if (s) return s;
    pthread_t me = pthread_self();
    for (int i = 0; i < b->n_threads; i++)
        if (pthread_equal(b->thread[i], me)) return &b->own[i];
    if (b->n_threads == MAX_THREADS) return &b->own[MAX_THREADS - 1];
    b->thread[b->n_threads] = me;
    b->own[b->n_threads] = (bp_dev_stream){0};
    return &b->own[b->n_threads++];
}

/* ---- the timeline ---- */

/* Issues an operation of `seconds` (modeled) on `engine` and stream s, or s's wait
 * for operation `after`; waits first while the launch queue is full. */
static uint64_t issue(const bp_backend *be, bp_dev_stream *s, int engine, double seconds,
                      uint64_t after) {
    emu *b = self(be);
    double t, until;
    for (;;) {
        pthread_mutex_lock(&b->lock);
        bp_emu_tl_advance(&b->tl, t = now(b));
        if (bp_emu_tl_room(&b->tl, &until)) break;
        pthread_mutex_unlock(&b->lock);
        wait_until(b, until);
    }
    uint64_t op =
        bp_emu_tl_issue(&b->tl, stream_of(b, s), engine, t, seconds * b->cfg.dilation, after);
    b->work_s += seconds;
    pthread_mutex_unlock(&b->lock);
    return op;
}

uint64_t bp_backend_emu_kernel(const bp_backend *be, bp_dev_stream *s, double seconds) {
    return issue(be, s, BP_EMU_KERNEL, seconds, 0);
}

/* Sleeps until the end of op as placed when it wakes: an operation issued meanwhile
 * on another stream may have moved it. */
void bp_backend_emu_sync(const bp_backend *be, uint64_t op) {
    emu *b = self(be);
    for (;;) {
        pthread_mutex_lock(&b->lock);
        double t = now(b);
        bp_emu_tl_advance(&b->tl, t);
        double end = bp_emu_tl_end(&b->tl, op);
        pthread_mutex_unlock(&b->lock);
        if (end <= t) return;
        wait_until(b, end);
    }
}

double bp_backend_emu_busy(const bp_backend *be, bp_dev_stream *s) {
    emu *b = self(be);
    pthread_mutex_lock(&b->lock);
    double t = bp_emu_tl_stream_end(&b->tl, stream_of(b, s));
    pthread_mutex_unlock(&b->lock);
    return t;
}

/* A memory-bound kernel over `bytes`. */
static uint64_t pass(const bp_backend *be, double bytes) {
    return bp_backend_emu_kernel(be, NULL, bp_device_op_s(&self(be)->cfg.rate, 0, bytes));
}

/* A pass over n floats touching `per` floats per element, whose result the host
 * waits for. */
static void pass_wait(const bp_backend *be, size_t n, double per) {
    bp_backend_emu_sync(be, pass(be, (double)n * per * sizeof(float)));
}

/* A copy over the host link on the engine of its direction, which the host waits
 * for. */
static void host_copy(const bp_backend *be, int engine, size_t bytes) {
    const bp_emu_config *c = &self(be)->cfg;
    double s = c->rate.launch_s + (double)bytes / c->sheet->host_Bps;
    bp_backend_emu_sync(be, issue(be, NULL, engine, s, 0));
}

/* ---- memory ---- */

static region *find(const emu *b, const void *p) {
    for (region *r = b->regions; r; r = r->next)
        if ((const unsigned char *)p >= r->base && (const unsigned char *)p < r->base + r->bytes)
            return r;
    return NULL;
}

#define GIB(x) ((double)(x) / 1073741824.0)

/* Address space only: inaccessible, never backed, so any host access faults and
 * the process's resident memory does not grow with the model. */
static bp_status emu_alloc(const bp_backend *be, void **out, size_t bytes, const char *what,
                           bp_err *err) {
    emu *b = self(be);
    size_t page = (size_t)sysconf(_SC_PAGESIZE), len = (bytes + page - 1) / page * page;
    *out = NULL;
    pthread_mutex_lock(&b->lock);
    size_t need = b->used + bytes;
    pthread_mutex_unlock(&b->lock);
    if (need > b->capacity)
        return bp_fail(err, BP_ENOMEM,
                       "emulated %s: out of memory allocating %s: needs at least %.2f GiB, the "
                       "device has %.2f GiB",
                       b->cfg.sheet->title, what, GIB(need), GIB(b->capacity));
    region *r = calloc(1, sizeof *r);
    void *p = r && len ? mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                              -1, 0)
                       : MAP_FAILED;
    if (p == MAP_FAILED) {
        free(r);
        return bp_fail(err, BP_ENOMEM, "emulated %s: cannot reserve %zu bytes for %s",
                       b->cfg.sheet->title, bytes, what);
    }
    *r = (region){.base = p, .bytes = len};
    pthread_mutex_lock(&b->lock);
    r->next = b->regions;
    b->regions = r;
    b->used += bytes;
    if (b->used > b->peak) b->peak = b->used;
    pthread_mutex_unlock(&b->lock);
    *out = p;
    return BP_OK;
}

static void emu_free(const bp_backend *be, void *p) {
    emu *b = self(be);
    if (!p) return;
    pthread_mutex_lock(&b->lock);
    region **at = &b->regions;
    while (*at && (*at)->base != p) at = &(*at)->next;
    region *r = *at;
    if (r) {
        *at = r->next;
        b->used -= b->used < r->bytes ? b->used : r->bytes;
    }
    pthread_mutex_unlock(&b->lock);
    if (!r) return;
    munmap(r->base, r->bytes);
    free(r);
}

double bp_backend_emu_work_s(const bp_backend *be) {
    emu *b = self(be);
    pthread_mutex_lock(&b->lock);
    double s = b->work_s;
    pthread_mutex_unlock(&b->lock);
    return s;
}

size_t bp_backend_emu_used(const bp_backend *be, size_t *peak) {
    emu *b = self(be);
    pthread_mutex_lock(&b->lock);
    size_t used = b->used;
    if (peak) *peak = b->peak;
    pthread_mutex_unlock(&b->lock);
    return used;
}

static bool emu_owns(const bp_backend *be, const void *p) {
    emu *b = self(be);
    pthread_mutex_lock(&b->lock);
    bool r = find(b, p) != NULL;
    pthread_mutex_unlock(&b->lock);
    return r;
}

/* Host memory is the host's, as on the cpu backend. */
static bp_status emu_host_alloc(const bp_backend *be, void **out, size_t bytes, const char *what,
                                bp_err *err) {
    (void)be;
    return bp_backend_cpu()->host_alloc(bp_backend_cpu(), out, bytes, what, err);
}

static void emu_host_free(const bp_backend *be, void *p) {
    (void)be;
    bp_backend_cpu()->host_free(bp_backend_cpu(), p);
}

static void emu_to_device(const bp_backend *be, void *dst, const void *src, size_t bytes) {
    (void)dst, (void)src;
    host_copy(be, BP_EMU_TO_DEVICE, bytes);
}

/* Zeros: deterministic and finite wherever the host reads them (codecs, messages). */
static void emu_to_host(const bp_backend *be, void *dst, const void *src, size_t bytes) {
    (void)src;
    host_copy(be, BP_EMU_TO_HOST, bytes);
    memset(dst, 0, bytes);
}

static void emu_copy(const bp_backend *be, void *dst, const void *src, size_t bytes) {
    (void)dst, (void)src;
    pass(be, 2.0 * (double)bytes);
}

/* ---- the step's vector operations ---- */

static bool emu_all_finite(const bp_backend *be, const float *x, size_t n) {
    (void)x;
    pass_wait(be, n, 1);
    return true;
}

static double emu_sumsq(const bp_backend *be, const float *x, size_t n) {
    (void)x;
    pass_wait(be, n, 1);
    return 0;
}

static void emu_scale(const bp_backend *be, float *x, size_t n, float a) {
    (void)x, (void)a;
    pass(be, 2.0 * (double)n * sizeof(float));
}

static void emu_axpy(const bp_backend *be, float *y, size_t n, float a, const float *x) {
    (void)y, (void)a, (void)x;
    pass(be, 3.0 * (double)n * sizeof(float));
}

static void emu_fill(const bp_backend *be, float *x, size_t n, float v) {
    (void)x, (void)v;
    pass(be, (double)n * sizeof(float));
}

static bool emu_zero_nonfinite(const bp_backend *be, float *x, size_t n) {
    (void)x;
    pass_wait(be, n, 2);
    return false;
}

static void emu_elastic_pull(const bp_backend *be, float *w, const float *c, float *diff, size_t n,
                             float alpha, bool accumulate) {
    (void)w, (void)c, (void)diff, (void)alpha;
    pass(be, (accumulate ? 5.0 : 4.0) * (double)n * sizeof(float));
}

/* Global weights, momentum and average in, both out, and the weights (read too
 * when mixed) out. */
static void emu_outer_step(const bp_backend *be, float *g, float *m, const float *d, float *w,
                           size_t n, float lr, float mu, float mix) {
    (void)g, (void)m, (void)d, (void)w, (void)lr, (void)mu;
    pass(be, (mix == 0.0f ? 6.0 : 7.0) * (double)n * sizeof(float));
}

/* A codec's result is sent next: the host waits for it. */
static void emu_codec_pass(const bp_backend *be, double flops, double bytes) {
    bp_backend_emu_sync(be, bp_backend_emu_kernel(be, NULL,
                                                  bp_device_op_s(&self(be)->cfg.rate, flops, bytes)));
}

/* Floats read and written per element: weight, gradient and state in, weight and
 * state out (the momentum alone for BP_UPDATE_MOMENTUM). */
static void emu_update(const bp_backend *be, const bp_update_args *a, float *params,
                       const float *grads, float *m, float *v, size_t off, size_t len) {
    (void)params, (void)grads, (void)m, (void)off;
    double per = a->kind == BP_UPDATE_MOMENTUM ? 3 : v ? 7 : 5;
    pass(be, per * (double)len * sizeof(float));
}

/* ---- streams and events ---- */

static bp_status emu_stream_create(const bp_backend *be, bp_dev_stream **out, bp_err *err) {
    (void)be;
    *out = calloc(1, sizeof **out);
    return *out ? BP_OK : bp_fail(err, BP_ENOMEM, "emulated device: cannot allocate a stream");
}
/* Once its work is over: no operation on the timeline refers to it then. */
static void emu_stream_destroy(const bp_backend *be, bp_dev_stream *s) {
    if (!s) return;
    bp_backend_emu_sync(be, s->last);
    free(s);
}
static bp_status emu_event_create(const bp_backend *be, bp_dev_event **out, bp_err *err) {
    (void)be;
    *out = calloc(1, sizeof **out);
    return *out ? BP_OK : bp_fail(err, BP_ENOMEM, "emulated device: cannot allocate an event");
}
static void emu_event_destroy(const bp_backend *be, bp_dev_event *e) {
    (void)be;
    free(e);
}
static bp_status emu_event_record(const bp_backend *be, bp_dev_event *e, bp_dev_stream *s,
                                  bp_err *err) {
    (void)err;
    emu *b = self(be);
    pthread_mutex_lock(&b->lock);
    e->op = stream_of(b, s)->last;
    pthread_mutex_unlock(&b->lock);
    return BP_OK;
}
static bp_status emu_stream_wait(const bp_backend *be, bp_dev_stream *s, bp_dev_event *e,
                                 bp_err *err) {
    (void)err;
    issue(be, s, BP_EMU_WAIT, 0, e->op);
    return BP_OK;
}
static bp_status emu_event_sync(const bp_backend *be, bp_dev_event *e, bp_err *err) {
    (void)err;
    bp_backend_emu_sync(be, e->op);
    return BP_OK;
}

static const bp_backend emu_table = {
    .name = "emu",
    .host_memory = false,
    .alloc = emu_alloc,
    .free = emu_free,
    .host_alloc = emu_host_alloc,
    .host_free = emu_host_free,
    .to_device = emu_to_device,
    .to_host = emu_to_host,
    .copy = emu_copy,
    .owns = emu_owns,
    .host_begin = NULL, /* nothing of the host reaches its memory: models run emu ops */
    .host_end = NULL,
    .all_finite = emu_all_finite,
    .sumsq = emu_sumsq,
    .scale = emu_scale,
    .axpy = emu_axpy,
    .fill = emu_fill,
    .zero_nonfinite = emu_zero_nonfinite,
    .elastic_pull = emu_elastic_pull,
    .outer_step = emu_outer_step,
    .codec_pass = emu_codec_pass,
    .update = emu_update,
    .stream_create = emu_stream_create,
    .stream_destroy = emu_stream_destroy,
    .event_create = emu_event_create,
    .event_destroy = emu_event_destroy,
    .event_record = emu_event_record,
    .stream_wait = emu_stream_wait,
    .event_sync = emu_event_sync,
};

bp_status bp_backend_emu_create(const bp_emu_config *c, bp_backend **out, bp_err *err) {
    *out = NULL;
    if (!c->sheet || !(c->dilation >= 1))
        return bp_fail(err, BP_EUSAGE, "emulated device: a data sheet and a dilation >= 1");
    emu *b = calloc(1, sizeof *b);
    if (b && !bp_emu_tl_init(&b->tl)) {
        free(b);
        b = NULL;
    }
    if (!b) return bp_fail(err, BP_ENOMEM, "emulated device: cannot allocate the backend");
    b->table = emu_table;
    b->table.ctx = b;
    b->cfg = *c;
    if (!b->cfg.clock.now) b->cfg.clock = (bp_emu_clock){real_now, real_sleep, NULL};
    b->capacity = (size_t)c->sheet->mem_bytes;
    pthread_mutex_init(&b->lock, NULL);
    *out = &b->table;
    return BP_OK;
}

void bp_backend_emu_destroy(bp_backend *be) {
    if (!be) return;
    emu *b = self(be);
    while (b->regions) emu_free(be, b->regions->base);
    bp_emu_tl_free(&b->tl);
    pthread_mutex_destroy(&b->lock);
    free(b);
}

bool bp_backend_is_emu(const bp_backend *be) { return be && be->alloc == emu_alloc; }

const bp_emu_config *bp_backend_emu_config(const bp_backend *be) { return &self(be)->cfg; }
