/* The emulated device's timeline (backend_emu_timeline.h): a list of operations in
 * issue order, placed again by list scheduling whenever one is issued. */
#include "core/backend_emu_timeline.h"

#include <stdlib.h>

struct bp_emu_op {
    uint64_t seq;
    uint64_t after; /* BP_EMU_WAIT: the operation waited for (0: none) */
    bp_dev_stream *s;
    int engine;
    bool started; /* its start has passed: fixed */
    bool placed;  /* while placing */
    double issue, dur, start, end;
};

bool bp_emu_tl_init(bp_emu_timeline *tl) {
    *tl = (bp_emu_timeline){.ops = calloc(BP_EMU_QUEUE, sizeof *tl->ops)};
    return tl->ops != NULL;
}

void bp_emu_tl_free(bp_emu_timeline *tl) {
    free(tl->ops);
    tl->ops = NULL;
}

static double max2(double a, double b) { return a > b ? a : b; }

/* The index of operation `seq`, or -1 when it is over and forgotten. */
static long find(const bp_emu_timeline *tl, uint64_t seq) {
    size_t lo = 0, hi = tl->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (tl->ops[mid].seq < seq)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < tl->n && tl->ops[lo].seq == seq ? (long)lo : -1;
}

/* The streams with operations to place, each at its first one, busy until the end
 * of its last started one. Returns how many. */
static size_t gather(bp_emu_timeline *tl, bp_dev_stream **list) {
    size_t k = 0;
    for (size_t i = 0; i < tl->n; i++)
        if (!tl->ops[i].started) tl->ops[i].s->next = tl->n;
    for (size_t i = 0; i < tl->n; i++) {
        bp_emu_op *o = &tl->ops[i];
        if (o->started) continue;
        o->placed = false;
        if (o->s->next != tl->n) continue;
        o->s->next = i;
        o->s->at = o->s->done;
        list[k++] = o->s;
    }
    return k;
}

/* s's next operation to place (NULL: none), and when it could start: ready is the
 * latest of its issue, its stream's previous end and an awaited operation's end;
 * false where that operation is not placed yet. */
static bp_emu_op *head(bp_emu_timeline *tl, bp_dev_stream *s, const double *engine,
                       double *start, double *ready) {
    size_t i = s->next;
    while (i < tl->n && (tl->ops[i].s != s || tl->ops[i].started || tl->ops[i].placed)) i++;
    s->next = i;
    if (i == tl->n) return NULL;
    bp_emu_op *o = &tl->ops[i];
    *ready = max2(o->issue, s->at);
    if (o->engine == BP_EMU_WAIT) {
        long j = o->after ? find(tl, o->after) : -1;
        if (j >= 0 && !tl->ops[j].started && !tl->ops[j].placed) return NULL;
        if (j >= 0) *ready = max2(*ready, tl->ops[j].end);
        *start = *ready;
    } else {
        *start = max2(*ready, engine[o->engine]);
    }
    return o;
}

/* List scheduling: the operation that can start first, of those that could start
 * then the one ready longest, then the first issued. Each placed operation only
 * delays the others, so starts come in order. */
static void place_all(bp_emu_timeline *tl) {
    bp_dev_stream *list[BP_EMU_QUEUE];
    size_t k = gather(tl, list);
    double engine[BP_EMU_ENGINES];
    for (int e = 0; e < BP_EMU_ENGINES; e++) engine[e] = tl->engine[e];
    for (;;) {
        bp_emu_op *best = NULL;
        double best_start = 0, best_ready = 0;
        for (size_t j = 0; j < k; j++) {
            double start, ready;
            bp_emu_op *o = head(tl, list[j], engine, &start, &ready);
            if (o && (!best || start < best_start ||
                      (start == best_start &&
                       (ready < best_ready || (ready == best_ready && o->seq < best->seq))))) {
                best = o, best_start = start, best_ready = ready;
            }
        }
        if (!best) return;
        best->placed = true;
        best->start = best_start;
        best->end = best_start + best->dur;
        best->s->at = best->end;
        if (best->engine != BP_EMU_WAIT) engine[best->engine] = best->end;
    }
}

void bp_emu_tl_advance(bp_emu_timeline *tl, double now) {
    size_t kept = 0;
    for (size_t i = 0; i < tl->n; i++) {
        bp_emu_op *o = &tl->ops[i];
        if (!o->started && o->start <= now) {
            o->started = true;
            o->s->done = max2(o->s->done, o->end);
            if (o->engine != BP_EMU_WAIT)
                tl->engine[o->engine] = max2(tl->engine[o->engine], o->end);
        }
        if (!(o->started && o->end <= now)) tl->ops[kept++] = *o;
    }
    tl->n = kept;
}

bool bp_emu_tl_room(const bp_emu_timeline *tl, double *until) {
    if (tl->n < BP_EMU_QUEUE) return true;
    *until = tl->ops[0].end;
    for (size_t i = 1; i < tl->n; i++)
        if (tl->ops[i].end < *until) *until = tl->ops[i].end;
    return false;
}

/* Whether every operation not started is o's stream's: then o, issued last, moves
 * none of them, and goes after them (the common case: the host's stream alone). */
static bool place_alone(bp_emu_timeline *tl, bp_emu_op *o) {
    if (o->engine == BP_EMU_WAIT) return false;
    double at = o->s->done, engine = tl->engine[o->engine];
    for (bp_emu_op *p = tl->ops; p < o; p++) {
        if (!p->started && p->s != o->s) return false;
        if (p->s == o->s && p->end > at) at = p->end;
        if (p->engine == o->engine && p->end > engine) engine = p->end;
    }
    o->start = max2(max2(o->issue, at), engine);
    o->end = o->start + o->dur;
    return true;
}

uint64_t bp_emu_tl_issue(bp_emu_timeline *tl, bp_dev_stream *s, int engine, double now, double dur,
                         uint64_t after) {
    bp_emu_op *o = &tl->ops[tl->n++];
    *o = (bp_emu_op){.seq = ++tl->seq, .after = after, .s = s, .engine = engine, .issue = now,
                     .dur = dur};
    s->last = o->seq;
    if (!place_alone(tl, o)) place_all(tl);
    return o->seq;
}

double bp_emu_tl_end(const bp_emu_timeline *tl, uint64_t op) {
    long j = find(tl, op);
    return j < 0 ? 0 : tl->ops[j].end;
}

double bp_emu_tl_stream_end(const bp_emu_timeline *tl, const bp_dev_stream *s) {
    long j = s->last ? find(tl, s->last) : -1;
    return j < 0 ? s->done : tl->ops[j].end;
}
