/* Average a buffer over all ranks with bagpipe's communication library, using
 * only its public headers: the full-precision allreduce (C_FP_S), then the same
 * with MinMaxUInt8-compressed traffic (C_LP_S), and print how far apart the two
 * are and what each cost in messages, bytes and time.
 *
 *   mpirun -np 4 build/examples/comm_average [floats [net]]
 *
 * floats defaults to 1000000; net is a network emulation spec such as
 * "bw=1Gbit,lat=1ms" (see bagpipe/comm.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "bagpipe/bagpipe.h"

/* A failure on one rank leaves the others in a collective: report and end the job. */
static void check(int rc, bp_comm *c, const char *what) {
    if (rc == BP_OK) return;
    fprintf(stderr, "comm_average: %s: %s\n", what, bp_comm_errmsg(c));
    bp_comm_abort(c, bp_exit_code(rc));
}

static void print_stats(bp_comm *c) {
    bp_stats st;
    check(bp_comm_stats(c, &st, false), c, "stats");
    printf("%-24s %6s %9s %10s %10s %11s\n", "operation", "calls", "messages", "MB sent", "MB recv",
           "ms blocked");
    for (int op = 0; op < BP_OP_COUNT; op++) {
        const bp_op_stats *s = &st.op[op];
        if (s->calls)
            printf("%-24s %6llu %9llu %10.3f %10.3f %11.3f\n", bp_op_name((bp_op)op),
                   (unsigned long long)s->calls, (unsigned long long)s->messages,
                   (double)s->bytes_sent / 1e6, (double)s->bytes_recv / 1e6, s->blocked_s * 1e3);
    }
}

int main(int argc, char **argv) {
    bp_comm *world;
    bp_err err;
    if (bp_comm_init(&argc, &argv, &world, &err) != BP_OK) {
        fprintf(stderr, "comm_average: %s\n", err.msg);
        return 1;
    }
    int rank = bp_comm_rank(world), size = bp_comm_size(world);
    size_t n = argc > 1 ? strtoul(argv[1], NULL, 10) : 1000000;
    if (argc > 2) check(bp_comm_set_net(world, argv[2]), world, "--net");

    float *full = malloc(n * sizeof *full), *low = malloc(n * sizeof *low);
    bp_codec *u8 = NULL;
    if (!full || !low || bp_codec_minmax_u8_create(&u8, &err) != BP_OK) {
        fprintf(stderr, "comm_average: out of memory\n");
        bp_comm_abort(world, 1);
    }
    for (size_t i = 0; i < n; i++) full[i] = low[i] = sinf(0.001f * (float)i + (float)rank);

    check(bp_allreduce_avg(world, full, n), world, "C_FP_S");
    check(bp_allreduce_avg_lp(world, low, n, u8), world, "C_LP_S");

    double worst = 0;
    for (size_t i = 0; i < n; i++) worst = fmax(worst, fabs((double)low[i] - full[i]));
    if (rank == 0) {
        printf("%d ranks averaged %zu floats\n", size, n);
        printf("C_LP_S (MinMaxUInt8) differs from C_FP_S by at most %.5f\n\n", worst);
        print_stats(world);
    }
    bp_codec_destroy(u8);
    free(full);
    free(low);
    return bp_comm_finalize(world) == BP_OK ? 0 : 1;
}
