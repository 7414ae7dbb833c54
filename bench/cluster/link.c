/* The network alone, without training's computation around it: median time of
 * our ring allreduce (C_FP_S) of 16 KB .. 4 MB on the ranks of this job, over
 * whatever carries the job's bytes, or emulated with --net's model when a spec
 * is given. compare.sh runs it on kernel-shaped hosts and emulated on the
 * loopback; the ratio of the two is the emulator's error on the transfer
 * itself. Usage: mpirun -np N bench_cluster_link [net spec, e.g. bw=100Mbit]
 * Prints: "<bytes> <median ms> <model ms>" per size on rank 0, where the model
 * is the time the emulator charges: 2 (N-1)/N x bytes x 8 / bw for the ring. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "bagpipe/comm.h"
#include "bagpipe/comm_mpi.h"
#include "core/timer.h"

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    bp_comm *world = NULL;
    bp_err err;
    if (bp_comm_init(&argc, &argv, &world, &err) != BP_OK) {
        fprintf(stderr, "bench_cluster_link: %s\n", err.msg);
        return 1;
    }
    const char *spec = argc > 1 ? argv[1] : "";
    bp_net net;
    if (bp_net_parse(spec, &net, &err) != BP_OK || bp_comm_set_net(world, spec) != BP_OK) {
        fprintf(stderr, "bench_cluster_link: %s\n", err.msg);
        return 2;
    }
    int me = bp_comm_rank(world), w = bp_comm_size(world);
    enum { REPS = 9 };
    static float x[1 << 20];
    for (size_t bytes = 16384; bytes <= sizeof x; bytes *= 4) {
        size_t n = bytes / sizeof(float);
        double t[REPS];
        for (int r = 0; r < REPS; r++) {
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = bp_now();
            if (bp_allreduce_avg(world, x, n) != BP_OK) {
                fprintf(stderr, "bench_cluster_link: %s\n", bp_comm_errmsg(world));
                MPI_Abort(MPI_COMM_WORLD, 1);
            }
            double mine = bp_now() - t0;
            MPI_Allreduce(&mine, &t[r], 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        }
        qsort(t, REPS, sizeof *t, cmp_double);
        double model = net.bw_bps > 0 ? 2.0 * (w - 1) / w * (double)bytes * 8 / net.bw_bps : 0;
        if (me == 0)
            printf("%zu %.2f %.2f\n", bytes, t[REPS / 2] * 1e3, model * 1e3);
    }
    bp_comm_finalize(world);
    return 0;
}
