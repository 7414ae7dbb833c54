#include "parallel/schedule.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bp_status bp_schedule_parse(const char *text, bp_schedule *out, bp_err *err) {
    memset(out, 0, sizeof *out);
    if (strcmp(text, "gpipe") == 0) {
        out->kind = BP_SCHED_GPIPE;
        return BP_OK;
    }
    if (strcmp(text, "1f1b") == 0) {
        out->kind = BP_SCHED_1F1B;
        return BP_OK;
    }
    char *end;
    if (strncmp(text, "afp:", 4) == 0) {
        long k = strtol(text + 4, &end, 10);
        if (text[4] && !*end && k >= 0 && k <= 1 << 20) {
            out->kind = BP_SCHED_AFP;
            out->k = (int)k;
            return BP_OK;
        }
    }
    return bp_fail(err, BP_EUSAGE, "option --schedule: '%s' is not gpipe, 1f1b or afp:K (K >= 0)",
                   text);
}

void bp_schedule_name(const bp_schedule *s, char *buf, size_t n) {
    if (s->kind == BP_SCHED_AFP)
        snprintf(buf, n, "afp:%d", s->k);
    else
        snprintf(buf, n, "%s", s->kind == BP_SCHED_GPIPE ? "gpipe" : "1f1b");
}

static int min_int(int a, int b) { return a < b ? a : b; }

int bp_schedule_warmup(const bp_schedule *sched, int S, int s, int M) {
    switch (sched->kind) {
    case BP_SCHED_GPIPE: return M;
    case BP_SCHED_1F1B: return min_int(M, S - s - 1);
    default: return min_int(M, S - s - 1 + sched->k);
    }
}

/* The last position of pipeline j in step t, where U(t, j) may come. */
static int last_of(const bp_stream *st, int u) {
    return (u / st->N) * st->N * st->M + (st->M - 1) * st->N + u % st->N;
}

int bp_schedule_stream(const bp_schedule *sched, const bp_stream *st, bp_pipe_op *ops, int *peak) {
    int N = st->N, V = N * st->M, total = st->stream_len * V, n_upd = (st->stream_len - 1) * N;
    int w = bp_schedule_warmup(sched, st->S, st->s, V), f = 0, b = 0, u = 0, n = 0;
    int delay = st->tied && st->s == st->S - 1 ? st->S - 1 : 0;
    *peak = 0;
    while (b < total) {
        /* F(f) of step t > 0 waits for U(t - 1, j), update number p = f / V N - N + f % N,
         * and for up to s more backwards of step t - 1: the first stage can send it
         * only after its own update, s stages of backwards away */
        int p = (f / V) * N - N + f % N;
        bool waits = f >= V && (u <= p || (b <= last_of(st, p) + st->s && b < f / V * V));
        bool fwd = f < total && f - b <= w && !waits;
        if (ops) ops[n] = (bp_pipe_op){fwd, fwd ? f : b, false};
        n++;
        if (fwd && ++f - b > *peak) *peak = f - b;
        if (fwd) continue;
        b++;
        while (u < n_upd && b > min_int(last_of(st, u) + delay, (u / N + 1) * V - 1)) {
            if (ops) ops[n] = (bp_pipe_op){false, u, true};
            n++, u++;
        }
    }
    return n;
}

void bp_schedule_ops(const bp_schedule *sched, int S, int s, int M, bp_pipe_op *ops) {
    int peak;
    bp_stream st = {.S = S, .s = s, .N = 1, .M = M, .stream_len = 1};
    bp_schedule_stream(sched, &st, ops, &peak);
}

int bp_schedule_peak_stash(const bp_schedule *sched, int S, int s, int M) {
    return min_int(M, bp_schedule_warmup(sched, S, s, M) + 1);
}
