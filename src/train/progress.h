/* The progress line of rank 0: step/total, loss, throughput, MB sent per step, ETA. On a terminal
 * one line is redrawn in place with a bar; otherwise (logs, CI, a rank of Open
 * MPI or MPICH unless BAGPIPE_TERMINAL=1 says mpirun's output is a terminal) a plain line
 * is printed each time. The trainer updates it every --log-every steps. Output goes
 * to stdout. */
#ifndef BP_TRAIN_PROGRESS_H
#define BP_TRAIN_PROGRESS_H

#include <stdint.h>

#include "train/config.h"

typedef struct bp_progress {
    int mode; /* BP_PROGRESS_BAR, _LINES or _NONE after resolving AUTO */
    int64_t total;
    const char *unit; /* "tok" or "samples" */
    int drawn;        /* a bar is on screen and needs a newline before other output */
} bp_progress;

void bp_progress_init(bp_progress *p, int mode, int64_t total, const char *unit);
/* After step `step` (1-based) with its loss, throughput, MB this rank sent in the
 * step and seconds left. */
void bp_progress_step(bp_progress *p, int64_t step, double loss, double items_per_s,
                      double mb_sent, double eta_s);
/* Any other line (evaluation results, messages): printed on its own line. */
void bp_progress_note(bp_progress *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void bp_progress_finish(bp_progress *p);

#endif
