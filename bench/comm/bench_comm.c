/* bagpipe communication benchmark, one run under mpiexec, printing side by side:
 *   1. our C_FP_S (ring allreduce average) against MPI_Allreduce, 4 KB to 64 MB
 *      (target: at least 0.9 of MPI's throughput from 1 MB up);
 *   2. MinMaxUInt8 encode + decode throughput against memcpy of the same floats
 *      (target: at least 0.5 of memcpy), on rank 0;
 *   3. PowerSGD compression time against the matrix products it is made of, on
 *      rank 0.
 * Every number is the median of repeated runs; the two sides of a comparison
 * alternate run by run so that both see the same machine.
 * Usage: mpiexec -np N bench_comm [max_mb [allreduce]] (allreduce: the first part only) */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bagpipe/comm.h"
#include "bagpipe/comm_mpi.h"
#include "compress/codec.h"
#include "core/blas.h"
#include "core/buf.h"
#include "core/rng.h"
#include "core/timer.h"

static int me, nranks;

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *t, int n) {
    qsort(t, (size_t)n, sizeof *t, cmp_double);
    return n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2;
}

static void die(const char *what, bp_comm *c) {
    fprintf(stderr, "bench_comm: %s: %s\n", what, c ? bp_comm_errmsg(c) : "");
    MPI_Abort(MPI_COMM_WORLD, 1);
}

/* The slowest rank's time of one run of f, started together. */
typedef void (*run_fn)(void *arg);

static double time_once(run_fn f, void *arg, MPI_Comm mpi) {
    MPI_Barrier(mpi);
    double t0 = bp_now();
    f(arg);
    double t = bp_now() - t0, slowest;
    MPI_Allreduce(&t, &slowest, 1, MPI_DOUBLE, MPI_MAX, mpi);
    return slowest;
}

typedef struct ar_arg {
    bp_comm *c;
    MPI_Comm mpi;
    float *x;
    size_t n;
} ar_arg;

static void ours(void *p) {
    ar_arg *a = p;
    if (bp_allreduce_avg(a->c, a->x, a->n) != BP_OK) die("allreduce", a->c);
}

static void theirs(void *p) {
    ar_arg *a = p;
    MPI_Allreduce(MPI_IN_PLACE, a->x, (int)a->n, MPI_FLOAT, MPI_SUM, a->mpi);
}

static void bench_allreduce(bp_comm *world, size_t max_bytes) {
    MPI_Comm mpi;
    MPI_Comm_dup(MPI_COMM_WORLD, &mpi);
    float *x = bp_alloc(max_bytes);
    for (size_t i = 0; i < max_bytes / sizeof *x; i++) x[i] = (float)(i % 97) * 0.01f;
    if (me == 0)
        printf("\nC_FP_S (our ring allreduce) vs MPI_Allreduce, %d ranks; GB/s = bytes / time\n"
               "%10s %11s %11s %10s %10s %7s\n",
               nranks, "bytes", "ours ms", "MPI ms", "ours GB/s", "MPI GB/s", "ratio");
    for (size_t bytes = 4096; bytes <= max_bytes; bytes *= 4) {
        /* About 512 MB per side and size, at least 11 runs: the machine is shared. */
        int reps = (int)(512.0 * 1024 * 1024 / (double)bytes);
        reps = reps < 11 ? 11 : reps > 300 ? 300 : reps;
        double *t_ours = malloc(2 * (size_t)reps * sizeof *t_ours), *t_mpi = t_ours + reps;
        ar_arg a = {world, mpi, x, bytes / sizeof *x};
        ours(&a), theirs(&a); /* warm up */
        for (int r = 0; r < reps; r++) {
            t_ours[r] = time_once(ours, &a, mpi);
            t_mpi[r] = time_once(theirs, &a, mpi);
        }
        double o = median(t_ours, reps), m = median(t_mpi, reps);
        if (me == 0)
            printf("%10zu %11.3f %11.3f %10.2f %10.2f %7.2f\n", bytes, o * 1e3, m * 1e3,
                   (double)bytes / o / 1e9, (double)bytes / m / 1e9, m / o);
        free(t_ours);
    }
    bp_free(x);
    MPI_Comm_free(&mpi);
}

/* --- rank 0 alone -------------------------------------------------------------------- */

typedef struct codec_arg {
    bp_codec *codec;
    float *x, *y;
    unsigned char *wire;
    size_t n;
} codec_arg;

static void copy(void *p) {
    codec_arg *a = p;
    memcpy(a->y, a->x, a->n * sizeof *a->x);
}

static void roundtrip(void *p) {
    codec_arg *a = p;
    if (bp_codec_encode(a->codec, a->x, a->n, a->wire, NULL) != BP_OK ||
        bp_codec_decode(a->codec, a->wire, a->n, a->y, NULL) != BP_OK)
        die("minmax_u8", NULL);
}

/* Median times of f and g, alternating, reps times each. */
static void compare(run_fn f, run_fn g, void *arg, int reps, double *tf, double *tg) {
    double *a = malloc(2 * (size_t)reps * sizeof *a), *b = a + reps;
    f(arg), g(arg);
    for (int r = 0; r < reps; r++) {
        double t0 = bp_now();
        f(arg);
        double t1 = bp_now();
        g(arg);
        a[r] = t1 - t0;
        b[r] = bp_now() - t1;
    }
    *tf = median(a, reps);
    *tg = median(b, reps);
    free(a);
}

/* Each version of the codec's loops this machine has (the fastest is the one
 * bp_codec_minmax_u8_create picks), side by side with memcpy. */
static void bench_minmax(void) {
    printf("\nMinMaxUInt8 encode + decode vs memcpy of the floats (rank 0); GB/s of float data\n"
           "%10s %6s %12s %12s %7s\n",
           "bytes", "isa", "memcpy GB/s", "codec GB/s", "ratio");
    const char *isas[] = {"plain", "sse2", "avx2"};
    for (size_t bytes = 256 * 1024; bytes <= 64u << 20; bytes *= 16)
        for (int v = 0; v < 3; v++) {
            codec_arg a = {.n = bytes / sizeof(float)};
            if (bp_codec_minmax_u8_new_isa(isas[v], &a.codec, NULL) != BP_OK) continue;
            a.x = bp_alloc(bytes), a.y = bp_alloc(bytes),
            a.wire = bp_alloc(bp_codec_encoded_size(a.codec, a.n));
            bp_rng rng;
            bp_rng_seed(&rng, 1, 0);
            for (size_t i = 0; i < a.n; i++) a.x[i] = (float)bp_rng_normal(&rng);
            double tc, tr;
            compare(copy, roundtrip, &a, bytes > (8u << 20) ? 15 : 101, &tc, &tr);
            printf("%10zu %6s %12.2f %12.2f %7.2f\n", bytes, isas[v], (double)bytes / tc / 1e9,
                   (double)bytes / tr / 1e9, tc / tr);
            bp_free(a.x), bp_free(a.y), bp_free(a.wire);
            bp_codec_destroy(a.codec);
        }
}

typedef struct psgd_arg {
    bp_codec *codec;
    int rows, cols, rank;
    float *g, *m, *p, *q, *wire;
} psgd_arg;

static void compress(void *v) {
    psgd_arg *a = v;
    if (bp_codec_encode(a->codec, a->g, (size_t)a->rows * a->cols, a->wire, NULL) != BP_OK)
        die("powersgd", NULL);
}

/* The three products of one compression: P = M Q, Q = M^T P, M -= P Q^T. */
static void products(void *v) {
    psgd_arg *a = v;
    int R = a->rows, C = a->cols, K = a->rank;
    bp_sgemm(false, false, R, K, C, 1, a->m, C, a->q, K, 0, a->p, K);
    bp_sgemm(true, false, C, K, R, 1, a->m, C, a->p, K, 0, a->q, K);
    bp_sgemm(false, true, R, C, K, -1, a->p, K, a->q, K, 1, a->m, C);
}

static void bench_powersgd(void) {
    printf("\nPowerSGD compression vs its three matrix products (rank 0, 1 BLAS thread)\n"
           "%12s %5s %14s %13s %7s\n",
           "shape", "rank", "compress ms", "products ms", "ratio");
    const int shapes[][3] = {{768, 768, 4}, {3072, 768, 4}, {1024, 1024, 16}};
    for (size_t s = 0; s < 3; s++) {
        psgd_arg a = {.rows = shapes[s][0], .cols = shapes[s][1], .rank = shapes[s][2]};
        size_t n = (size_t)a.rows * a.cols;
        bp_codec_powersgd_create((size_t)a.rows, (size_t)a.cols, a.rank, 1, &a.codec, NULL);
        a.g = bp_alloc(n * sizeof(float)), a.m = bp_alloc(n * sizeof(float));
        a.p = bp_alloc((size_t)a.rows * a.rank * sizeof(float));
        a.q = bp_alloc((size_t)a.cols * a.rank * sizeof(float));
        a.wire = bp_alloc(bp_codec_encoded_size(a.codec, n));
        bp_rng rng;
        bp_rng_seed(&rng, 2, 0);
        for (size_t i = 0; i < n; i++) a.g[i] = a.m[i] = (float)bp_rng_normal(&rng) * 1e-3f;
        for (size_t i = 0; i < (size_t)a.cols * a.rank; i++) a.q[i] = (float)bp_rng_normal(&rng);
        double tc, tp;
        compare(compress, products, &a, 21, &tc, &tp);
        char shape[32];
        snprintf(shape, sizeof shape, "%dx%d", a.rows, a.cols);
        printf("%12s %5d %14.3f %13.3f %7.2f\n", shape, a.rank, tc * 1e3, tp * 1e3, tp / tc);
        bp_free(a.g), bp_free(a.m), bp_free(a.p), bp_free(a.q), bp_free(a.wire);
        bp_codec_destroy(a.codec);
    }
}

/* The other ranks wait without spinning, so that rank 0 has the cores. */
static void quiet_barrier(void) {
    MPI_Request req;
    MPI_Ibarrier(MPI_COMM_WORLD, &req);
    int done = 0;
    while (MPI_Test(&req, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && !done)
        bp_sleep_until(bp_now() + 0.001);
}

int main(int argc, char **argv) {
    bp_comm *world;
    bp_err err;
    if (bp_comm_init(&argc, &argv, &world, &err) != BP_OK) {
        fprintf(stderr, "bench_comm: %s\n", err.msg);
        return 1;
    }
    me = bp_comm_rank(world);
    nranks = bp_comm_size(world);
    bp_blas_set_threads(1);
    size_t max_mb = argc > 1 ? (size_t)atoi(argv[1]) : 64;
    if (me == 0) {
        char version[MPI_MAX_LIBRARY_VERSION_STRING];
        int len;
        MPI_Get_library_version(version, &len);
        printf("bagpipe comm benchmark: %d ranks; %.*s\n", nranks, (int)strcspn(version, "\n,"),
               version);
    }
    bench_allreduce(world, max_mb << 20);
    bool allreduce_only = argc > 2 && !strcmp(argv[2], "allreduce");
    if (me == 0 && !allreduce_only) {
        bench_minmax();
        bench_powersgd();
    }
    quiet_barrier();
    bp_comm_finalize(world);
    return 0;
}
