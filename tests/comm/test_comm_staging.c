/* Device buffers staged through a group's pool of host blocks (comm/memory.c): the
 * "device" is the checking backend, whose memory faults on any host access outside
 * its calls, and host_alloc / host_free count their calls. Repeated operations
 * reuse the blocks instead of allocating per operation, a larger buffer grows the
 * pool, live stagings take blocks of their own, and every block is freed when the
 * group is destroyed or its memory is set again; the results stay exact. */
#include "comm/mpi_test.h"
#include "core/backend.h"
#include "core/buf.h"

/* The calls of the pool's host memory, and the blocks out now. */
typedef struct counts {
    int allocs, frees;
    size_t largest; /* bytes */
} counts;

static counts got;

static bool dev_owns(void *ctx, const void *p) {
    const bp_backend *be = ctx;
    return be->owns(be, p);
}
static void dev_to_host(void *ctx, void *host_dst, const void *src, size_t bytes) {
    const bp_backend *be = ctx;
    be->to_host(be, host_dst, src, bytes);
}
static void dev_to_device(void *ctx, void *dst, const void *host_src, size_t bytes) {
    const bp_backend *be = ctx;
    be->to_device(be, dst, host_src, bytes);
}
static void *counted_alloc(void *ctx, size_t bytes) {
    (void)ctx;
    got.allocs++;
    if (bytes > got.largest) got.largest = bytes;
    return bp_alloc(bytes);
}
static void counted_free(void *ctx, void *p) {
    (void)ctx;
    got.frees++;
    bp_free(p);
}

static bp_comm_memory counted_memory(void) {
    return (bp_comm_memory){.ctx = (void *)bp_backend_check(),
                            .owns = dev_owns,
                            .to_host = dev_to_host,
                            .to_device = dev_to_device,
                            .host_alloc = counted_alloc,
                            .host_free = counted_free};
}

/* A group of the world with the counted memory, the counts from zero. */
static bp_comm *staging_group(void) {
    bp_comm *g = NULL;
    assert_int_equal(bp_comm_dup(world, "staging", &g), BP_OK);
    bp_comm_memory mem = counted_memory();
    assert_int_equal(bp_comm_set_memory(g, &mem), BP_OK);
    got = (counts){0};
    return g;
}

static float *dev_alloc(size_t n) {
    const bp_backend *be = bp_backend_check();
    void *d = NULL;
    bp_err err;
    assert_int_equal(be->alloc(be, &d, n * sizeof(float), "test buffer", &err), BP_OK);
    return d;
}

static void dev_free(float *d) { bp_backend_check()->free(bp_backend_check(), d); }

/* An allreduce of n floats in device memory d, checked against the exact sum. */
static void allreduce_on_device(bp_comm *g, float *d, size_t n) {
    float *h = floats(n);
    for (size_t i = 0; i < n; i++) h[i] = int_of(me, i);
    bp_backend_put(bp_backend_check(), d, h, n);
    assert_int_equal(bp_allreduce_sum(g, d, n), BP_OK);
    bp_backend_get(bp_backend_check(), h, d, n);
    for (size_t i = 0; i < n; i++) {
        float want = 0;
        for (int r = 0; r < nranks; r++) want += int_of(r, i);
        assert_true(h[i] == want);
    }
    free(h);
}

static void test_blocks_are_reused(void **state) {
    (void)state;
    enum { N = 4099 };
    bp_comm *g = staging_group();
    float *d = dev_alloc(N);
    for (int k = 0; k < 50; k++) allreduce_on_device(g, d, N);
    assert_int_equal(got.allocs, 1);
    assert_int_equal(got.frees, 0); /* kept for the next operation */
    assert_int_equal(bp_comm_destroy(g), BP_OK);
    assert_int_equal(got.frees, got.allocs);
    dev_free(d);
}

static void test_pool_grows(void **state) {
    (void)state;
    enum { SMALL = 7, LARGE = 100003 };
    bp_comm *g = staging_group();
    float *small = dev_alloc(SMALL), *large = dev_alloc(LARGE);
    allreduce_on_device(g, small, SMALL);
    assert_int_equal(got.allocs, 1);
    allreduce_on_device(g, large, LARGE);
    assert_int_equal(got.allocs, 2);
    assert_int_equal(got.largest, LARGE * sizeof(float));
    /* both sizes now have a block that fits */
    for (int k = 0; k < 10; k++) {
        allreduce_on_device(g, small, SMALL);
        allreduce_on_device(g, large, LARGE);
    }
    assert_int_equal(got.allocs, 2);
    assert_int_equal(bp_comm_destroy(g), BP_OK);
    assert_int_equal(got.frees, 2);
    dev_free(small), dev_free(large);
}

/* All-to-all stages its two buffers at once: two blocks, then reused. */
static void test_live_stagings_take_blocks_of_their_own(void **state) {
    (void)state;
    size_t count = 5, total = count * (size_t)nranks;
    bp_comm *g = staging_group();
    float *dsend = dev_alloc(total), *drecv = dev_alloc(total);
    float *send = floats(total), *recv = floats(total);
    for (int k = 0; k < 20; k++) {
        for (size_t i = 0; i < total; i++) send[i] = (float)(me * 1000 + k * 100) + (float)i;
        bp_backend_put(bp_backend_check(), dsend, send, total);
        assert_int_equal(bp_alltoall(g, dsend, drecv, count), BP_OK);
        bp_backend_get(bp_backend_check(), recv, drecv, total);
        for (int r = 0; r < nranks; r++)
            for (size_t i = 0; i < count; i++)
                assert_true(recv[(size_t)r * count + i] ==
                            (float)(r * 1000 + k * 100) + (float)((size_t)me * count + i));
    }
    assert_int_equal(got.allocs, 2);
    assert_int_equal(bp_comm_destroy(g), BP_OK);
    assert_int_equal(got.frees, 2);
    free(send), free(recv);
    dev_free(dsend), dev_free(drecv);
}

/* Non-blocking messages hold their blocks until the wait; more live at once than
 * the pool keeps, so some are freed on return, and none leaks. */
static void test_requests_hold_blocks_until_the_wait(void **state) {
    (void)state;
    enum { MSGS = 6, N = 33, KEEP = 8 /* BPC_POOL_KEEP */ };
    if (nranks < 2) skip();
    int peer = me ^ 1;
    if (peer >= nranks) peer = me; /* an odd last rank talks to itself */
    bp_comm *g = staging_group();
    float *dsend = dev_alloc((size_t)MSGS * N), *drecv = dev_alloc((size_t)MSGS * N);
    float *h = floats((size_t)MSGS * N);
    for (size_t i = 0; i < (size_t)MSGS * N; i++) h[i] = (float)(me * 100000) + (float)i;
    bp_backend_put(bp_backend_check(), dsend, h, (size_t)MSGS * N);
    for (int round = 0; round < 3; round++) {
        bp_request *reqs[2 * MSGS];
        for (int m = 0; m < MSGS; m++) {
            assert_int_equal(bp_irecv(g, drecv + m * N, N, peer, m, &reqs[2 * m]), BP_OK);
            assert_int_equal(bp_isend(g, dsend + m * N, N, peer, m, &reqs[2 * m + 1]), BP_OK);
        }
        assert_int_equal(bp_waitall(reqs, 2 * MSGS), BP_OK);
    }
    bp_backend_get(bp_backend_check(), h, drecv, (size_t)MSGS * N);
    for (size_t i = 0; i < (size_t)MSGS * N; i++)
        assert_true(h[i] == (float)(peer * 100000) + (float)i);
    /* the first round allocates one block per live message; later rounds find
     * the pool's kept blocks and allocate only beyond them */
    assert_true(got.allocs >= 2 * MSGS);
    assert_true(got.allocs <= 2 * MSGS + 2 * (2 * MSGS - KEEP));
    assert_int_equal(bp_comm_destroy(g), BP_OK);
    assert_int_equal(got.frees, got.allocs);
    free(h);
    dev_free(dsend), dev_free(drecv);
}

/* Setting the memory again frees the kept blocks through the old host_free (the
 * trainer unsets it before it closes the device); host_alloc without host_free is
 * refused; without both the copies are ordinary memory, with the same results. */
static void test_set_memory_again(void **state) {
    (void)state;
    enum { N = 1000 };
    bp_comm *g = staging_group();
    float *d = dev_alloc(N);
    allreduce_on_device(g, d, N);
    assert_int_equal(got.allocs, 1);
    assert_int_equal(bp_comm_set_memory(g, NULL), BP_OK);
    assert_int_equal(got.frees, 1);

    bp_comm_memory mem = counted_memory();
    mem.host_free = NULL;
    assert_int_equal(bp_comm_set_memory(g, &mem), BP_EUSAGE);
    assert_non_null(strstr(bp_comm_errmsg(g), "host_alloc and host_free"));
    mem.host_alloc = NULL;
    assert_int_equal(bp_comm_set_memory(g, &mem), BP_OK);
    for (int k = 0; k < 3; k++) allreduce_on_device(g, d, N);
    assert_int_equal(got.allocs, 1);
    assert_int_equal(bp_comm_destroy(g), BP_OK);
    assert_int_equal(got.frees, 1);
    dev_free(d);
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_blocks_are_reused),
        cmocka_unit_test(test_pool_grows),
        cmocka_unit_test(test_live_stagings_take_blocks_of_their_own),
        cmocka_unit_test(test_requests_hold_blocks_until_the_wait),
        cmocka_unit_test(test_set_memory_again),
    };
    return run_mpi_tests(argc, argv, "comm staging", tests, sizeof tests / sizeof tests[0]);
}
