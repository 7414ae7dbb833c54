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

void bp_schedule_ops(const bp_schedule *sched, int S, int s, int M, bp_pipe_op *ops) {
    int w = bp_schedule_warmup(sched, S, s, M), f = 0, b = 0, n = 0;
    while (f < w) ops[n++] = (bp_pipe_op){true, f++};
    while (f < M) {
        ops[n++] = (bp_pipe_op){true, f++};
        ops[n++] = (bp_pipe_op){false, b++};
    }
    while (b < M) ops[n++] = (bp_pipe_op){false, b++};
}

int bp_schedule_peak_stash(const bp_schedule *sched, int S, int s, int M) {
    return min_int(M, bp_schedule_warmup(sched, S, s, M) + 1);
}
