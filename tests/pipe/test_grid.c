/* The 3D grid (parallel/grid.c) on 2-4 ranks: for every factorization of the world
 * into dp x pp x tp, with and without a tied embedding, each rank's coordinates
 * follow rank = p * (dp * tp) + d * tp + t, and each axis's group holds exactly the
 * ranks that differ from it along that axis only, ordered by that coordinate (read
 * with MPI directly, not with the library's collectives). The embedding group joins
 * the first and last stage of each pipeline (first stage first), or with a fused
 * embedding sync those of every pipeline (first stages of d = 0.. first), and exists
 * only for a tied embedding with pp > 1. A world of another size is a usage error. */
#include <mpi.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "bagpipe/comm.h"
#include "bagpipe/comm_mpi.h"
#include "parallel/grid.h"

enum { MAX_W = 16 };

static bp_comm *world;
static int me, W;
/* The first thing found wrong on this rank. Ranks go on with the same collectives
 * after a problem and agree at the end of each case, so that a wrong grid fails the
 * test on every rank instead of leaving some waiting for others. */
static char problem[256];

static void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void note(const char *fmt, ...) {
    if (problem[0]) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(problem, sizeof problem, fmt, ap);
    va_end(ap);
}

/* Fails on every rank if any rank noted a problem. */
static void agree(void) {
    int bad = problem[0] != 0, any = 0;
    MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (bad) fail_msg("rank %d: %s", me, problem);
    if (any) fail_msg("rank %d: another rank found the grid wrong", me);
}

static int rank_of(int dp, int tp, int d, int p, int t) { return p * (dp * tp) + d * tp + t; }

/* The world ranks of group g in its own rank order; its size in *n. */
static void members(bp_comm *g, int *out, int *n) {
    MPI_Comm c = bp_comm_mpi(g);
    int size;
    MPI_Comm_size(c, &size);
    assert_true(size <= MAX_W);
    MPI_Allgather(&me, 1, MPI_INT, out, 1, MPI_INT, c);
    *n = size;
}

static void expect_group(bp_comm *g, const char *axis, const int *want, int n, int my_index,
                         const char *case_name) {
    if (!g) {
        note("%s: no %s group", case_name, axis);
        return;
    }
    int got[MAX_W], m;
    members(g, got, &m);
    if (m != n) note("%s: %s group has %d ranks, expected %d", case_name, axis, m, n);
    for (int i = 0; i < n && i < m; i++)
        if (got[i] != want[i])
            note("%s: %s group rank %d is world rank %d, expected %d", case_name, axis, i, got[i],
                 want[i]);
    if (bp_comm_rank(g) != my_index || bp_comm_size(g) != n)
        note("%s: rank %d of %d in the %s group, expected %d of %d", case_name, bp_comm_rank(g),
             bp_comm_size(g), axis, my_index, n);
}

static void check_grid(int dp, int pp, int tp, bool tied, bool fused) {
    char name[64];
    snprintf(name, sizeof name, "dp %d x pp %d x tp %d%s%s", dp, pp, tp, tied ? ", tied" : "",
             fused ? ", fused" : "");
    bp_grid g;
    bp_err err = {0};
    int rc = bp_grid_init(world, dp, pp, tp, tied, fused, &g, &err);
    if (rc != BP_OK) fail_msg("%s: %s", name, err.msg);
    int p = me / (dp * tp), d = me / tp % dp, t = me % tp;
    if (g.d != d || g.p != p || g.t != t || g.dp != dp || g.pp != pp || g.tp != tp)
        note("%s: coordinates (d %d, p %d, t %d), expected (%d, %d, %d)", name, g.d, g.p, g.t, d, p,
             t);
    int want[MAX_W];
    for (int i = 0; i < dp; i++) want[i] = rank_of(dp, tp, i, p, t);
    expect_group(g.dp_comm, "dp", want, dp, d, name);
    for (int i = 0; i < pp; i++) want[i] = rank_of(dp, tp, d, i, t);
    expect_group(g.pp_comm, "pp", want, pp, p, name);
    for (int i = 0; i < tp; i++) want[i] = rank_of(dp, tp, d, p, i);
    expect_group(g.tp_comm, "tp", want, tp, t, name);
    bool ends = tied && pp > 1 && (p == 0 || p == pp - 1);
    if (ends && fused) {
        for (int i = 0; i < dp; i++) {
            want[i] = rank_of(dp, tp, i, 0, t);
            want[dp + i] = rank_of(dp, tp, i, pp - 1, t);
        }
        expect_group(g.embed_comm, "embed", want, 2 * dp, (p == 0 ? 0 : dp) + d, name);
    } else if (ends) {
        want[0] = rank_of(dp, tp, d, 0, t);
        want[1] = rank_of(dp, tp, d, pp - 1, t);
        expect_group(g.embed_comm, "embed", want, 2, p == 0 ? 0 : 1, name);
    } else if (g.embed_comm) {
        note("%s: an embedding group on stage %d, where none belongs", name, p);
    }
    bp_grid_free(&g);
    agree();
}

static void test_every_factorization(void **state) {
    (void)state;
    int cases = 0;
    for (int tp = 1; tp <= W; tp++)
        for (int pp = 1; pp <= W; pp++)
            if (W % (tp * pp) == 0)
                for (int v = 0; v < 3; v++, cases++)
                    check_grid(W / (tp * pp), pp, tp, v > 0, v > 1);
    assert_true(cases >= 4);
}

static void test_wrong_size(void **state) {
    (void)state;
    bp_grid g;
    bp_err err = {0};
    assert_int_equal(bp_grid_init(world, W, 2, 1, true, false, &g, &err), BP_EUSAGE);
    char want[32];
    snprintf(want, sizeof want, "%d ranks", W);
    if (!strstr(err.msg, want)) fail_msg("message '%s' does not say '%s'", err.msg, want);
    assert_null(g.pp_comm);
    assert_int_equal(bp_grid_init(world, 1, W + 1, 1, false, false, &g, NULL), BP_EUSAGE);
}

int main(int argc, char **argv) {
    bp_err err;
    if (bp_comm_init(&argc, &argv, &world, &err) != BP_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    me = bp_comm_rank(world);
    W = bp_comm_size(world);
    bp_comm_set_timeout(world, 30);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_factorization),
        cmocka_unit_test(test_wrong_size),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    int any = 0;
    MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (bp_comm_finalize(world) != BP_OK) return 1;
    return any ? 1 : 0;
}
