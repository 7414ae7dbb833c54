/* A job that hangs on purpose, for the watchdog test: every rank but the last
 * enters an allreduce of group "dp" that the last rank never joins. With the
 * watchdog timeout given as argv[1] (seconds) the job must end with MPI_Abort
 * after one line naming the rank, the group and the operation. Exit code 3 means
 * the watchdog did not fire. */
#include <stdio.h>
#include <stdlib.h>

#include "bagpipe/comm.h"
#include "core/timer.h"

int main(int argc, char **argv) {
    bp_comm *world = NULL, *dp = NULL;
    bp_err err;
    if (argc != 2 || bp_comm_init(&argc, &argv, &world, &err) != BP_OK) return 2;
    if (bp_comm_split(world, 0, bp_comm_rank(world), "dp", &dp) != BP_OK ||
        bp_comm_set_timeout(world, atof(argv[1])) != BP_OK)
        return 2;
    static float x[4099];
    if (bp_comm_rank(world) == bp_comm_size(world) - 1)
        bp_sleep_until(bp_now() + 30);
    else
        bp_allreduce_avg(dp, x, 4099);
    return 3;
}
