/* The readers behind `bagpipe report` (cli/runlog.c): a metrics log and a trace,
 * through files as the report reads them.
 *
 * Input: the metrics log and the trace file separated by BP_FUZZ_SEP (an input
 * without a separator is a metrics log and an empty trace). Each reader's result
 * is checked against what its header promises and the report relies on: steps
 * and indices in range, every span on a named row. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "cli/runlog.h"

#define STEP_MAX 9007199254740992LL /* 2^53, runlog.h */

static int check_log(const char *path) {
    bp_runlog log;
    bp_err err;
    if (bp_fuzz_reject(bp_runlog_read(path, &log, &err), &err)) return 0;
    const char *keys[] = {"model", "batch", "grad_accum", "dp", "pp", "world", "missing"};
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) bp_runlog_config(&log, keys[k]);
    if (log.n_steps < 1) abort();
    for (int k = 0; k < log.n_steps; k++)
        if (log.steps[k].step < 0 || log.steps[k].step > STEP_MAX) abort();
    for (int k = 0; k < log.n_evals; k++)
        if (log.evals[k].step < 0 || log.evals[k].step > STEP_MAX || isnan(log.evals[k].train_s))
            abort();
    double sum = 0;
    for (int s = 0; s < log.n_stages; s++) sum += log.busy_s[s] + log.idle_s[s] + log.peak_stash[s];
    (void)sum;
    bp_runlog_free(&log);
    return 1;
}

static int check_trace(const char *path) {
    bp_tracelog t;
    bp_err err;
    if (bp_fuzz_reject(bp_tracelog_read(path, &t, &err), &err)) return 0;
    int steps = 0;
    for (int k = 0; k < t.n; k++) {
        const bp_span *s = &t.spans[k];
        if (s->pid < 0 || s->pid >= t.n_procs || s->micro < -1 || s->micro > 1 << 30 ||
            s->pipeline < -1 || s->pipeline > 1 << 30 || s->step < 0 || s->step > STEP_MAX ||
            !isfinite(s->ts) || !isfinite(s->dur))
            abort();
        steps += s->kind == BP_SPAN_STEP;
    }
    if (steps == 0) abort();
    for (int p = 0; p < t.n_procs; p++)
        if (!memchr(t.proc_name[p], '\0', sizeof t.proc_name[p])) abort();
    bp_tracelog_free(&t);
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > (1u << 20)) return 0;
    bp_fuzz_part parts[2];
    bp_fuzz_split(data, size, parts, 2);
    char log[4200], trace[4200];
    bp_fuzz_path(log, sizeof log, "metrics.jsonl");
    bp_fuzz_path(trace, sizeof trace, "trace.json");
    bp_fuzz_write(log, parts[0].data, parts[0].n);
    bp_fuzz_write(trace, parts[1].data, parts[1].n);
    /* Accepted: the metrics log reads; the trace is optional to a report. */
    if (check_log(log)) bp_fuzz_accepted++;
    check_trace(trace);
    return 0;
}
