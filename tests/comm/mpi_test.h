/* Helpers of the multi-rank tests of comm/.
 *
 * Every rank runs the same cmocka tests. Inputs are functions of (rank, index),
 * so each rank can compute every other rank's input and the exact answer by
 * itself. Agreement across ranks is checked with MPI on MPI_COMM_WORLD directly,
 * independent of the code under test. A test that fails on one rank leaves the
 * others in a collective; the watchdog then ends the job with a line that says
 * where, instead of a silent hang until the test runner's timeout. */
#ifndef BP_TESTS_COMM_MPI_TEST_H
#define BP_TESTS_COMM_MPI_TEST_H

#include <math.h>
#include <mpi.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "bagpipe/comm.h"
#include "bagpipe/comm_mpi.h"

static bp_comm *world;
static int me, nranks;

/* Buffer lengths of the issue: 1, 7, 4099 (none a multiple of 2, 3 or 4). */
static const size_t LENGTHS[] = {1, 7, 4099};
#define NLENGTHS (sizeof LENGTHS / sizeof LENGTHS[0])
#define BIG 1000003 /* about 10^6, prime */

/* Ways to run a group: the paths, emulation (which forces our own path even
 * when the MPI path is chosen) and hierarchy with 2-rank "nodes". */
typedef struct config {
    const char *name;
    bp_path path;
    const char *net;
    int node_size; /* 0: flat */
    double poll_s; /* bp_comm_set_poll */
} config;

static const config CONFIGS[] = {
    {"own", BP_PATH_OWN, NULL, 0, 0},
    {"mpi", BP_PATH_MPI, NULL, 0, 0},
    {"emulated-polling", BP_PATH_MPI, "bw=100Gbit,lat=20us", 0, 20e-6},
    {"hier", BP_PATH_OWN, NULL, 2, 0},
    {"hier-mpi", BP_PATH_MPI, NULL, 2, 0},
};
#define NCONFIGS (sizeof CONFIGS / sizeof CONFIGS[0])

static inline bp_comm *group_for(const config *cfg) {
    bp_comm *g = NULL;
    assert_int_equal(bp_comm_dup(world, cfg->name, &g), BP_OK);
    assert_int_equal(bp_comm_set_path(g, cfg->path), BP_OK);
    assert_int_equal(bp_comm_set_net(g, cfg->net), BP_OK);
    assert_int_equal(bp_comm_set_poll(g, cfg->poll_s), BP_OK);
    if (cfg->node_size) assert_int_equal(bp_comm_set_hierarchical(g, true, cfg->node_size), BP_OK);
    return g;
}

static inline void group_done(bp_comm *g) {
    assert_int_equal(bp_comm_set_net(g, NULL), BP_OK);
    assert_int_equal(bp_comm_destroy(g), BP_OK);
}

/* A value in [-1, 1) that depends on (rank, i, salt) only. */
static inline float value_of(int r, size_t i, uint64_t salt) {
    uint64_t z = (uint64_t)i * 0x9E3779B97F4A7C15ull + (uint64_t)r * 0xBF58476D1CE4E5B9ull + salt;
    z ^= z >> 31;
    z *= 0x94D049BB133111EBull;
    z ^= z >> 29;
    return (float)((double)(z >> 11) * 0x1.0p-52 - 1.0);
}

/* A small integer, so that sums of a few are exact in float. */
static inline float int_of(int r, size_t i) {
    return (float)((int)((i * 7 + (size_t)r * 13) % 17) - 8);
}

static inline float *floats(size_t n) {
    float *x = malloc((n ? n : 1) * sizeof *x);
    assert_non_null(x);
    return x;
}

static inline uint64_t hash_of(const void *p, size_t bytes) {
    const unsigned char *b = p;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < bytes; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

/* The same bytes on every rank of the world. */
static inline void assert_same_everywhere(const void *p, size_t bytes) {
    uint64_t h = hash_of(p, bytes), lo, hi;
    MPI_Allreduce(&h, &lo, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&h, &hi, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
    assert_true(lo == hi);
}

static inline void assert_all_ranks_true(int ok) {
    int all = 0;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    assert_true(all);
}

/* Start MPI through the library, run the tests, finalize. */
static inline int run_mpi_tests(int argc, char **argv, const char *name,
                                const struct CMUnitTest *tests, size_t count) {
    bp_err err;
    if (bp_comm_init(&argc, &argv, &world, &err) != BP_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    me = bp_comm_rank(world);
    nranks = bp_comm_size(world);
    bp_comm_set_timeout(world, 30);
    int failed = _cmocka_run_group_tests(name, tests, count, NULL, NULL);
    int any = 0;
    MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (bp_comm_finalize(world) != BP_OK) return 1;
    return any ? 1 : 0;
}

#endif
