/* A job that fails on purpose, for tests/comm/fail_job.sh.
 *   fail_job hang <seconds>: every rank but the last enters an allreduce of group
 *     "dp" that the last rank never joins; the watchdog (timeout <seconds>) must
 *     end the job after one line naming the rank, the group and the operation.
 *   fail_job abort <code>: rank 0 ends the whole job with bp_comm_abort(code)
 *     while the others wait in a barrier.
 *   fail_job mismatch <op>: the ranks pass different counts to one collective
 *     (allreduce: 1000 floats on rank 0, 100000 on the others; bcast: rank 0 sends
 *     1000 floats into buffers of 5000), as a job whose ranks disagree on a
 *     model's size does, or call different ones (kind: allreduce on rank 0, bcast
 *     on the others; steps: the others one allreduce more, rank 0 a barrier
 *     instead); each rank that sees it prints its line and ends the job with
 *     bp_comm_abort(1).
 * Exit code 3 means that none of this happened. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bagpipe/comm.h"
#include "core/timer.h"

static bp_status mismatched_call(bp_comm *world, const char *op, float *x, size_t n) {
    int rank = bp_comm_rank(world);
    if (!strcmp(op, "bcast")) return bp_bcast(world, x, n, 0);
    if (!strcmp(op, "kind")) return rank ? bp_bcast(world, x, n, 0) : bp_allreduce_avg(world, x, n);
    if (!strcmp(op, "steps")) {
        bp_status rc = bp_allreduce_avg(world, x, n);
        return rc == BP_OK ? (rank ? bp_allreduce_avg(world, x, n) : bp_barrier(world)) : rc;
    }
    return bp_allreduce_avg(world, x, n);
}

static int mismatch(bp_comm *world, const char *op) {
    bp_comm_set_timeout(world, 30);
    int rank = bp_comm_rank(world);
    size_t n = !strcmp(op, "bcast") ? (rank ? 5000 : 1000)
               : !strcmp(op, "allreduce") ? (rank ? 100000 : 1000)
                                          : 1000;
    float *x = calloc(n, sizeof *x);
    if (!x) return 2;
    bp_status rc = mismatched_call(world, op, x, n);
    if (rc != BP_OK) {
        fprintf(stderr, "fail_job: %s\n", bp_comm_errmsg(world));
        bp_comm_abort(world, 1);
    }
    /* The root of a broadcast sends and goes on: it waits here for the abort. */
    bp_barrier(world);
    free(x);
    return 3;
}

int main(int argc, char **argv) {
    bp_comm *world = NULL, *dp = NULL;
    bp_err err;
    if (argc != 3 || bp_comm_init(&argc, &argv, &world, &err) != BP_OK) return 2;
    int rank = bp_comm_rank(world), last = bp_comm_size(world) - 1;
    if (!strcmp(argv[1], "abort")) {
        if (rank == 0) bp_comm_abort(world, atoi(argv[2]));
        bp_barrier(world);
        return 3;
    }
    if (!strcmp(argv[1], "mismatch")) return mismatch(world, argv[2]);
    if (bp_comm_split(world, 0, rank, "dp", &dp) != BP_OK ||
        bp_comm_set_timeout(world, atof(argv[2])) != BP_OK)
        return 2;
    static float x[4099];
    if (rank == last)
        bp_sleep_until(bp_now() + 30);
    else
        bp_allreduce_avg(dp, x, 4099);
    return 3;
}
