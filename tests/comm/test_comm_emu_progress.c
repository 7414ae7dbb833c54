/* A rank that waits on its emulated device keeps its messages moving
 * (bp_comm_progress handed to core/backend_emu.h's progress hook, as the trainer
 * does): rank 0 posts a send of 1 MiB, over Open MPI's TCP eager limit (64 KiB; the
 * test runs on TCP), to rank 1 and then waits on its device for a kernel that ends
 * only once rank 1 has the message. Rank 1 says so outside MPI (a file), so the
 * only MPI calls rank 0 makes meanwhile are the hook's: without the hook the send
 * stalls and the wait ends by its fail-safe instead. Nothing here depends on the
 * machine's speed: the kernel's end is decided by the message, not a clock. */
#include <time.h>
#include <unistd.h>

#include "comm/mpi_test.h"
#include "core/backend_emu.h"

#define N (1u << 18) /* floats: 1 MiB */
#define TAG 7
#define FAILSAFE_S 20.0 /* rank 1's receive of a moving message takes milliseconds */

static const bp_device_sheet sheet = {.name = "test", .title = "Test-GPU", .fp32_flops = 1e12,
                                      .tf32_flops = 1e12, .mem_Bps = 1e9, .mem_bytes = 1e9,
                                      .launch_s = 0, .host_Bps = 1e9};

/* The device's clock on rank 0: time stands at 0 until rank 1's file exists (or the
 * fail-safe passes), then jumps past every kernel. */
typedef struct gate {
    char path[64];
    double t0; /* real seconds at the start */
    bool timed_out;
} gate;

static double real_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
static double g_now(void *ctx) {
    gate *g = ctx;
    if (access(g->path, F_OK) == 0) return 1e6;
    if (real_s() - g->t0 > FAILSAFE_S) {
        g->timed_out = true;
        return 1e6;
    }
    return 0;
}
static void g_sleep(void *ctx, double t) {
    (void)ctx, (void)t;
    usleep(1000);
}

static bool progress_world(void *ctx) { return bp_comm_progress(ctx); }

/* Rank 0's side: the send, then a device wait through which only the hook calls MPI. */
static void send_then_wait_on_device(gate *g, const float *x) {
    bp_emu_config cfg = {.sheet = &sheet,
                         .rate = {.flops = 1e12, .mem_Bps = 1e9, .efficiency = 1},
                         .dilation = 1,
                         .clock = {g_now, g_sleep, g}};
    bp_backend *be = NULL;
    bp_err err;
    assert_int_equal(bp_backend_emu_create(&cfg, &be, &err), BP_OK);
    bp_backend_emu_set_progress(be, &(bp_emu_progress){progress_world, world, 1e-3});
    bp_request *req = NULL;
    assert_int_equal(bp_isend(world, x, N, 1, TAG, &req), BP_OK);
    g->t0 = real_s();
    bp_backend_emu_sync(be, bp_backend_emu_kernel(be, NULL, 1.0));
    assert_false(g->timed_out); /* the wait ended because rank 1 had the message */
    assert_int_equal(bp_wait(&req), BP_OK);
    assert_false(bp_comm_progress(world)); /* nothing in flight any more */
    bp_backend_emu_destroy(be);
}

static void a_send_moves_while_its_rank_waits_on_the_device(void **state) {
    (void)state;
    gate g = {0};
    int pid = me == 0 ? (int)getpid() : 0;
    MPI_Bcast(&pid, 1, MPI_INT, 0, MPI_COMM_WORLD);
    snprintf(g.path, sizeof g.path, "/tmp/bp-progress-%d", pid);
    float *x = floats(N);
    if (me == 0) {
        for (size_t i = 0; i < N; i++) x[i] = value_of(0, i, TAG);
        send_then_wait_on_device(&g, x);
        unlink(g.path);
    } else if (me == 1) {
        assert_int_equal(bp_recv(world, x, N, 0, TAG), BP_OK);
        for (size_t i = 0; i < N; i++) assert_true(x[i] == value_of(0, i, TAG));
        FILE *f = fopen(g.path, "w");
        assert_non_null(f);
        fclose(f);
    }
    free(x);
    MPI_Barrier(MPI_COMM_WORLD);
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_send_moves_while_its_rank_waits_on_the_device),
    };
    return run_mpi_tests(argc, argv, "comm_emu_progress", tests, sizeof tests / sizeof tests[0]);
}
