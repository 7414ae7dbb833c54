#include "core/trace.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_THREADS = 32, MAX_NAMES = 64 };

typedef struct event {
    double ts, dur; /* microseconds since the origin */
    const char *cat, *name;
    int64_t step;
    int tid;
    bp_trace_args a;
} event;

typedef struct thread_slot {
    pthread_t id;
    const char *name;
} thread_slot;

struct bp_trace {
    pthread_mutex_t mu; /* guards everything below */
    double origin;
    double dilation; /* times are divided by it */
    int64_t step;
    event *ring;
    size_t cap, head, count; /* oldest event at head */
    uint64_t dropped;
    thread_slot threads[MAX_THREADS];
    int n_threads;
    char *names[MAX_NAMES];
    int n_names;
};

bp_status bp_trace_create(size_t cap, bp_trace **out, bp_err *err) {
    *out = NULL;
    if (cap < 1) return bp_fail(err, BP_EUSAGE, "a trace needs room for at least one event");
    bp_trace *t = calloc(1, sizeof *t);
    if (t) t->ring = malloc(cap * sizeof *t->ring);
    if (!t || !t->ring) {
        free(t);
        return bp_fail(err, BP_ENOMEM, "cannot allocate a trace of %zu events", cap);
    }
    pthread_mutex_init(&t->mu, NULL);
    t->cap = cap;
    t->origin = bp_now();
    t->dilation = 1;
    t->threads[0] = (thread_slot){pthread_self(), "main"};
    t->n_threads = 1;
    *out = t;
    return BP_OK;
}

void bp_trace_destroy(bp_trace *t) {
    if (!t) return;
    for (int i = 0; i < t->n_names; i++) free(t->names[i]);
    pthread_mutex_destroy(&t->mu);
    free(t->ring);
    free(t);
}

void bp_trace_set_origin(bp_trace *t, double origin) {
    pthread_mutex_lock(&t->mu);
    t->origin = origin;
    pthread_mutex_unlock(&t->mu);
}

void bp_trace_set_dilation(bp_trace *t, double k) {
    pthread_mutex_lock(&t->mu);
    t->dilation = k >= 1 ? k : 1;
    pthread_mutex_unlock(&t->mu);
}

void bp_trace_set_step_(bp_trace *t, int64_t step) {
    pthread_mutex_lock(&t->mu);
    t->step = step;
    pthread_mutex_unlock(&t->mu);
}

/* The calling thread's track, added (unnamed) on its first event; mu held. Threads
 * beyond MAX_THREADS share the last track. */
static int thread_index(bp_trace *t) {
    pthread_t self = pthread_self();
    for (int i = 0; i < t->n_threads; i++)
        if (pthread_equal(t->threads[i].id, self)) return i;
    if (t->n_threads == MAX_THREADS) return MAX_THREADS - 1;
    t->threads[t->n_threads] = (thread_slot){self, NULL};
    return t->n_threads++;
}

void bp_trace_thread_(bp_trace *t, const char *name) {
    pthread_mutex_lock(&t->mu);
    t->threads[thread_index(t)].name = name;
    pthread_mutex_unlock(&t->mu);
}

const char *bp_trace_intern(bp_trace *t, const char *s) {
    const char *r = s;
    pthread_mutex_lock(&t->mu);
    for (int i = 0; i < t->n_names; i++)
        if (strcmp(t->names[i], s) == 0) r = t->names[i];
    if (r == s && t->n_names < MAX_NAMES && (t->names[t->n_names] = strdup(s)))
        r = t->names[t->n_names++];
    pthread_mutex_unlock(&t->mu);
    return r;
}

void bp_trace_add_(bp_trace *t, const char *cat, const char *name, double t0,
                   const bp_trace_args *a) {
    double t1 = bp_now();
    pthread_mutex_lock(&t->mu);
    event *e = &t->ring[(t->head + t->count) % t->cap];
    if (t->count == t->cap) { /* full: the oldest makes room */
        t->head = (t->head + 1) % t->cap;
        t->dropped++;
    } else {
        t->count++;
    }
    double us = 1e6 / t->dilation;
    *e = (event){.ts = (t0 - t->origin) * us, .dur = (t1 - t0) * us, .cat = cat, .name = name,
                 .step = t->step, .tid = thread_index(t), .a = *a};
    pthread_mutex_unlock(&t->mu);
}

uint64_t bp_trace_dropped(bp_trace *t) {
    pthread_mutex_lock(&t->mu);
    uint64_t d = t->dropped;
    pthread_mutex_unlock(&t->mu);
    return d;
}

size_t bp_trace_cap(const bp_trace *t) { return t->cap; }

/* ---- JSON text --------------------------------------------------------------------- */

typedef struct text {
    char *p;
    size_t n, cap;
    bool oom;
} text;

static void put(text *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(text *b, const char *fmt, ...) {
    for (int pass = 0; pass < 2 && !b->oom; pass++) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(b->p + b->n, b->cap - b->n, fmt, ap);
        va_end(ap);
        if (k < 0) b->oom = true;
        if (k < 0 || (size_t)k < b->cap - b->n) {
            if (k > 0) b->n += (size_t)k;
            return;
        }
        size_t cap = (b->cap + (size_t)k + 1) * 2;
        char *bigger = realloc(b->p, cap);
        if (!bigger) b->oom = true;
        else b->p = bigger, b->cap = cap;
    }
}

/* A JSON string; our names need no escapes but process names come from outside. */
static void put_str(text *b, const char *s) {
    put(b, "\"");
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') put(b, "\\%c", c);
        else if (c < 0x20) put(b, "\\u%04x", c);
        else put(b, "%c", c);
    }
    put(b, "\"");
}

/* The axis of a group named like "dp(p0,t0)": the part before '('. */
static void put_axis(text *b, const char *group) {
    size_t k = strcspn(group, "(/");
    put(b, ",\"axis\":\"%.*s\"", (int)k, group);
}

static void put_event(text *b, int pid, const event *e) {
    put(b, ",\n{\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f,\"cat\":", pid, e->tid,
        e->ts, e->dur);
    put_str(b, e->cat);
    put(b, ",\"name\":");
    put_str(b, e->name);
    put(b, ",\"args\":{\"step\":%" PRId64, e->step);
    const bp_trace_args *a = &e->a;
    if (a->micro >= 0) put(b, ",\"micro\":%d", a->micro);
    if (a->pipeline >= 0) put(b, ",\"pipeline\":%d", a->pipeline);
    if (a->peer >= 0) put(b, ",\"peer\":%d", a->peer);
    if (a->bytes_sent >= 0) put(b, ",\"bytes_sent\":%" PRId64, a->bytes_sent);
    if (a->bytes_recv >= 0) put(b, ",\"bytes_recv\":%" PRId64, a->bytes_recv);
    if (a->group) {
        put(b, ",\"group\":");
        put_str(b, a->group);
        put_axis(b, a->group);
    }
    if (a->codec) {
        put(b, ",\"codec\":");
        put_str(b, a->codec);
    }
    put(b, "}}");
}

static void put_meta(text *b, int pid, int tid, const char *what, const char *key,
                     const char *value) {
    put(b, "%s{\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"name\":\"%s\",\"args\":{\"%s\":",
        b->n ? ",\n" : "", pid, tid, what, key);
    put_str(b, value);
    put(b, "}}");
}

bp_status bp_trace_format(bp_trace *t, int pid, const char *process_name, char **out, size_t *n,
                          bp_err *err) {
    text b = {.p = malloc(1 << 16), .cap = 1 << 16};
    if (!b.p) return bp_fail(err, BP_ENOMEM, "cannot format a trace");
    b.p[0] = '\0';
    pthread_mutex_lock(&t->mu);
    put_meta(&b, pid, 0, "process_name", "name", process_name);
    put(&b, ",\n{\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"name\":\"process_sort_index\","
            "\"args\":{\"sort_index\":%d}}", pid, pid);
    if (t->dropped) {
        char note[96];
        snprintf(note, sizeof note, "dropped the %" PRIu64 " oldest events (ring of %zu)",
                 t->dropped, t->cap);
        put_meta(&b, pid, 0, "process_labels", "labels", note);
    }
    for (int i = 0; i < t->n_threads; i++) {
        char fallback[32];
        snprintf(fallback, sizeof fallback, "thread %d", i);
        const char *tname = t->threads[i].name ? t->threads[i].name : fallback;
        put_meta(&b, pid, i, "thread_name", "name", tname);
        put(&b, ",\n{\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"name\":\"thread_sort_index\","
                "\"args\":{\"sort_index\":%d}}", pid, i, i);
    }
    for (size_t i = 0; i < t->count; i++) put_event(&b, pid, &t->ring[(t->head + i) % t->cap]);
    pthread_mutex_unlock(&t->mu);
    if (b.oom) {
        free(b.p);
        return bp_fail(err, BP_ENOMEM, "cannot format the trace of %zu events", t->count);
    }
    *out = b.p;
    *n = b.n;
    return BP_OK;
}
