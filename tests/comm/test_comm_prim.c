/* Bagua's primitives on 1 to 4 ranks, lengths 1, 7, 4099 and about 10^6: C_FP_S
 * equals the exact average on every rank (own ring, MPI, emulated, hierarchical),
 * hierarchical agrees with flat, C_LP_S stays within the bound MinMaxUInt8
 * implies, D_FP_S pairs ranks as the shift_one formula says for 20 rounds,
 * D_LP_S keeps its replica invariant bit for bit for 20 steps, PowerSGD's
 * allreduce reconstructs the average of low-rank inputs, and errors name the
 * rank, group and operation. */
#include "mpi_test.h"

/* --- C_FP_S ---------------------------------------------------------------------- */

static double exact_avg(size_t i, uint64_t salt) {
    double s = 0;
    for (int r = 0; r < nranks; r++) s += value_of(r, i, salt);
    return s / nranks;
}

static void check_avg(const float *x, size_t n, uint64_t salt) {
    for (size_t i = 0; i < n; i++) assert_true(fabs(x[i] - exact_avg(i, salt)) <= 1e-6);
    assert_same_everywhere(x, n * sizeof *x);
}

static void test_allreduce_avg(void **state) {
    (void)state;
    for (size_t c = 0; c < NCONFIGS; c++) {
        bp_comm *g = group_for(&CONFIGS[c]);
        for (size_t k = 0; k <= NLENGTHS; k++) {
            size_t n = k < NLENGTHS ? LENGTHS[k] : BIG;
            if (n == BIG && CONFIGS[c].net) continue; /* the emulated path is the own one */
            float *x = floats(n);
            for (size_t i = 0; i < n; i++) x[i] = value_of(me, i, 20);
            assert_int_equal(bp_allreduce_avg(g, x, n), BP_OK);
            check_avg(x, n, 20);
            for (size_t i = 0; i < n; i++) x[i] = int_of(me, i);
            assert_int_equal(bp_allreduce_sum(g, x, n), BP_OK);
            for (size_t i = 0; i < n; i++) {
                float s = 0;
                for (int r = 0; r < nranks; r++) s += int_of(r, i);
                assert_true(x[i] == s);
            }
            free(x);
        }
        group_done(g);
    }
}

/* Hierarchical and flat agree: C_FP_S and D_FP_S `all` (tight tolerance). */
static void test_hierarchical_matches_flat(void **state) {
    (void)state;
    bp_comm *flat = group_for(&CONFIGS[0]), *hier = group_for(&CONFIGS[3]);
    const size_t ns[] = {7, 4099, BIG};
    for (size_t k = 0; k < 3; k++) {
        size_t n = ns[k];
        float *a = floats(n), *b = floats(n);
        for (size_t i = 0; i < n; i++) a[i] = b[i] = value_of(me, i, 21);
        assert_int_equal(bp_allreduce_avg(flat, a, n), BP_OK);
        assert_int_equal(bp_allreduce_avg(hier, b, n), BP_OK);
        for (size_t i = 0; i < n; i++) assert_true(fabsf(a[i] - b[i]) <= 1e-6f);
        for (size_t i = 0; i < n; i++) b[i] = value_of(me, i, 21);
        assert_int_equal(bp_peer_avg(hier, b, n, BP_PEERS_ALL, 0), BP_OK);
        for (size_t i = 0; i < n; i++) assert_true(fabsf(a[i] - b[i]) <= 1e-6f);
        free(a), free(b);
    }
    group_done(flat), group_done(hier);
}

/* --- C_LP_S ---------------------------------------------------------------------- */

/* Inputs of the ranks that run the flat primitive: every rank's x or, when
 * hierarchical, each node's sum times nodes / ranks (what the leaders hold). */
static int participants(const config *cfg, size_t n, uint64_t salt, float **in) {
    int per = cfg->node_size ? cfg->node_size : 1, count = (nranks + per - 1) / per;
    for (int q = 0; q < count; q++) {
        in[q] = calloc(n, sizeof(float));
        for (int r = q * per; r < (q + 1) * per && r < nranks; r++)
            for (size_t i = 0; i < n; i++) in[q][i] += value_of(r, i, salt);
        if (per > 1)
            for (size_t i = 0; i < n; i++) in[q][i] /= (float)nranks / (float)count;
    }
    return count;
}

static double range_of(const float *x, size_t n) {
    float lo = x[0], hi = x[0];
    for (size_t i = 1; i < n; i++) lo = fminf(lo, x[i]), hi = fmaxf(hi, x[i]);
    return (double)hi - lo;
}

/* Per chunk: each input chunk's quantization error is at most its range / 510;
 * the average, quantized again, adds its own range / 510 (its range grows by at
 * most twice the first error). */
static void check_lp_bound(const config *cfg, const float *x, size_t n, uint64_t salt) {
    float *in[4];
    int p = participants(cfg, n, salt, in);
    for (int j = 0; j < p; j++) {
        size_t off, len;
        bp_chunk(n, p, j, &off, &len);
        if (!len) continue;
        double mean_r = 0, max_r = 0;
        for (int q = 0; q < p; q++) {
            double r = range_of(in[q] + off, len) + 1e-7;
            mean_r += r / p;
            max_r = fmax(max_r, r);
        }
        double lo = INFINITY, hi = -INFINITY;
        for (size_t i = off; i < off + len; i++)
            lo = fmin(lo, exact_avg(i, salt)), hi = fmax(hi, exact_avg(i, salt));
        double bound = (mean_r + (hi - lo) + 2 * max_r / 510) / 510 * 1.001 + 1e-6;
        for (size_t i = off; i < off + len; i++)
            assert_true(fabs(x[i] - exact_avg(i, salt)) <= bound);
    }
    for (int q = 0; q < p; q++) free(in[q]);
}

static void test_allreduce_lp(void **state) {
    (void)state;
    bp_codec *codec = NULL;
    assert_int_equal(bp_codec_minmax_u8_create(&codec, NULL), BP_OK);
    for (size_t c = 0; c < NCONFIGS; c++) {
        bp_comm *g = group_for(&CONFIGS[c]);
        for (size_t k = 0; k <= NLENGTHS; k++) {
            size_t n = k < NLENGTHS ? LENGTHS[k] : BIG;
            if (n == BIG && c != 0) continue;
            float *x = floats(n);
            for (size_t i = 0; i < n; i++) x[i] = value_of(me, i, 22);
            assert_int_equal(bp_allreduce_avg_lp(g, x, n, codec), BP_OK);
            check_lp_bound(&CONFIGS[c], x, n, 22);
            assert_same_everywhere(x, n * sizeof *x);
            free(x);
        }
        group_done(g);
    }
    bp_codec_destroy(codec);
}

/* --- D_FP_S ---------------------------------------------------------------------- */

/* The formula of docs/algorithms.md#primitives, written out again for the check. */
static int expected_peer(int r, int n, int k) {
    int h = n / 2;
    if (r < h) return (k + r) % ((n + 1) / 2) + h;
    int m = (r - h - k) % h;
    return m < 0 ? m + h : m;
}

static float base_of(int r, size_t i) { return (float)((r + 1) * (int)(1 + i % 3)); }

static void test_shift_one_pairs_by_the_formula(void **state) {
    (void)state;
    bp_comm *g = group_for(&CONFIGS[0]);
    const size_t ns[] = {1, 7, 4099, BIG};
    for (size_t k = 0; k < 4; k++) {
        size_t n = ns[k];
        float *x = floats(n);
        int met = 0;
        for (int round = 0; round < 20; round++) {
            for (size_t i = 0; i < n; i++) x[i] = base_of(me, i);
            int rc = bp_peer_avg(g, x, n, BP_PEERS_SHIFT_ONE, (uint64_t)round);
            if (nranks % 2 && nranks > 1) {
                assert_int_equal(rc, BP_EUSAGE);
                char want[96];
                snprintf(want, sizeof want, "rank %d of group 'own': peer_avg (D_FP_S): shift_one",
                         me);
                assert_non_null(strstr(bp_comm_errmsg(g), want));
                break;
            }
            assert_int_equal(rc, BP_OK);
            int peer = nranks == 1 ? me : expected_peer(me, nranks, round);
            assert_int_equal(bp_shift_one_peer(me, nranks, (uint64_t)round), peer);
            for (size_t i = 0; i < n; i++)
                assert_true(x[i] == (base_of(me, i) + base_of(peer, i)) / 2);
            if (round < nranks / 2) met |= 1 << peer;
        }
        /* Over n/2 rounds a rank meets every rank of the other half once. */
        if (nranks % 2 == 0) {
            int other = me < nranks / 2 ? ((1 << nranks) - 1) & ~((1 << (nranks / 2)) - 1)
                                        : (1 << (nranks / 2)) - 1;
            assert_int_equal(met, other);
        }
        free(x);
    }
    group_done(g);
}

/* Hierarchical shift_one pairs nodes: the result is the mean of the two nodes' means. */
static void test_shift_one_hierarchical(void **state) {
    (void)state;
    bp_comm *g = group_for(&CONFIGS[3]);
    int nodes = (nranks + 1) / 2;
    const size_t n = 4099;
    float *x = floats(n);
    for (int round = 0; round < 20; round++) {
        for (size_t i = 0; i < n; i++) x[i] = base_of(me, i);
        int rc = bp_peer_avg(g, x, n, BP_PEERS_SHIFT_ONE, (uint64_t)round);
        if (nodes % 2 && nodes > 1) {
            assert_int_equal(rc, BP_EUSAGE);
            assert_non_null(strstr(bp_comm_errmsg(g), "even number of nodes"));
            break;
        }
        assert_int_equal(rc, BP_OK);
        int node = me / 2, peer = nodes == 1 ? node : expected_peer(node, nodes, round);
        for (size_t i = 0; i < n; i++) {
            double mine = 0, theirs = 0;
            int a = 0, b = 0;
            for (int r = 0; r < nranks; r++) {
                if (r / 2 == node) mine += base_of(r, i), a++;
                if (r / 2 == peer) theirs += base_of(r, i), b++;
            }
            assert_true(fabs(x[i] - (mine / a + theirs / b) / 2) <= 1e-5);
        }
    }
    free(x);
    group_done(g);
}

/* --- D_LP_S ---------------------------------------------------------------------- */

/* The largest difference between two ranks over the elements of x. */
static double spread(const float *x, size_t n) {
    float *lo = floats(n), *hi = floats(n);
    MPI_Allreduce(x, lo, (int)n, MPI_FLOAT, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(x, hi, (int)n, MPI_FLOAT, MPI_MAX, MPI_COMM_WORLD);
    double d = 0;
    for (size_t i = 0; i < n; i++) d = fmax(d, (double)hi[i] - lo[i]);
    free(lo), free(hi);
    return d;
}

/* Ring members in world ranks: everyone, or the node leaders (0, 2, ...). */
static int ring_member(const config *cfg, int q) { return cfg->node_size ? q * cfg->node_size : q; }

/* Rank i's w equals its right neighbour's l and its left neighbour's r, bit for
 * bit: each member sends w both ways and compares what comes back. */
static void check_replicas(const config *cfg, const bp_ring_lp *s, size_t n) {
    const float *w, *l, *r;
    bp_ring_lp_replicas(s, &w, &l, &r);
    int per = cfg->node_size ? cfg->node_size : 1, size = (nranks + per - 1) / per;
    if (me % per) {
        assert_null(w);
        return;
    }
    int q = me / per, left = ring_member(cfg, (q - 1 + size) % size),
        right = ring_member(cfg, (q + 1) % size);
    float *lw = floats(n), *rw = floats(n);
    MPI_Sendrecv(w, (int)n, MPI_FLOAT, right, 1, lw, (int)n, MPI_FLOAT, left, 1, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    MPI_Sendrecv(w, (int)n, MPI_FLOAT, left, 2, rw, (int)n, MPI_FLOAT, right, 2, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    assert_memory_equal(l, lw, n * sizeof *l);
    assert_memory_equal(r, rw, n * sizeof *r);
    free(lw), free(rw);
}

static void test_ring_lp_invariant(void **state) {
    (void)state;
    bp_codec *codec = NULL;
    assert_int_equal(bp_codec_minmax_u8_create(&codec, NULL), BP_OK);
    const size_t cfgs[] = {0, 2, 3};
    for (size_t c = 0; c < 3; c++) {
        const config *cfg = &CONFIGS[cfgs[c]];
        bp_comm *g = group_for(cfg);
        for (size_t k = 0; k <= NLENGTHS; k++) {
            size_t n = k < NLENGTHS ? LENGTHS[k] : BIG;
            if (n == BIG && c != 0) continue;
            float *x = floats(n);
            /* Equal starts on every rank for the first length, different after. */
            for (size_t i = 0; i < n; i++) x[i] = value_of(k == 0 ? 0 : me, i, 23);
            bp_ring_lp *s = NULL;
            assert_int_equal(bp_ring_lp_create(g, x, n, 0, codec, &s), BP_OK);
            check_replicas(cfg, s, n);
            for (int step = 0; step < 20; step++) {
                /* A local step pulls each rank towards a target of its own. */
                for (size_t i = 0; i < n; i++) x[i] -= 0.1f * (x[i] - value_of(me, i, 24));
                assert_int_equal(bp_ring_lp_step(s, x), BP_OK);
                const float *w, *l, *r;
                bp_ring_lp_replicas(s, &w, &l, &r);
                if (w) assert_memory_equal(x, w, n * sizeof *x);
                check_replicas(cfg, s, n);
            }
            /* Gossip keeps the ranks much closer together than their targets. */
            float *t = floats(n);
            for (size_t i = 0; i < n; i++) t[i] = value_of(me, i, 24);
            double sx = spread(x, n), st = spread(t, n);
            if (nranks > 1) assert_true(sx < 0.25 * st);
            free(t);
            bp_ring_lp_destroy(s);
            free(x);
        }
        group_done(g);
    }
    bp_codec_destroy(codec);
}

/* Each chunk is compressed with its own range: a chunk of differences of size 1000
 * beside one of size 0.001 leaves the small one within one quantization step of
 * its own range (2e-3 / 255), where one min/max over both would err by up to
 * 2000 / 255. From equal starts (l = r = w = x0), the step's z is x - x0, so
 * afterwards w = x0 + D(C(x - x0)) must be within that step of x. */
static void test_ring_lp_chunks(void **state) {
    (void)state;
    enum { CHUNK = 1000, N = 2 * CHUNK + 17 }; /* a short last chunk too */
    bp_codec *codec = NULL;
    assert_int_equal(bp_codec_minmax_u8_create(&codec, NULL), BP_OK);
    bp_comm *g = group_for(&CONFIGS[0]);
    float *x = floats(N);
    for (size_t i = 0; i < N; i++) x[i] = value_of(0, i, 25);
    bp_ring_lp *s = NULL;
    assert_int_equal(bp_ring_lp_create(g, x, N, CHUNK, codec, &s), BP_OK);
    const double scale[3] = {1000, 1e-3, 10};
    float *want = floats(N);
    for (size_t i = 0; i < N; i++) want[i] = x[i] += (float)(scale[i / CHUNK] * value_of(me, i, 26));
    assert_int_equal(bp_ring_lp_step(s, x), BP_OK);
    for (size_t i = 0; i < N; i++) {
        double bound = 2 * scale[i / CHUNK] / 255 + 1e-5;
        if (fabs((double)x[i] - want[i]) > bound)
            fail_msg("rank %d: element %zu off by %g (bound %g)", me, i, fabs((double)x[i] - want[i]),
                     bound);
    }
    bp_ring_lp_destroy(s);
    free(x), free(want);
    group_done(g);
    bp_codec_destroy(codec);
}

/* A step sends C(z) to each neighbour once: to two on 3 ranks or more, to one on 2
 * (or 1), where the left and the right neighbour are one rank; the replicas stay
 * the neighbours' w either way (test_ring_lp_invariant). */
static void test_ring_lp_sends_each_neighbour_once(void **state) {
    (void)state;
    enum { N = 4099 };
    bp_codec *codec = NULL;
    assert_int_equal(bp_codec_minmax_u8_create(&codec, NULL), BP_OK);
    bp_comm *g = group_for(&CONFIGS[0]);
    float *x = floats(N);
    for (size_t i = 0; i < N; i++) x[i] = value_of(me, i, 27);
    bp_ring_lp *s = NULL;
    assert_int_equal(bp_ring_lp_create(g, x, N, 0, codec, &s), BP_OK);
    bp_stats st;
    assert_int_equal(bp_comm_stats(g, &st, true), BP_OK);
    assert_int_equal(bp_ring_lp_step(s, x), BP_OK);
    assert_int_equal(bp_comm_stats(g, &st, false), BP_OK);
    uint64_t peers = nranks > 2 ? 2 : 1;
    assert_int_equal(st.op[BP_OP_RING_LP].messages, peers);
    assert_int_equal(st.op[BP_OP_RING_LP].bytes_sent, peers * bp_codec_encoded_size(codec, N));
    bp_ring_lp_destroy(s);
    free(x);
    group_done(g);
    bp_codec_destroy(codec);
}

/* The split step (begin, then the exchange on a duplicate group, as another
 * thread runs it) gives bp_ring_lp_step's bits: x and the three replicas, over
 * steps that take the ranks apart, with chunks. A hierarchical group is refused. */
static void test_ring_lp_split(void **state) {
    (void)state;
    enum { N = 2 * 1000 + 17 };
    for (size_t c = 0; c < 2; c++) {
        bp_comm *g = group_for(&CONFIGS[c]), *d = group_for(&CONFIGS[c]);
        bp_codec *ca = NULL, *cb = NULL;
        assert_int_equal(bp_codec_minmax_u8_create(&ca, NULL), BP_OK);
        assert_int_equal(bp_codec_minmax_u8_create(&cb, NULL), BP_OK);
        float *xa = floats(N), *xb = floats(N);
        for (size_t i = 0; i < N; i++) xa[i] = xb[i] = value_of(me, i, 27);
        bp_ring_lp *a = NULL, *b = NULL;
        assert_int_equal(bp_ring_lp_create(g, xa, N, 1000, ca, &a), BP_OK);
        assert_int_equal(bp_ring_lp_create(g, xb, N, 1000, cb, &b), BP_OK);
        for (int step = 0; step < 12; step++) {
            for (size_t i = 0; i < N; i++) {
                float pull = 0.1f * (xa[i] - value_of(me, i, 28 + (uint64_t)step));
                xa[i] -= pull, xb[i] -= pull;
            }
            assert_int_equal(bp_ring_lp_step(a, xa), BP_OK);
            assert_int_equal(bp_ring_lp_begin(b, xb), BP_OK);
            assert_memory_equal(xa, xb, N * sizeof *xa); /* x = w before the exchange */
            assert_int_equal(bp_ring_lp_exchange(b, d), BP_OK);
            const float *ra[3], *rb[3];
            bp_ring_lp_replicas(a, &ra[0], &ra[1], &ra[2]);
            bp_ring_lp_replicas(b, &rb[0], &rb[1], &rb[2]);
            for (int k = 0; k < 3; k++) assert_memory_equal(ra[k], rb[k], N * sizeof *xa);
        }
        bp_ring_lp_destroy(a), bp_ring_lp_destroy(b);
        bp_codec_destroy(ca), bp_codec_destroy(cb);
        free(xa), free(xb);
        group_done(d), group_done(g);
    }
    bp_comm *h = group_for(&CONFIGS[3]);
    bp_codec *codec = NULL;
    assert_int_equal(bp_codec_minmax_u8_create(&codec, NULL), BP_OK);
    float x[4] = {1, 2, 3, 4};
    bp_ring_lp *s = NULL;
    assert_int_equal(bp_ring_lp_create(h, x, 4, 0, codec, &s), BP_OK);
    assert_int_equal(bp_ring_lp_begin(s, x), BP_EUSAGE);
    bp_ring_lp_destroy(s);
    bp_codec_destroy(codec);
    group_done(h);
}

/* --- PowerSGD ------------------------------------------------------------------- */

/* G_r = A_r B^T with B shared: the average (mean A) B^T has rank k and comes back
 * exactly from one power iteration. */
static void test_powersgd_allreduce(void **state) {
    (void)state;
    enum { R = 32, C = 24, K = 3, N = R * C };
    const size_t cfgs[] = {0, 1, 3};
    for (size_t c = 0; c < 3; c++) {
        bp_comm *g = group_for(&CONFIGS[cfgs[c]]);
        bp_codec *ps = NULL;
        assert_int_equal(bp_codec_powersgd_create(R, C, K, 42, &ps, NULL), BP_OK);
        float *x = floats(N), *gr = floats(N), *want = floats(N);
        for (int i = 0; i < R; i++)
            for (int j = 0; j < C; j++) {
                double mine = 0, avg = 0;
                for (int k = 0; k < K; k++) {
                    double b = value_of(99, (size_t)(j * K + k), 25);
                    mine += value_of(me, (size_t)(i * K + k), 26) * b;
                    for (int r = 0; r < nranks; r++)
                        avg += value_of(r, (size_t)(i * K + k), 26) * b / nranks;
                }
                gr[i * C + j] = x[i * C + j] = (float)mine;
                want[i * C + j] = (float)avg;
            }
        assert_int_equal(bp_allreduce_avg_powersgd(g, x, N, ps), BP_OK);
        const float *e = bp_powersgd_error(ps);
        for (int i = 0; i < N; i++) {
            assert_true(fabsf(x[i] - want[i]) <= 1e-4f);
            assert_true(fabsf(x[i] + e[i] - gr[i]) <= 1e-5f); /* M = P Q^T + E */
        }
        assert_same_everywhere(x, N * sizeof *x);
        bp_codec *mm = NULL;
        assert_int_equal(bp_codec_minmax_u8_create(&mm, NULL), BP_OK);
        assert_int_equal(bp_allreduce_avg_powersgd(g, x, N, mm), BP_EUSAGE);
        assert_non_null(strstr(bp_comm_errmsg(g), "powersgd: codec 0: minmax_u8 is not powersgd"));
        bp_codec_destroy(mm);
        bp_codec_destroy(ps);
        free(x), free(gr), free(want);
        group_done(g);
    }
}

/* A batch gives what its members give one by one (two matrices of other shapes and
 * a vector averaged in full between them), over three steps of error feedback and
 * warm-started Q, in two allreduces instead of five. */
static void test_powersgd_batch(void **state) {
    (void)state;
    enum { R1 = 16, C1 = 12, R2 = 8, C2 = 20, V = 7, K = 2, STEPS = 3 };
    const size_t n[3] = {R1 * C1, V, R2 * C2};
    bp_comm *g = group_for(&CONFIGS[0]);
    bp_codec *one[3] = {NULL, NULL, NULL}, *many[3] = {NULL, NULL, NULL};
    assert_int_equal(bp_codec_powersgd_create(R1, C1, K, 7, &one[0], NULL), BP_OK);
    assert_int_equal(bp_codec_powersgd_create(R2, C2, K, 8, &one[2], NULL), BP_OK);
    assert_int_equal(bp_codec_powersgd_create(R1, C1, K, 7, &many[0], NULL), BP_OK);
    assert_int_equal(bp_codec_powersgd_create(R2, C2, K, 8, &many[2], NULL), BP_OK);
    float *x[3], *y[3];
    for (int m = 0; m < 3; m++) x[m] = floats(n[m]), y[m] = floats(n[m]);
    for (int s = 0; s < STEPS; s++) {
        for (int m = 0; m < 3; m++)
            for (size_t i = 0; i < n[m]; i++) x[m][i] = y[m][i] = value_of(me, i, 40 + 3 * s + m);
        assert_int_equal(bp_allreduce_avg_powersgd(g, x[0], n[0], one[0]), BP_OK);
        assert_int_equal(bp_allreduce_avg(g, x[1], n[1]), BP_OK);
        assert_int_equal(bp_allreduce_avg_powersgd(g, x[2], n[2], one[2]), BP_OK);
        bp_stats st;
        assert_int_equal(bp_comm_stats(g, &st, true), BP_OK);
        assert_int_equal(bp_allreduce_avg_powersgd_batch(g, 3, y, n, many), BP_OK);
        assert_int_equal(bp_comm_stats(g, &st, true), BP_OK);
        assert_int_equal(st.op[BP_OP_POWERSGD].calls, 1);
        /* two allreduces, of P and of Q: rings of 2 (p - 1) messages from every rank on
         * 2 ranks; beyond, these small ones are trees of 2 (p - 1) messages in all */
        float sent = (float)st.op[BP_OP_POWERSGD].messages;
        assert_int_equal(bp_allreduce_sum(world, &sent, 1), BP_OK);
        assert_true(sent == 2.0f * 2 * (nranks - 1) * (nranks > 2 ? 1 : nranks));
        for (int m = 0; m < 3; m++)
            for (size_t i = 0; i < n[m]; i++)
                assert_true(fabsf(x[m][i] - y[m][i]) <= 1e-5f * (1 + fabsf(x[m][i])));
    }
    for (int m = 0; m < 3; m++) {
        free(x[m]), free(y[m]);
        bp_codec_destroy(one[m]), bp_codec_destroy(many[m]);
    }
    group_done(g);
}

/* --- errors and counters ---------------------------------------------------------- */

static void test_lp_rejects_nonfinite_and_counts_less(void **state) {
    (void)state;
    bp_codec *codec = NULL;
    assert_int_equal(bp_codec_minmax_u8_create(&codec, NULL), BP_OK);
    bp_comm *g = group_for(&CONFIGS[0]);
    const size_t n = 4099;
    float *x = floats(n);
    for (size_t i = 0; i < n; i++) x[i] = value_of(me, i, 27);
    x[0] = NAN;
    assert_int_equal(bp_allreduce_avg_lp(g, x, n, codec), BP_ENONFINITE);
    char want[96];
    snprintf(want, sizeof want,
             "rank %d of group 'own': allreduce_lp (C_LP_S): minmax_u8: input value 0", me);
    assert_non_null(strstr(bp_comm_errmsg(g), want));
    assert_non_null(strstr(bp_comm_errmsg(g), "NaN"));
    /* The group is still usable (nothing was sent); compare the traffic. */
    bp_stats st;
    assert_int_equal(bp_comm_stats(g, &st, true), BP_OK);
    assert_int_equal(st.op[BP_OP_ALLREDUCE_LP].messages, 0);
    x[0] = 0.5f;
    assert_int_equal(bp_allreduce_avg_lp(g, x, n, codec), BP_OK);
    assert_int_equal(bp_allreduce_avg(g, x, n), BP_OK);
    assert_int_equal(bp_comm_stats(g, &st, false), BP_OK);
    uint64_t lp = st.op[BP_OP_ALLREDUCE_LP].bytes_sent, fp = st.op[BP_OP_ALLREDUCE].bytes_sent;
    if (nranks > 1) assert_true(lp > 0 && (double)lp < 0.3 * (double)fp);
    assert_int_equal(st.op[BP_OP_ALLREDUCE_LP].calls, 1);
    group_done(g);
    free(x);
    bp_codec_destroy(codec);
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_allreduce_avg),
        cmocka_unit_test(test_hierarchical_matches_flat),
        cmocka_unit_test(test_allreduce_lp),
        cmocka_unit_test(test_shift_one_pairs_by_the_formula),
        cmocka_unit_test(test_shift_one_hierarchical),
        cmocka_unit_test(test_ring_lp_invariant),
        cmocka_unit_test(test_ring_lp_chunks),
        cmocka_unit_test(test_ring_lp_sends_each_neighbour_once),
        cmocka_unit_test(test_ring_lp_split),
        cmocka_unit_test(test_powersgd_allreduce),
        cmocka_unit_test(test_powersgd_batch),
        cmocka_unit_test(test_lp_rejects_nonfinite_and_counts_less),
    };
    return run_mpi_tests(argc, argv, "comm primitives", tests, sizeof tests / sizeof tests[0]);
}
