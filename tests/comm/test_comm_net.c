/* Network emulation on 2 ranks: the spec parser and its errors, the time of a
 * 4 MiB message at bw=1Gbit,lat=1ms against the model (within 10%, the fastest of
 * up to five attempts on a noisy machine), serialization of back-to-back messages on one link, latency
 * alone, the rendezvous of large messages (eager=), and that emulation sends every
 * primitive down our own path. */
#include "mpi_test.h"

#include "core/timer.h"

static void test_parse(void **state) {
    (void)state;
    bp_net net;
    bp_err err;
    assert_int_equal(bp_net_parse("bw=1Gbit,lat=1ms", &net, &err), BP_OK);
    assert_true(net.on && net.bw_bps == 1e9 && fabs(net.lat_s - 1e-3) < 1e-15);
    assert_int_equal(bp_net_parse("lat=250us,bw=100Mbps", &net, &err), BP_OK);
    assert_true(net.bw_bps == 1e8 && fabs(net.lat_s - 250e-6) < 1e-15);
    assert_int_equal(bp_net_parse("bw=2.5G", &net, &err), BP_OK);
    assert_true(net.bw_bps == 2.5e9 && net.lat_s == 0);
    assert_int_equal(bp_net_parse("bw=800kbit/s,lat=0", &net, &err), BP_OK);
    assert_true(net.bw_bps == 8e5);
    assert_int_equal(bp_net_parse("lat=2s", &net, &err), BP_OK);
    assert_true(net.bw_bps == 0 && net.lat_s == 2);
    assert_int_equal(bp_net_parse("off", &net, &err), BP_OK);
    assert_false(net.on);
    assert_int_equal(bp_net_parse("", &net, &err), BP_OK);
    assert_false(net.on);
    assert_int_equal(bp_net_parse("bw=1G,eager=64K", &net, &err), BP_OK);
    assert_true(net.eager == 65536);
    assert_int_equal(bp_net_parse("eager=1M", &net, &err), BP_OK);
    assert_true(net.eager == 1048576 && net.bw_bps == 0);
    /* 4 MiB at 1 Gbit/s: 33.55 ms on the wire, then 1 ms. */
    assert_int_equal(bp_net_parse("bw=1Gbit,lat=1ms", &net, &err), BP_OK);
    assert_true(fabs(bp_net_time(&net, 4 << 20) - 0.034554432) < 1e-9);

    const char *bad[][2] = {
        {"bw=fast", "bad bw 'fast'"},     {"bw=0", "bad bw '0'"},
        {"bw=-1G", "bad bw '-1G'"},       {"bw=1Gbyte", "bad bw '1Gbyte'"},
        {"lat=5", "bad lat '5'"},         {"lat=1ms,lat=2ms", "'lat' given twice"},
        {"foo=1", "unknown field 'foo'"}, {"bw=1G,latency=1ms", "unknown field 'latency'"},
        {"lat=1min", "bad lat '1min'"},   {"eager=64Kbit", "bad eager '64Kbit'"},
        {"eager=-1", "bad eager '-1'"},
        /* extremes that would stall a job or overflow to no emulation at all */
        {"bw=1e300G", "bw '1e300G' is out of range"}, {"bw=1e-30bit", "bw '1e-30bit' is out of range"},
        {"bw=100bit", "bw '100bit' is out of range"}, {"lat=1e300s", "lat '1e300s' is out of range"},
        {"lat=11s", "lat '11s' is out of range"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        bp_err_clear(&err);
        assert_int_equal(bp_net_parse(bad[i][0], &net, &err), BP_EUSAGE);
        assert_non_null(strstr(err.msg, bad[i][1]));
        assert_false(net.on);
    }
    assert_int_equal(bp_comm_set_net(world, "bw=1Gbit,lat=x"), BP_EUSAGE);
    assert_non_null(strstr(bp_comm_errmsg(world), "bad lat 'x'"));
}

static bool within(double got, double want, double tolerance) {
    return fabs(got - want) <= tolerance * want;
}

enum { MIB = 1 << 20 };

/* What rank 0 sends and rank 1 receives in one timed scenario. */
typedef struct scenario {
    size_t floats; /* per message */
    int messages;  /* sent back to back, non-blocking */
} scenario;

static void run_side(bp_comm *g, float *buf, const scenario *s) {
    bp_request *req[2];
    for (int m = 0; m < s->messages; m++) {
        float *part = buf + (size_t)m * s->floats;
        assert_int_equal(me == 0 ? bp_isend(g, part, s->floats, 1, m, &req[m])
                                 : bp_irecv(g, part, s->floats, 0, m, &req[m]),
                         BP_OK);
    }
    assert_int_equal(bp_waitall(req, s->messages), BP_OK);
}

/* Time from rank 0's start to rank 1's end (both on the shared monotonic clock),
 * and rank 0's own time; known on both ranks. */
static void timed(bp_comm *g, float *buf, const scenario *s, double *total, double *sender) {
    MPI_Barrier(MPI_COMM_WORLD);
    double t[2] = {bp_now(), 0};
    run_side(g, buf, s);
    t[1] = bp_now();
    double times[4];
    MPI_Allgather(t, 2, MPI_DOUBLE, times, 2, MPI_DOUBLE, MPI_COMM_WORLD);
    *total = times[3] - times[0];
    *sender = times[1] - times[0];
}

/* The four timings of one attempt, in seconds. */
typedef struct timings {
    double one, sent, two, empty;
} timings;

static void timed_attempt(bp_comm *g, float *buf, timings *t) {
    double unused;
    assert_int_equal(bp_comm_set_net(g, "bw=1Gbit,lat=1ms"), BP_OK);
    timed(g, buf, &(scenario){4 * MIB / sizeof(float), 1}, &t->one, &t->sent);
    timed(g, buf, &(scenario){MIB / sizeof(float), 2}, &t->two, &unused);
    assert_int_equal(bp_comm_set_net(g, "lat=5ms"), BP_OK);
    timed(g, buf, &(scenario){0, 1}, &t->empty, &unused);
}

/* On an idle link a message takes bytes * 8 / bw + lat (within 10%, the issue's
 * bound); the sender is done after the serialization; a second message waits for
 * the first to be serialized (without the queue it would take 9.4 ms, not 17.8);
 * latency alone. The last two get 25%: a late wake-up costs a fixed millisecond or
 * two. An emulated delay is never early, but a loaded machine makes any of them
 * late by a scheduling slice (4-5 ms on CI), so each timing is the fastest of up to
 * five attempts, and none of the attempts may come in under the model. Both ranks
 * see the same timings and so take the same number of attempts. */
static bool timings_match(const timings *best) {
    const double ser = 4.0 * MIB * 8 / 1e9, lat = 1e-3;
    if (me == 0)
        printf("4 MiB: %.2f ms (model %.2f); sender %.2f ms (model %.2f); 2 x 1 MiB: %.2f ms "
               "(model %.2f); empty at lat=5ms: %.2f ms\n",
               best->one * 1e3, (ser + lat) * 1e3, best->sent * 1e3, ser * 1e3, best->two * 1e3,
               (ser / 2 + lat) * 1e3, best->empty * 1e3);
    return within(best->one, ser + lat, 0.1) && within(best->sent, ser, 0.1) &&
           within(best->two, ser / 2 + lat, 0.25) && within(best->empty, 0.005, 0.25);
}

static void test_message_time_matches_the_model(void **state) {
    (void)state;
    const size_t n = 4 * MIB / sizeof(float);
    const double ser = 4.0 * MIB * 8 / 1e9, lat = 1e-3;
    float *buf = floats(n);
    for (size_t i = 0; i < n; i++) buf[i] = (float)i;
    bp_comm *g = NULL;
    assert_int_equal(bp_comm_dup(world, "net", &g), BP_OK);
    timings best = {INFINITY, INFINITY, INFINITY, INFINITY}, t;
    bool ok = false;
    for (int attempt = 0; attempt < 5 && !ok; attempt++) {
        timed_attempt(g, buf, &t);
        /* 1% below the model is the clocks' and rounding's share, not an early message. */
        assert_true(t.one >= 0.99 * (ser + lat) && t.sent >= 0.99 * ser);
        assert_true(t.two >= 0.99 * (ser / 2 + lat) && t.empty >= 0.99 * 0.005);
        best.one = fmin(best.one, t.one);
        best.sent = fmin(best.sent, t.sent);
        best.two = fmin(best.two, t.two);
        best.empty = fmin(best.empty, t.empty);
        ok = timings_match(&best);
    }
    assert_true(ok);
    group_done(g);
    free(buf);
}

/* eager=64K: two ranks exchanging 1 MiB at once share the link as if it were
 * half-duplex, each message arriving (1 MiB - 64 KiB) * 8 / bw after the
 * receiver's own send is serialized (16.3 ms at 1 Gbit instead of 8.4); a message
 * in one direction only is not delayed (8.4 ms; the bound is the 16.3 ms of the
 * delayed message). */
static void test_rendezvous_waits_for_the_reverse_link(void **state) {
    (void)state;
    const size_t n = MIB / sizeof(float);
    float *out = floats(n), *in = floats(n);
    bp_comm *g = NULL;
    assert_int_equal(bp_comm_dup(world, "eager", &g), BP_OK);
    assert_int_equal(bp_comm_set_net(g, "bw=1Gbit,eager=64K"), BP_OK);
    const double ser = MIB * 8 / 1e9, rest = (MIB - 65536) * 8 / 1e9;
    int peer = 1 - me;
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = bp_now();
    bp_request *req[2];
    assert_int_equal(bp_irecv(g, in, n, peer, 0, &req[0]), BP_OK);
    assert_int_equal(bp_isend(g, out, n, peer, 0, &req[1]), BP_OK);
    assert_int_equal(bp_waitall(req, 2), BP_OK);
    double both = bp_now() - t0, one, unused;
    /* A second try where a late wake-up on a loaded machine looks like the delay. */
    for (int attempt = 0; attempt < 2; attempt++) {
        timed(g, out, &(scenario){n, 1}, &one, &unused);
        if (one < ser + rest) break;
    }
    if (me == 0)
        printf("eager=64K: 1 MiB each way %.2f ms (model %.2f), one way %.2f ms (model %.2f)\n",
               both * 1e3, (ser + rest) * 1e3, one * 1e3, ser * 1e3);
    assert_true(both >= ser + rest);
    assert_true(one >= ser && one < ser + rest);
    group_done(g);
    free(in);
    free(out);
}

/* With emulation on, the MPI path is not taken: the ring's 2 (p - 1) messages
 * each pay the latency. */
static void test_emulation_takes_our_path(void **state) {
    (void)state;
    const size_t n = 4099;
    float *x = floats(n);
    for (size_t i = 0; i < n; i++) x[i] = value_of(me, i, 40);
    bp_comm *g = group_for(&(config){"emu-mpi", BP_PATH_MPI, "lat=2ms", 0, 0});
    double t0 = bp_now();
    assert_int_equal(bp_allreduce_avg(g, x, n), BP_OK);
    double took = bp_now() - t0;
    bp_stats st;
    assert_int_equal(bp_comm_stats(g, &st, false), BP_OK);
    assert_int_equal(st.op[BP_OP_ALLREDUCE].messages, 2 * (nranks - 1));
    assert_true(took >= 2 * (nranks - 1) * 0.002 * 0.95);
    assert_true(st.op[BP_OP_ALLREDUCE].blocked_s >= 2 * (nranks - 1) * 0.002 * 0.9);
    for (size_t i = 0; i < n; i++) {
        double want = 0;
        for (int r = 0; r < nranks; r++) want += value_of(r, i, 40);
        assert_true(fabs(x[i] - want / nranks) <= 1e-6);
    }
    group_done(g);
    free(x);
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse),
        cmocka_unit_test(test_message_time_matches_the_model),
        cmocka_unit_test(test_rendezvous_waits_for_the_reverse_link),
        cmocka_unit_test(test_emulation_takes_our_path),
    };
    return run_mpi_tests(argc, argv, "comm network emulation", tests,
                         sizeof tests / sizeof tests[0]);
}
