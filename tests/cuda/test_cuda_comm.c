/* Device-buffer communication (comm/cuda/gpu_comm.h) on 2 ranks against the group's
 * host operations on the same data:
 *   - the path chosen: NCCL when the ranks have GPUs of their own, staged when they
 *     share one; forcing NCCL on a shared GPU fails with one line naming the ranks;
 *   - allreduce (sum, average), broadcast, send/recv and allreduce_lp (MinMaxUInt8):
 *     the staged path gives the host operations' bits, NCCL the same values within
 *     float rounding; the group's counters count the calls;
 *   - NCCL on a group of one rank (each rank alone: the path that one GPU can run).
 * Skipped (77, on every rank) without a GPU. */
#include "bagpipe/comm.h"
#include "comm/cuda/gpu_comm.h"
#include "cuda_test.h"

static int failures;

static void expect(int ok, const char *what, int rank) {
    if (rank == 0 || !ok) printf("rank %d: %s%s\n", rank, what, ok ? "" : "  FAIL");
    failures += !ok;
}

/* x [n] on the device against want, exactly (staged) or within 1e-6 (NCCL). */
static void same(bp_cuda *cu, const float *xd, const float *want, size_t n, bp_gpu_path p,
                 const char *what, int rank) {
    float *got = cu_down(cu, BP_CUDA_F32, xd, n);
    bool ok = p == BP_GPU_PATH_STAGED ? memcmp(got, want, n * sizeof *got) == 0
                                      : cu_rel(got, want, n) <= 1e-6;
    char line[160];
    snprintf(line, sizeof line, "%s (%s path)", what, bp_gpu_path_name(p));
    expect(ok, line, rank);
    free(got);
}

static uint64_t calls(bp_comm *c, bp_op op) {
    bp_stats s;
    bp_comm_stats(c, &s, false);
    return s.op[op].calls;
}

static void ops(bp_comm *w, bp_cuda *cu, bp_gpu_comm *g) {
    int rank = bp_comm_rank(w);
    bp_gpu_path p = bp_gpu_comm_path(g);
    enum { N = 100003 };
    float *x = cu_normal(N, 1, 10 + (uint64_t)rank), *h = cu_host(N);
    float *xd = cu_up32(cu, x, N);
    uint64_t before = calls(w, BP_OP_ALLREDUCE);
    memcpy(h, x, N * sizeof *h);
    bp_allreduce_sum(w, h, N);
    expect(bp_gpu_allreduce_sum(g, xd, N) == BP_OK, "allreduce_sum ran", rank);
    same(cu, xd, h, N, p, "allreduce_sum equals the host's", rank);
    expect(calls(w, BP_OP_ALLREDUCE) == before + 2, "allreduce counted", rank);
    bp_err err = {0};
    cu_ok(bp_cuda_upload(cu, xd, x, N * sizeof *x, &err), &err);
    memcpy(h, x, N * sizeof *h);
    bp_allreduce_avg(w, h, N);
    bp_gpu_allreduce_avg(g, xd, N);
    same(cu, xd, h, N, p, "allreduce_avg equals the host's", rank);
    cu_ok(bp_cuda_upload(cu, xd, x, N * sizeof *x, &err), &err);
    memcpy(h, x, N * sizeof *h);
    bp_bcast(w, h, N, 1);
    bp_gpu_bcast(g, xd, N, 1);
    same(cu, xd, h, N, p, "bcast from rank 1 equals the host's", rank);
    cu_ok(bp_cuda_upload(cu, xd, x, N * sizeof *x, &err), &err);
    if (rank == 0) {
        bp_gpu_send(g, xd, N, 1, 5);
    } else if (rank == 1) {
        float *want = cu_normal(N, 1, 10);
        bp_gpu_recv(g, xd, N, 0, 5);
        same(cu, xd, want, N, BP_GPU_PATH_STAGED, "recv got rank 0's buffer", rank);
        free(want);
    }
    bp_codec *mm;
    cu_ok(bp_codec_minmax_u8_create(&mm, &err), &err);
    cu_ok(bp_cuda_upload(cu, xd, x, N * sizeof *x, &err), &err);
    memcpy(h, x, N * sizeof *h);
    bp_allreduce_avg_lp(w, h, N, mm);
    bp_gpu_allreduce_avg_lp(g, xd, N, mm);
    same(cu, xd, h, N, BP_GPU_PATH_STAGED, "allreduce_lp (minmax_u8) equals the host's", rank);
    bp_codec_destroy(mm);
    bp_cuda_free(xd);
    free(h);
    free(x);
}

/* NCCL on each rank alone: initialization, an allreduce that leaves x as it is. */
static void nccl_alone(bp_comm *w, bp_cuda *cu) {
    int rank = bp_comm_rank(w);
    bp_comm *self;
    bp_comm_split(w, rank, 0, "self", &self);
    bp_gpu_comm *g;
    bp_err err = {0};
    int rc = bp_gpu_comm_create(self, cu, BP_GPU_PATH_NCCL, &g, &err);
    expect(rc == BP_OK && bp_gpu_comm_path(g) == BP_GPU_PATH_NCCL, "NCCL on a group of one", rank);
    if (rc == BP_OK) {
        float *x = cu_normal(1000, 1, 3), *xd = cu_up32(cu, x, 1000);
        bp_gpu_allreduce_sum(g, xd, 1000);
        same(cu, xd, x, 1000, BP_GPU_PATH_NCCL, "NCCL allreduce over one rank", rank);
        expect(calls(self, BP_OP_ALLREDUCE) == 1, "NCCL allreduce counted", rank);
        bp_gpu_comm_destroy(g);
        bp_cuda_free(xd);
        free(x);
    } else {
        printf("rank %d: %s\n", rank, err.msg);
    }
    bp_comm_destroy(self);
}

int main(int argc, char **argv) {
    bp_comm *w;
    bp_err err = {0};
    cu_ok(bp_comm_init(&argc, &argv, &w, &err), &err);
    const char *why;
    int gpus = bp_device_cuda_count(&why), rank = bp_comm_rank(w);
    if (gpus == 0) { /* every rank sees the same machine here */
        if (rank == 0) printf("SKIPPED: %s\n", why);
        bp_comm_finalize(w);
        return CU_SKIP;
    }
    bp_cuda *cu;
    cu_ok(bp_cuda_create(rank % gpus, false, &cu, &err), &err);
    bool shared = bp_comm_size(w) > gpus;
    bp_gpu_comm *g;
    cu_ok(bp_gpu_comm_create(w, cu, BP_GPU_PATH_AUTO, &g, &err), &err);
    expect(bp_gpu_comm_path(g) == (shared ? BP_GPU_PATH_STAGED : BP_GPU_PATH_NCCL),
           shared ? "auto: staged, the ranks share a GPU" : "auto: NCCL, a GPU per rank", rank);
    ops(w, cu, g);
    bp_gpu_comm_destroy(g);
    if (shared) {
        bp_gpu_comm *n;
        int rc = bp_gpu_comm_create(w, cu, BP_GPU_PATH_NCCL, &n, &err);
        expect(rc == BP_EUSAGE && strstr(err.msg, "ranks 0 and 1 of group 'world' share one GPU"),
               err.msg, rank);
    }
    nccl_alone(w, cu);
    bp_cuda_destroy(cu);
    bp_comm_finalize(w);
    if (rank == 0) printf("%d check(s) failed on rank 0\n", failures);
    return failures ? 1 : 0;
}
