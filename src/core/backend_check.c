/* The checking backend: the cpu backend's kernels on pages that are PROT_NONE except
 * while one of the table's own calls runs on them. Any host access to its memory
 * from outside the table (a loop of the step over a weight or gradient buffer, a
 * memcpy, an MPI send of a device buffer) faults at once, so a test on this backend
 * proves that the step reaches device memory only through the table, as it must on
 * a GPU.
 *
 * Each allocation is its own mapping with an open count: a call opens (read and
 * write) every allocation it touches and closes it after, so calls of several
 * threads on one buffer (the communication thread and the step) nest correctly.
 * While a call holds a buffer open, other threads could touch it unnoticed; the
 * check catches what it sees, it does not prove absence.
 *
 * A pointer that is not inside one of its allocations is a bug of the caller (host
 * memory given where device memory is expected): the backend says so on stderr and
 * aborts, which is its whole purpose. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/backend.h"

typedef struct mapping {
    unsigned char *base;
    size_t bytes; /* mapped, a multiple of the page size */
    int open;     /* calls holding it readable and writable */
    struct mapping *next;
} mapping;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static mapping *mappings; /* the backend's own record of its allocations */

static mapping *find(const void *p) {
    for (mapping *m = mappings; m; m = m->next)
        if ((const unsigned char *)p >= m->base && (const unsigned char *)p < m->base + m->bytes)
            return m;
    return NULL;
}

static void die(const char *what, const void *p) {
    fprintf(stderr, "check backend: %s %p is not memory of the check backend\n", what, p);
    abort();
}

static void protect(mapping *m, int prot) {
    if (mprotect(m->base, m->bytes, prot) != 0) die("mprotect of", m->base);
}

/* Open the allocation holding p for one call (n == 0: nothing is touched). */
static mapping *open_buf(const void *p, size_t n) {
    if (n == 0) return NULL;
    pthread_mutex_lock(&lock);
    mapping *m = find(p);
    if (!m) die("pointer", p);
    if (m->open++ == 0) protect(m, PROT_READ | PROT_WRITE);
    pthread_mutex_unlock(&lock);
    return m;
}

static void close_buf(mapping *m) {
    if (!m) return;
    pthread_mutex_lock(&lock);
    if (--m->open == 0) protect(m, PROT_NONE);
    pthread_mutex_unlock(&lock);
}

static bool check_owns(const bp_backend *be, const void *p) {
    (void)be;
    pthread_mutex_lock(&lock);
    bool r = find(p) != NULL;
    pthread_mutex_unlock(&lock);
    return r;
}

static void check_host_begin(const bp_backend *be, const void *p) {
    (void)be;
    if (p) (void)open_buf(p, 1);
}

static void check_host_end(const bp_backend *be, const void *p) {
    (void)be;
    if (!p) return;
    pthread_mutex_lock(&lock);
    mapping *m = find(p);
    pthread_mutex_unlock(&lock);
    if (!m) die("pointer", p);
    close_buf(m);
}

static bp_status check_alloc(const bp_backend *be, void **out, size_t bytes, const char *what,
                             bp_err *err) {
    (void)be;
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t len = (bytes + page - 1) / page * page;
    mapping *m = calloc(1, sizeof *m);
    void *p = m && len ? mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) : NULL;
    if (!m || !len || p == MAP_FAILED) {
        free(m);
        *out = NULL;
        return bp_fail(err, BP_ENOMEM, "check backend: cannot map %zu bytes for %s", bytes, what);
    }
    *m = (mapping){.base = p, .bytes = len};
    pthread_mutex_lock(&lock);
    m->next = mappings;
    mappings = m;
    pthread_mutex_unlock(&lock);
    *out = p;
    return BP_OK;
}

static void check_free(const bp_backend *be, void *p) {
    (void)be;
    if (!p) return;
    pthread_mutex_lock(&lock);
    mapping **at = &mappings;
    while (*at && (*at)->base != p) at = &(*at)->next;
    mapping *m = *at;
    if (!m) die("freed pointer", p);
    *at = m->next;
    pthread_mutex_unlock(&lock);
    munmap(m->base, m->bytes);
    free(m);
}

static const bp_backend *cpu(void) { return bp_backend_cpu(); }

/* Host memory stays the host's: the cpu backend's, outside the checked mappings. */
static bp_status check_host_alloc(const bp_backend *be, void **out, size_t bytes,
                                  const char *what, bp_err *err) {
    (void)be;
    return cpu()->host_alloc(cpu(), out, bytes, what, err);
}

static void check_host_free(const bp_backend *be, void *p) {
    (void)be;
    cpu()->host_free(cpu(), p);
}

static void check_to_device(const bp_backend *be, void *dst, const void *src, size_t bytes) {
    (void)be;
    mapping *d = open_buf(dst, bytes);
    cpu()->to_device(cpu(), dst, src, bytes);
    close_buf(d);
}

static void check_to_host(const bp_backend *be, void *dst, const void *src, size_t bytes) {
    (void)be;
    mapping *s = open_buf(src, bytes);
    cpu()->to_host(cpu(), dst, src, bytes);
    close_buf(s);
}

static void check_copy(const bp_backend *be, void *dst, const void *src, size_t bytes) {
    (void)be;
    mapping *d = open_buf(dst, bytes), *s = open_buf(src, bytes);
    cpu()->copy(cpu(), dst, src, bytes);
    close_buf(s);
    close_buf(d);
}

static bool check_all_finite(const bp_backend *be, const float *x, size_t n) {
    (void)be;
    mapping *m = open_buf(x, n);
    bool r = cpu()->all_finite(cpu(), x, n);
    close_buf(m);
    return r;
}

static double check_sumsq(const bp_backend *be, const float *x, size_t n) {
    (void)be;
    mapping *m = open_buf(x, n);
    double r = cpu()->sumsq(cpu(), x, n);
    close_buf(m);
    return r;
}

static void check_scale(const bp_backend *be, float *x, size_t n, float a) {
    (void)be;
    mapping *m = open_buf(x, n);
    cpu()->scale(cpu(), x, n, a);
    close_buf(m);
}

static void check_axpy(const bp_backend *be, float *y, size_t n, float a, const float *x) {
    (void)be;
    mapping *my = open_buf(y, n), *mx = open_buf(x, n);
    cpu()->axpy(cpu(), y, n, a, x);
    close_buf(mx);
    close_buf(my);
}

static void check_fill(const bp_backend *be, float *x, size_t n, float v) {
    (void)be;
    mapping *m = open_buf(x, n);
    cpu()->fill(cpu(), x, n, v);
    close_buf(m);
}

static bool check_zero_nonfinite(const bp_backend *be, float *x, size_t n) {
    (void)be;
    mapping *m = open_buf(x, n);
    bool r = cpu()->zero_nonfinite(cpu(), x, n);
    close_buf(m);
    return r;
}

static void check_elastic_pull(const bp_backend *be, float *w, const float *c, float *diff,
                               size_t n, float alpha, bool accumulate) {
    (void)be;
    mapping *mw = open_buf(w, n), *mc = open_buf(c, n), *md = open_buf(diff, n);
    cpu()->elastic_pull(cpu(), w, c, diff, n, alpha, accumulate);
    close_buf(md);
    close_buf(mc);
    close_buf(mw);
}

static void check_outer_step(const bp_backend *be, float *g, float *m, const float *d, float *w,
                             size_t n, float lr, float mu, float mix) {
    (void)be;
    mapping *mg = open_buf(g, n), *mm = open_buf(m, n), *md = open_buf(d, n), *mw = open_buf(w, n);
    cpu()->outer_step(cpu(), g, m, d, w, n, lr, mu, mix);
    close_buf(mw);
    close_buf(md);
    close_buf(mm);
    close_buf(mg);
}

static void check_update(const bp_backend *be, const bp_update_args *a, float *params,
                         const float *grads, float *m, float *v, size_t off, size_t len) {
    (void)be;
    mapping *mp = open_buf(params + off, len), *mg = open_buf(grads + off, len);
    mapping *mm = open_buf(m + off, len), *mv = v ? open_buf(v + off, len) : NULL;
    cpu()->update(cpu(), a, params, grads, m, v, off, len);
    close_buf(mv);
    close_buf(mm);
    close_buf(mg);
    close_buf(mp);
}

/* Operations finish when they return, as on the cpu: its streams and events serve. */
static bp_status check_stream_create(const bp_backend *be, bp_dev_stream **out, bp_err *err) {
    (void)be;
    return cpu()->stream_create(cpu(), out, err);
}
static void check_stream_destroy(const bp_backend *be, bp_dev_stream *s) {
    (void)be;
    cpu()->stream_destroy(cpu(), s);
}
static bp_status check_event_create(const bp_backend *be, bp_dev_event **out, bp_err *err) {
    (void)be;
    return cpu()->event_create(cpu(), out, err);
}
static void check_event_destroy(const bp_backend *be, bp_dev_event *e) {
    (void)be;
    cpu()->event_destroy(cpu(), e);
}
static bp_status check_event_record(const bp_backend *be, bp_dev_event *e, bp_dev_stream *s,
                                    bp_err *err) {
    (void)be;
    return cpu()->event_record(cpu(), e, s, err);
}
static bp_status check_stream_wait(const bp_backend *be, bp_dev_stream *s, bp_dev_event *e,
                                   bp_err *err) {
    (void)be;
    return cpu()->stream_wait(cpu(), s, e, err);
}
static bp_status check_event_sync(const bp_backend *be, bp_dev_event *e, bp_err *err) {
    (void)be;
    return cpu()->event_sync(cpu(), e, err);
}

static const bp_backend check = {
    .name = "check",
    .host_memory = false,
    .alloc = check_alloc,
    .free = check_free,
    .host_alloc = check_host_alloc,
    .host_free = check_host_free,
    .to_device = check_to_device,
    .to_host = check_to_host,
    .copy = check_copy,
    .owns = check_owns,
    .host_begin = check_host_begin,
    .host_end = check_host_end,
    .all_finite = check_all_finite,
    .sumsq = check_sumsq,
    .scale = check_scale,
    .axpy = check_axpy,
    .fill = check_fill,
    .zero_nonfinite = check_zero_nonfinite,
    .elastic_pull = check_elastic_pull,
    .outer_step = check_outer_step,
    .update = check_update,
    .stream_create = check_stream_create,
    .stream_destroy = check_stream_destroy,
    .event_create = check_event_create,
    .event_destroy = check_event_destroy,
    .event_record = check_event_record,
    .stream_wait = check_stream_wait,
    .event_sync = check_event_sync,
};

const bp_backend *bp_backend_check(void) { return &check; }
