/* The trace file of --trace: every rank's events (core/trace.h) gathered by rank 0
 * into one file in Chrome's trace-event format (trace_file.c says how). */
#ifndef BP_FORMATS_TRACE_FILE_H
#define BP_FORMATS_TRACE_FILE_H

#include <stdbool.h>
#include <stddef.h>

#include "bagpipe/comm.h"
#include "bagpipe/status.h"
#include "core/file.h"
#include "core/trace.h"
#include "parallel/grid.h"

/* What the file is written for: the job's ranks and this one's place. */
typedef struct bp_trace_job {
    bp_comm *meta;       /* every rank of the job (bookkeeping, never emulated) */
    const bp_grid *grid; /* this rank's place: its groups record, its name in the events */
    int rank, size;      /* in meta */
    const char *path;    /* the file; "": no trace */
    double dilation;     /* emulated device: times divided by it; 1 otherwise */
} bp_trace_job;

/* What a trace file begins with, for bp_check_output. */
extern const bp_output_kind bp_trace_file_kind;

/* Collective: every rank's trace of at most `events` events, set on the grid's
 * groups (so that comm/ records every message and collective), with a common time
 * origin; *out NULL when the path is "" or some rank failed (its own failure
 * returned here; the others' BP_OK: the caller's agreement tells them). */
bp_status bp_trace_file_start(const bp_trace_job *j, size_t events, bp_trace **out, bp_err *err);
/* Collective, after a run that ended on every rank alike (rc BP_OK, or
 * *stopped_together: also when stopped): rank 0 gathers every rank's events and
 * writes the file. Returns rc, or the write's failure when rc was BP_OK (then
 * *stopped_together is set: every rank returns alike). */
bp_status bp_trace_file_write(const bp_trace_job *j, bp_trace *trace, bp_status rc,
                              bool *stopped_together, bp_err *err);

#endif
