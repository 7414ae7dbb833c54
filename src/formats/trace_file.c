/* --trace FILE: every rank records on its own bp_trace (core/trace.h), set on the
 * groups of the grid so that comm/ records every message and collective, and the
 * pipeline, the data-parallel engine and the trainer record their work. At the end
 * (and when every rank stopped together, on a signal or a non-finite value) rank 0
 * receives every rank's events, one rank at a time so that it never holds more
 * than one rank's text, and writes one JSON file in Chrome's trace-event format:
 *   {"traceEvents":[...],"displayTimeUnit":"ms",
 *    "otherData":{"producer":"bagpipe","ranks":W,"events_per_rank":cap,
 *                 "dropped_events":[per rank]}}
 * and, on an emulated device, "dilation":K,"times":"emulated device: wall time /
 * dilation" in otherData: every time is the device's, the host's divided by K.
 * to a temporary name, flushed and renamed, as checkpoints are, where the trainer's
 * check of its outputs allows: never over a device, a directory or a file of
 * another kind. */
#include <errno.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "formats/trace_file.h"

#include "bagpipe/comm_mpi.h"
#include "core/timer.h"

const bp_output_kind bp_trace_file_kind = {"trace", "{\"traceEvents\":", false};

enum { TAG_TRACE = 7 };
#define CHUNK (1 << 30) /* MPI counts are ints */

static bp_status mpi_fail(int mpi_rc, const char *call, bp_err *err) {
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(mpi_rc, text, &len) != MPI_SUCCESS) snprintf(text, sizeof text, "?");
    return bp_fail(err, BP_ECOMM, "--trace: %s failed: %s", call, text);
}

/* Every rank's times count from the same instant: rank 0's clock reading, on the
 * ranks of its host (whose monotonic clock is the same); elsewhere the moment that
 * reading arrives, which leaving a barrier together makes nearly the same. */
static bp_status common_origin(const bp_trace_job *j, bp_trace *trace, bp_err *err) {
    struct {
        double now;
        char host[MPI_MAX_PROCESSOR_NAME + 1];
    } zero = {0}, mine = {0};
    int len = 0;
    MPI_Get_processor_name(mine.host, &len);
    MPI_Comm comm = bp_comm_mpi(j->meta);
    MPI_Request r;
    int rc = MPI_Ibarrier(comm, &r);
    if (rc == MPI_SUCCESS) rc = bp_comm_mpi_wait(j->meta, 1, &r);
    zero.now = bp_now();
    memcpy(zero.host, mine.host, sizeof zero.host);
    if (rc == MPI_SUCCESS) rc = MPI_Ibcast(&zero, (int)sizeof zero, MPI_BYTE, 0, comm, &r);
    if (rc == MPI_SUCCESS) rc = bp_comm_mpi_wait(j->meta, 1, &r);
    if (rc != MPI_SUCCESS) return mpi_fail(rc, "MPI_Bcast", err);
    bp_trace_set_origin(trace, strcmp(zero.host, mine.host) == 0 ? zero.now : bp_now());
    return BP_OK;
}

/* Rank 0 makes the folder of the trace file, so that a bad path fails now. */
static bp_status make_folder(const char *path, bp_err *err) {
    char dir[BP_PATH_MAX];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash || slash == dir) return BP_OK;
    *slash = '\0';
    return bp_mkdir_p(dir, err) ? bp_err_context(err, "option --trace") : BP_OK;
}

/* The trace exists on every rank or on none: the ranks agree before using it. */
bp_status bp_trace_file_start(const bp_trace_job *j, size_t events, bp_trace **out, bp_err *err) {
    *out = NULL;
    if (!j->path[0]) return BP_OK;
    bp_trace *trace = NULL;
    bp_status rc = bp_trace_create(events, &trace, err);
    if (rc == BP_OK && j->rank == 0) rc = make_folder(j->path, err);
    float bad = rc ? 1.0f : 0.0f;
    bp_status mrc = j->size > 1 ? bp_allreduce_sum(j->meta, &bad, 1) : BP_OK;
    if (mrc || bad) {
        bp_trace_destroy(trace);
        if (rc) return rc;
        return bp_comm_fail(j->meta, mrc, err); /* BP_OK when another rank failed: the caller's agreement tells */
    }
    bp_trace_set_dilation(trace, j->dilation);
    const bp_grid *g = j->grid;
    bp_comm *groups[] = {g->dp_comm, g->pp_comm, g->tp_comm, g->embed_comm};
    for (size_t i = 0; i < sizeof groups / sizeof groups[0]; i++)
        if (groups[i]) bp_comm_set_trace(groups[i], trace);
    *out = trace;
    return common_origin(j, trace, err);
}

/* A send to rank 0 and a receive, on the bookkeeping group's communicator, whose
 * waits sleep (bp_comm_mpi_wait): the ranks wait their turn without burning a core. */
static int send_sleeping(const bp_comm *g, const void *buf, int n, MPI_Datatype type) {
    MPI_Request r;
    int rc = MPI_Isend(buf, n, type, 0, TAG_TRACE, bp_comm_mpi(g), &r);
    return rc == MPI_SUCCESS ? bp_comm_mpi_wait(g, 1, &r) : rc;
}
static int recv_sleeping(const bp_comm *g, void *buf, int n, MPI_Datatype type, int from) {
    MPI_Request r;
    int rc = MPI_Irecv(buf, n, type, from, TAG_TRACE, bp_comm_mpi(g), &r);
    return rc == MPI_SUCCESS ? bp_comm_mpi_wait(g, 1, &r) : rc;
}

static bp_status send_text(const bp_comm *g, const char *s, unsigned long long n, bp_err *err) {
    for (unsigned long long at = 0; at < n; at += CHUNK) {
        int k = (int)(n - at < CHUNK ? n - at : CHUNK);
        int rc = send_sleeping(g, s + at, k, MPI_CHAR);
        if (rc != MPI_SUCCESS) return mpi_fail(rc, "MPI_Send", err);
    }
    return BP_OK;
}

static bp_status recv_text(const bp_comm *g, int from, char *s, unsigned long long n, bp_err *err) {
    for (unsigned long long at = 0; at < n; at += CHUNK) {
        int k = (int)(n - at < CHUNK ? n - at : CHUNK);
        int rc = recv_sleeping(g, s + at, k, MPI_CHAR, from);
        if (rc != MPI_SUCCESS) return mpi_fail(rc, "MPI_Recv", err);
    }
    return BP_OK;
}

/* Rank 0: every rank's text into f (NULL after a failure to write: the texts are
 * still received, so that no rank is left blocked in a send). */
static bp_status gather_into(const bp_comm *g, int size, FILE *f, const char *own, size_t own_n,
                             unsigned long long *dropped, bp_err *err) {
    if (f) fwrite(own, 1, own_n, f);
    for (int r = 1; r < size; r++) {
        unsigned long long head[2];
        int rc = recv_sleeping(g, head, 2, MPI_UNSIGNED_LONG_LONG, r);
        if (rc != MPI_SUCCESS) return mpi_fail(rc, "MPI_Recv", err);
        dropped[r] = head[1];
        char *s = malloc(head[0] ? head[0] : 1);
        if (!s)
            return bp_fail(err, BP_ENOMEM, "--trace: cannot hold rank %d's %llu bytes", r, head[0]);
        rc = recv_text(g, r, s, head[0], err);
        if (rc == BP_OK && f && head[0]) {
            fputs(",\n", f);
            fwrite(s, 1, head[0], f);
        }
        free(s);
        if (rc) return rc;
    }
    return BP_OK;
}

static void write_tail(FILE *f, int size, size_t cap, const unsigned long long *dropped,
                       double dilation) {
    fprintf(f, "\n],\n\"displayTimeUnit\":\"ms\",\n\"otherData\":{\"producer\":\"bagpipe\","
               "\"ranks\":%d,\"events_per_rank\":%zu,\"dropped_events\":[",
            size, cap);
    for (int r = 0; r < size; r++) fprintf(f, "%s%llu", r ? "," : "", dropped[r]);
    fprintf(f, "]");
    if (dilation > 1)
        fprintf(f, ",\"dilation\":%.9g,\"times\":\"emulated device: wall time / dilation\"",
                dilation);
    fprintf(f, "}}\n");
}

/* Rank 0: the whole file under a temporary name, then renamed over path. own is
 * NULL when rank 0 could not format its events: the others' are still received. */
static bp_status write_rank0(const bp_trace_job *j, bp_trace *trace, const char *own,
                             size_t own_n, bp_err *err) {
    const char *path = j->path;
    const bp_comm *g = j->meta;
    char tmp[BP_PATH_MAX + 32];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    bp_remove_stale_temps(path);
    unsigned long long *dropped = calloc((size_t)j->size, sizeof *dropped);
    if (!dropped) return bp_fail(err, BP_ENOMEM, "out of memory");
    dropped[0] = bp_trace_dropped(trace);
    FILE *f = own ? fopen(tmp, "w") : NULL;
    int saved = errno;
    if (f) fputs("{\"traceEvents\":[\n", f);
    bp_status rc = gather_into(g, j->size, f, own, own_n, dropped, err);
    if (f) write_tail(f, j->size, bp_trace_cap(trace), dropped, j->dilation);
    free(dropped);
    bool bad = !f;
    if (f) {
        bad = fflush(f) != 0 || fsync(fileno(f)) != 0;
        if (bad) saved = errno;
        if (fclose(f) != 0 && !bad) bad = true, saved = errno;
        /* Checked before training and again now: what took the name
         * meanwhile is not replaced either. */
        if (!bad && rc == BP_OK && bp_check_output(path, &bp_trace_file_kind, err))
            rc = bp_err_context(err, "option --trace");
        if (!bad && rc == BP_OK && rename(tmp, path) != 0) bad = true, saved = errno;
        if (bad || rc) unlink(tmp);
    }
    if (rc == BP_OK && bad && own)
        rc = bp_fail(err, BP_EIO, "option --trace: cannot write %s: %s", path, strerror(saved));
    return rc;
}

static bp_status gather_and_write(const bp_trace_job *j, bp_trace *trace, bp_err *err) {
    char name[160];
    snprintf(name, sizeof name, "rank %d (stage %d, replica %d, tp %d)", j->rank, j->grid->p,
             j->grid->d, j->grid->t);
    char *text = NULL;
    size_t n = 0;
    bp_status rc = bp_trace_format(trace, j->rank, name, &text, &n, err);
    if (j->rank == 0) {
        bp_err werr;
        bp_status wrc = write_rank0(j, trace, rc ? NULL : text, n, rc ? &werr : err);
        rc = rc ? rc : wrc;
    } else {
        unsigned long long head[2] = {rc ? 0 : n, bp_trace_dropped(trace)};
        int mrc = send_sleeping(j->meta, head, 2, MPI_UNSIGNED_LONG_LONG);
        if (mrc != MPI_SUCCESS) rc = mpi_fail(mrc, "MPI_Send", err);
        else if (text) rc = send_text(j->meta, text, n, err);
    }
    free(text);
    return rc;
}

bp_status bp_trace_file_write(const bp_trace_job *j, bp_trace *trace, bp_status rc,
                              bool *stopped_together, bp_err *err) {
    if (!trace || !(rc == BP_OK || *stopped_together)) return rc;
    bp_err own = {0};
    bp_status wrc = gather_and_write(j, trace, &own);
    /* Every rank learns whether the file was written, so that all end alike. */
    float bad = wrc ? 1.0f : 0.0f;
    bp_status mrc = j->size > 1 ? bp_allreduce_sum(j->meta, &bad, 1) : BP_OK;
    if (mrc && rc) return rc;
    if (mrc) return bp_comm_fail(j->meta, mrc, err);
    if (rc) return rc; /* the reason the run stopped comes first */
    if (bad == 0) return BP_OK;
    *stopped_together = true;
    if (wrc) {
        *err = own;
        return wrc;
    }
    bp_err_clear(err);
    return BP_EIO;
}
