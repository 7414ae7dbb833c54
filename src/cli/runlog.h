/* Reading back what a run wrote, for `bagpipe report`: the metrics log
 * (formats/metrics.h) and a --trace file (formats/trace_file.c).
 *
 * Fields of the metrics log relied on: the last `config` record (every key, shown
 * as the run's configuration; batch and grad_accum give samples per step), `step`
 * records (step, loss, step_ms, bytes_sent, axis_bytes, axis_exposed_ms), `eval`
 * records (step, val_loss) and the `stages` record (busy_s, idle_s, peak_stash).
 * Lines that are not JSON objects, or of another type, are skipped, so a log cut
 * short by a crash still reads. */
#ifndef BP_CLI_RUNLOG_H
#define BP_CLI_RUNLOG_H

#include <stdint.h>

#include "bagpipe/status.h"
#include "formats/metrics.h"

typedef struct bp_runlog_step {
    int64_t step;
    double loss, step_ms, bytes_sent;
    double axis_bytes[BP_AXES], axis_exposed_ms[BP_AXES];
} bp_runlog_step;

typedef struct bp_runlog_eval {
    int64_t step;
    double val_loss;
    double train_s; /* training time up to this step: the sum of step_ms */
    double samples; /* step x batch x grad_accum */
} bp_runlog_eval;

#define BP_RUNLOG_KEYS 32

typedef struct bp_runlog {
    /* the config record's members, in file order, values as text */
    int n_config;
    char key[BP_RUNLOG_KEYS][32];
    char value[BP_RUNLOG_KEYS][160];
    bp_runlog_step *steps;
    int n_steps;
    bp_runlog_eval *evals;
    int n_evals;
    int n_stages; /* 0: no stages record */
    double *busy_s, *idle_s, *peak_stash;
} bp_runlog;

/* Read the metrics log at path: BP_EIO when it is no regular file; BP_EFORMAT when
 * it holds no step record, or a step or eval record whose "step" is not a whole
 * number from 0 to 2^53 (the message names the file and line). Lines that are not
 * JSON (a last record cut short by a crash) are skipped. */
bp_status bp_runlog_read(const char *path, bp_runlog *out, bp_err *err);
void bp_runlog_free(bp_runlog *r);
/* The config value of key, or NULL. */
const char *bp_runlog_config(const bp_runlog *r, const char *key);

/* One piece of work of a trace's timeline. */
typedef enum bp_span_kind {
    BP_SPAN_FORWARD,
    BP_SPAN_BACKWARD,
    BP_SPAN_PP_WAIT,    /* a pipeline stage waiting for another (the bubble) */
    BP_SPAN_COLLECTIVE, /* a collective or primitive of any group */
    BP_SPAN_STEP,       /* a whole optimizer step of one rank */
} bp_span_kind;

typedef struct bp_span {
    int pid;              /* 0 to 2^20 - 1 */
    bp_span_kind kind;
    int micro, pipeline;  /* 0 to 2^30, -1 when the event has none */
    int64_t step;         /* 0 to 2^53 */
    double ts, dur; /* microseconds */
} bp_span;

typedef struct bp_tracelog {
    bp_span *spans;
    int n;
    int n_procs;          /* 1 + the highest pid */
    char (*proc_name)[96]; /* [n_procs] */
} bp_tracelog;

/* The spans of a --trace file (one event per line, as bagpipe writes them). An
 * event whose pid or step, micro-batch or pipeline index is not a whole number in
 * range refuses the file, naming its line; so does a trace without a step. */
bp_status bp_tracelog_read(const char *path, bp_tracelog *out, bp_err *err);
void bp_tracelog_free(bp_tracelog *t);

#endif
