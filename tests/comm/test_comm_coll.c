/* comm/ on 1 to 4 ranks: point-to-point (blocking, non-blocking, tags), barrier,
 * broadcast from every root, reduce-scatter, allgather and all-to-all on lengths
 * that do not divide evenly, on our own path, MPI's and under emulation; groups,
 * names, error lines and the counters. */
#include "mpi_test.h"

#include "core/timer.h"

/* The basic collectives have no hierarchical form: the first three configs. */
#define NFLAT 3

static void test_p2p(void **state) {
    (void)state;
    int right = (me + 1) % nranks, left = (me - 1 + nranks) % nranks;
    for (size_t c = 0; c < NFLAT; c++) {
        bp_comm *g = group_for(&CONFIGS[c]);
        for (size_t k = 0; k < NLENGTHS; k++) {
            size_t n = LENGTHS[k];
            float *out = floats(n), *neg = floats(n), *in = floats(n), *in2 = floats(n);
            for (size_t i = 0; i < n; i++) out[i] = value_of(me, i, 1), neg[i] = -out[i];
            if (nranks > 1) {
                /* Blocking: even ranks send first, odd ranks receive first. */
                if (me % 2 == 0) assert_int_equal(bp_send(g, out, n, right, 7), BP_OK);
                assert_int_equal(bp_recv(g, in, n, left, 7), BP_OK);
                if (me % 2 == 1) assert_int_equal(bp_send(g, out, n, right, 7), BP_OK);
                for (size_t i = 0; i < n; i++) assert_true(in[i] == value_of(left, i, 1));
            }
            /* Non-blocking, two tags sent in the other order (to oneself on 1 rank). */
            bp_request *req[4];
            assert_int_equal(bp_irecv(g, in2, n, left, 3, &req[0]), BP_OK);
            assert_int_equal(bp_irecv(g, in, n, left, BP_TAG_MAX, &req[1]), BP_OK);
            assert_int_equal(bp_isend(g, out, n, right, BP_TAG_MAX, &req[2]), BP_OK);
            assert_int_equal(bp_isend(g, neg, n, right, 3, &req[3]), BP_OK);
            assert_int_equal(bp_wait(&req[0]), BP_OK);
            assert_null(req[0]);
            assert_int_equal(bp_waitall(req + 1, 3), BP_OK);
            for (size_t i = 0; i < n; i++) {
                assert_true(in[i] == value_of(left, i, 1));
                assert_true(in2[i] == -value_of(left, i, 1));
            }
            free(out), free(neg), free(in), free(in2);
        }
        group_done(g);
    }
}

/* The last rank enters the second barrier 30 ms late; every rank must leave it
 * after that moment. Measuring 30 ms from each rank's own exit of the first barrier
 * is not enough: ranks leave a barrier at different times, and on loaded cores a
 * rank descheduled there for a few scheduler ticks starts its clock that much later
 * (seen with MPICH, whose waiting ranks poll, on 4 ranks over 2 busy cores: 8 ms).
 * So the last rank's entry time is compared instead; CLOCK_MONOTONIC is the same
 * clock in every process of the one machine the tests run on, and the time is sent
 * with MPI on MPI_COMM_WORLD, independent of the code under test. */
static void test_barrier_waits_for_the_last(void **state) {
    (void)state;
    for (size_t c = 0; c < NFLAT; c++) {
        bp_comm *g = group_for(&CONFIGS[c]);
        assert_int_equal(bp_barrier(g), BP_OK);
        double entered = bp_now();
        if (me == nranks - 1) {
            bp_sleep_until(entered + 0.03);
            entered = bp_now();
        }
        assert_int_equal(bp_barrier(g), BP_OK);
        double left = bp_now();
        assert_int_equal(MPI_Bcast(&entered, 1, MPI_DOUBLE, nranks - 1, MPI_COMM_WORLD), MPI_SUCCESS);
        assert_true(left >= entered);
        group_done(g);
    }
}

static void test_bcast_every_root(void **state) {
    (void)state;
    for (size_t c = 0; c < NFLAT; c++) {
        bp_comm *g = group_for(&CONFIGS[c]);
        for (size_t k = 0; k < NLENGTHS; k++) {
            size_t n = LENGTHS[k];
            float *x = floats(n);
            for (int root = 0; root < nranks; root++) {
                for (size_t i = 0; i < n; i++) x[i] = value_of(me, i, 2);
                assert_int_equal(bp_bcast(g, x, n, root), BP_OK);
                for (size_t i = 0; i < n; i++) assert_true(x[i] == value_of(root, i, 2));
            }
            free(x);
        }
        group_done(g);
    }
}

static void test_reduce_scatter_and_allgather(void **state) {
    (void)state;
    for (size_t c = 0; c < NFLAT; c++) {
        bp_comm *g = group_for(&CONFIGS[c]);
        for (size_t k = 0; k < NLENGTHS; k++) {
            size_t n = LENGTHS[k], off, len;
            float *x = floats(n);
            for (size_t i = 0; i < n; i++) x[i] = int_of(me, i);
            assert_int_equal(bp_reduce_scatter_sum(g, x, n), BP_OK);
            bp_chunk(n, nranks, me, &off, &len);
            for (size_t i = off; i < off + len; i++) {
                float sum = 0;
                for (int r = 0; r < nranks; r++) sum += int_of(r, i);
                assert_true(x[i] == sum);
            }
            /* allgather: each rank owns its chunk; the rest starts as garbage. */
            for (size_t i = 0; i < n; i++)
                x[i] = (i >= off && i < off + len) ? value_of(me, i, 3) : -7.0f;
            assert_int_equal(bp_allgather(g, x, n), BP_OK);
            for (int r = 0; r < nranks; r++) {
                size_t o, l;
                bp_chunk(n, nranks, r, &o, &l);
                for (size_t i = o; i < o + l; i++) assert_true(x[i] == value_of(r, i, 3));
            }
            free(x);
        }
        group_done(g);
    }
}

static void test_alltoall(void **state) {
    (void)state;
    for (size_t c = 0; c < NFLAT; c++) {
        bp_comm *g = group_for(&CONFIGS[c]);
        for (size_t k = 0; k < NLENGTHS; k++) {
            size_t count = LENGTHS[k], n = count * (size_t)nranks;
            float *send = floats(n), *recv = floats(n);
            /* Block j of rank r: value_of(r, j * count + i); rank j gets it as block r. */
            for (size_t i = 0; i < n; i++) send[i] = value_of(me, i, 4), recv[i] = -9.0f;
            assert_int_equal(bp_alltoall(g, send, recv, count), BP_OK);
            for (int j = 0; j < nranks; j++)
                for (size_t i = 0; i < count; i++)
                    assert_true(recv[j * count + i] == value_of(j, (size_t)me * count + i, 4));
            free(send), free(recv);
        }
        group_done(g);
    }
}

static void test_chunks_cover_the_buffer(void **state) {
    (void)state;
    const size_t ns[] = {0, 1, 7, 4099, BIG};
    for (size_t k = 0; k < 5; k++)
        for (int parts = 1; parts <= 5; parts++) {
            size_t next = 0, lo = SIZE_MAX, hi = 0;
            for (int i = 0; i < parts; i++) {
                size_t off, len;
                bp_chunk(ns[k], parts, i, &off, &len);
                assert_int_equal(off, next);
                next = off + len;
                lo = len < lo ? len : lo;
                hi = len > hi ? len : hi;
            }
            assert_int_equal(next, ns[k]);
            assert_true(hi - lo <= 1);
        }
}

static void test_groups_and_names(void **state) {
    (void)state;
    assert_string_equal(bp_comm_name(world), "world");
    bp_comm *half = NULL, *none = NULL;
    assert_int_equal(bp_comm_split(world, me % 2, -me, "dp", &half), BP_OK);
    assert_string_equal(bp_comm_name(half), "dp");
    assert_int_equal(bp_comm_size(half), (nranks - me % 2 + 1) / 2);
    /* key -rank reverses the order: the highest rank of the parity comes first. */
    int highest = (nranks - 1) - ((nranks - 1 - me % 2) % 2);
    assert_int_equal(bp_comm_rank(half), (highest - me) / 2);
    float x = (float)me;
    assert_int_equal(bp_allreduce_sum(half, &x, 1), BP_OK);
    float want = 0;
    for (int r = me % 2; r < nranks; r += 2) want += (float)r;
    assert_true(x == want);
    assert_int_equal(bp_comm_split(world, me == 0 ? 0 : BP_COLOR_NONE, 0, NULL, &none), BP_OK);
    if (me == 0) {
        assert_non_null(none);
        assert_string_equal(bp_comm_name(none), "world/0");
    } else {
        assert_null(none);
    }
    bp_comm *local = NULL, *leaders = NULL;
    assert_int_equal(bp_comm_split_node(world, 2, &local, &leaders), BP_OK);
    assert_int_equal(bp_comm_rank(local), me % 2);
    assert_int_equal(bp_comm_size(local), me / 2 * 2 + 2 <= nranks ? 2 : 1);
    assert_true((leaders != NULL) == (me % 2 == 0));
    if (leaders) assert_int_equal(bp_comm_rank(leaders), me / 2);
    bp_comm *shm_local = NULL, *shm_leaders = NULL;
    assert_int_equal(bp_comm_split_node(world, 0, &shm_local, &shm_leaders), BP_OK);
    assert_int_equal(bp_comm_size(shm_local), nranks); /* one machine */
    assert_true((shm_leaders != NULL) == (me == 0));
    bp_comm_destroy(shm_local), bp_comm_destroy(shm_leaders);
    bp_comm_destroy(local), bp_comm_destroy(leaders);
    bp_comm_destroy(half), bp_comm_destroy(none);
}

/* A group over a communicator the program made itself has its own settings. */
static void test_wrap(void **state) {
    (void)state;
    MPI_Comm odd_even;
    MPI_Comm_split(MPI_COMM_WORLD, me % 2, me, &odd_even);
    bp_comm *g = NULL;
    bp_err err;
    assert_int_equal(bp_comm_wrap(odd_even, "parity", &g, &err), BP_OK);
    MPI_Comm_free(&odd_even); /* the group holds a duplicate */
    int size = 0;
    MPI_Comm_size(bp_comm_mpi(g), &size);
    assert_int_equal(bp_comm_size(g), size);
    assert_int_equal(size, (nranks - me % 2 + 1) / 2);
    /* Emulation set on this world does not reach the other one. */
    assert_int_equal(bp_comm_set_net(g, "lat=1s"), BP_OK);
    float x = 1;
    assert_int_equal(bp_allreduce_sum(world, &x, 1), BP_OK);
    assert_true(x == (float)nranks);
    assert_int_equal(bp_comm_set_net(g, NULL), BP_OK);
    assert_int_equal(bp_allreduce_sum(g, &x, 1), BP_OK);
    assert_true(x == (float)(nranks * size));
    assert_int_equal(bp_comm_destroy(g), BP_OK);
}

static void test_error_lines(void **state) {
    (void)state;
    bp_comm *g = NULL;
    assert_int_equal(bp_comm_split(world, 0, me, "tp", &g), BP_OK);
    float x[1] = {0};
    char want[128];
    assert_int_equal(bp_send(g, x, 1, nranks, 0), BP_EUSAGE);
    snprintf(want, sizeof want, "rank %d of group 'tp': send: peer %d is not a rank", me, nranks);
    assert_non_null(strstr(bp_comm_errmsg(g), want));
    assert_int_equal(bp_recv(g, x, 1, 0, BP_TAG_MAX + 1), BP_EUSAGE);
    assert_non_null(strstr(bp_comm_errmsg(g), "recv: tag"));
    assert_int_equal(bp_bcast(g, x, 1, -1), BP_EUSAGE);
    assert_non_null(strstr(bp_comm_errmsg(g), "bcast: root -1"));
    assert_int_equal(bp_comm_set_path(g, (bp_path)9), BP_EUSAGE);
    assert_int_equal(bp_comm_set_timeout(g, -1), BP_EUSAGE);
    assert_non_null(strstr(bp_comm_errmsg(g), "timeout"));
    assert_int_equal(bp_comm_set_poll(g, -1e-6), BP_EUSAGE);
    assert_non_null(strstr(bp_comm_errmsg(g), "poll interval"));
    bp_comm *open = NULL;
    assert_int_equal(bp_comm_dup(world, "still-open", &open), BP_OK);
    assert_int_equal(bp_comm_finalize(world), BP_EUSAGE); /* g and open are alive */
    assert_non_null(strstr(bp_comm_errmsg(world), "still open"));
    bp_comm_destroy(open);
    bp_comm_destroy(g);
}

/* Bytes of our ring allreduce on rank r: reduce-scatter sends every chunk but r's
 * and receives every chunk but r-1's; allgather sends every chunk but r+1's and
 * receives every chunk but r's. */
static void test_counters(void **state) {
    (void)state;
    const size_t n = 4099;
    float *x = floats(n);
    for (size_t i = 0; i < n; i++) x[i] = value_of(me, i, 5);
    bp_stats w;
    assert_int_equal(bp_comm_stats(world, &w, true), BP_OK);
    for (size_t c = 0; c < 2; c++) {
        bp_comm *g = group_for(&CONFIGS[c]);
        bp_stats st;
        assert_int_equal(bp_allreduce_avg(g, x, n), BP_OK);
        assert_int_equal(bp_allreduce_avg(g, x, n), BP_OK);
        assert_int_equal(bp_barrier(g), BP_OK);
        assert_int_equal(bp_comm_stats(g, &st, true), BP_OK);
        const bp_op_stats *a = &st.op[BP_OP_ALLREDUCE];
        assert_int_equal(a->calls, 2);
        assert_int_equal(st.op[BP_OP_BARRIER].calls, 1);
        assert_int_equal(st.total.calls, 3);
        assert_int_equal(st.op[BP_OP_SEND].calls, 0);
        assert_true(a->blocked_s >= 0);
        if (CONFIGS[c].path == BP_PATH_MPI) {
            assert_int_equal(a->messages, 2);
            assert_int_equal(a->bytes_sent, 2 * n * sizeof(float));
        } else {
            size_t len[3], off;
            bp_chunk(n, nranks, (me - 1 + nranks) % nranks, &off, &len[0]);
            bp_chunk(n, nranks, me, &off, &len[1]);
            bp_chunk(n, nranks, (me + 1) % nranks, &off, &len[2]);
            size_t p = (size_t)nranks;
            assert_int_equal(a->messages, 2 * 2 * (p - 1));
            assert_int_equal(a->bytes_sent, nranks == 1 ? 0 : 2 * (2 * n - len[1] - len[2]) * 4);
            assert_int_equal(a->bytes_recv, nranks == 1 ? 0 : 2 * (2 * n - len[0] - len[1]) * 4);
        }
        assert_int_equal(bp_comm_stats(g, &st, false), BP_OK);
        assert_int_equal(st.total.calls, 0);
        assert_int_equal(st.total.bytes_sent, 0);
        group_done(g);
    }
    /* The world's counters do not see the traffic of other groups. */
    assert_int_equal(bp_comm_stats(world, &w, false), BP_OK);
    assert_int_equal(w.op[BP_OP_ALLREDUCE].calls, 0);
    free(x);
}

/* A small allreduce over more than 2 ranks on our own path is a binomial reduce and
 * broadcast: p - 1 messages each, 2 (p - 1) in all, where a ring sends 2 (p - 1) from
 * every rank; at the size limit's next float it is a ring again. The sums are
 * checked, alike on every rank, by test_comm_prim. */
static void test_small_allreduce_is_a_tree(void **state) {
    (void)state;
    bp_comm *g = group_for(&CONFIGS[0]);
    const size_t sizes[] = {3, BP_ALLREDUCE_TREE_MAX_BYTES / sizeof(float) + 1};
    size_t p = (size_t)nranks;
    for (int k = 0; k < 2; k++) {
        size_t n = sizes[k];
        float *x = floats(n);
        for (size_t i = 0; i < n; i++) x[i] = (float)me;
        bp_stats st;
        assert_int_equal(bp_comm_stats(g, &st, true), BP_OK);
        assert_int_equal(bp_allreduce_sum(g, x, n), BP_OK);
        assert_true(x[n - 1] == (float)(p * (p - 1) / 2));
        assert_int_equal(bp_comm_stats(g, &st, true), BP_OK);
        float sent = (float)st.op[BP_OP_ALLREDUCE].messages;
        assert_int_equal(bp_allreduce_sum(world, &sent, 1), BP_OK);
        bool tree = p > 2 && k == 0;
        assert_true(sent == (float)(tree ? 2 * (p - 1) : 2 * p * (p - 1)));
        free(x);
    }
    group_done(g);
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_p2p),
        cmocka_unit_test(test_barrier_waits_for_the_last),
        cmocka_unit_test(test_bcast_every_root),
        cmocka_unit_test(test_reduce_scatter_and_allgather),
        cmocka_unit_test(test_alltoall),
        cmocka_unit_test(test_chunks_cover_the_buffer),
        cmocka_unit_test(test_groups_and_names),
        cmocka_unit_test(test_wrap),
        cmocka_unit_test(test_error_lines),
        cmocka_unit_test(test_counters),
        cmocka_unit_test(test_small_allreduce_is_a_tree),
    };
    return run_mpi_tests(argc, argv, "comm collectives", tests, sizeof tests / sizeof tests[0]);
}
