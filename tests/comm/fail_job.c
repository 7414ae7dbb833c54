/* A job that fails on purpose, for tests/comm/fail_job.sh.
 *   fail_job hang <seconds>: every rank but the last enters an allreduce of group
 *     "dp" that the last rank never joins; the watchdog (timeout <seconds>) must
 *     end the job after one line naming the rank, the group and the operation.
 *   fail_job abort <code>: rank 0 ends the whole job with bp_comm_abort(code)
 *     while the others wait in a barrier.
 * Exit code 3 means that neither happened. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bagpipe/comm.h"
#include "core/timer.h"

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
