/* Device buffers over NCCL or staged through pinned host memory (gpu_comm.h). */
#include "comm/cuda/gpu_comm.h"

#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef BP_HAVE_NCCL
#include <nccl.h>
#endif

#include "comm/internal.h"
#include "core/timer.h"

struct bp_gpu_comm {
    bp_comm *c;
    bp_cuda *cu;
    bp_gpu_path path;
    void *host; /* pinned staging buffer */
    size_t host_bytes;
#ifdef BP_HAVE_NCCL
    ncclComm_t nccl;
#endif
};

const char *bp_gpu_path_name(bp_gpu_path p) {
    return p == BP_GPU_PATH_NCCL ? "nccl" : p == BP_GPU_PATH_STAGED ? "mpi" : "auto";
}

bp_gpu_path bp_gpu_comm_path(const bp_gpu_comm *g) { return g->path; }

/* ---- which GPU each rank has, and NCCL ---- */

#ifdef BP_HAVE_NCCL

#define GPU_ID_MAX 96

/* "<host>/<PCI bus id>" of this rank's GPU: two ranks with the same string share it. */
static void gpu_identity(const bp_cuda *cu, char *id) {
    char host[48] = "?", bus[40] = "?";
    gethostname(host, sizeof host - 1);
    if (cudaDeviceGetPCIBusId(bus, (int)sizeof bus, bp_cuda_device(cu)) != cudaSuccess) {
        (void)cudaGetLastError();
        snprintf(bus, sizeof bus, "device %d", bp_cuda_device(cu));
    }
    snprintf(id, GPU_ID_MAX, "%s/%s", host, bus);
}

/* Finds the first two ranks of c that share a GPU (*a, *b); *a is -1 when none do. */
static bp_status shared_gpu(bp_comm *c, const bp_cuda *cu, int *a, int *b, bp_err *err) {
    char mine[GPU_ID_MAX] = {0};
    gpu_identity(cu, mine);
    char *all = calloc((size_t)c->size, GPU_ID_MAX);
    if (!all) return bp_fail(err, BP_ENOMEM, "gpu comm: cannot allocate the GPU table");
    int rc = MPI_Allgather(mine, GPU_ID_MAX, MPI_CHAR, all, GPU_ID_MAX, MPI_CHAR, c->mpi);
    *a = *b = -1;
    for (int i = 0; rc == MPI_SUCCESS && *a < 0 && i < c->size; i++)
        for (int j = i + 1; *a < 0 && j < c->size; j++)
            if (!strncmp(all + (size_t)i * GPU_ID_MAX, all + (size_t)j * GPU_ID_MAX, GPU_ID_MAX)) {
                *a = i;
                *b = j;
            }
    free(all);
    return rc == MPI_SUCCESS ? BP_OK : bpc_mpi_error(rc, "MPI_Allgather", err);
}

static bp_status nccl_init(bp_gpu_comm *g, bp_err *err) {
    ncclUniqueId id;
    ncclResult_t r = ncclSuccess;
    if (g->c->rank == 0) r = ncclGetUniqueId(&id);
    /* every rank must take part in the broadcast, whatever rank 0 got */
    int ok = r == ncclSuccess, mrc = MPI_Bcast(&ok, 1, MPI_INT, 0, g->c->mpi);
    if (mrc == MPI_SUCCESS && ok) mrc = MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, g->c->mpi);
    if (mrc != MPI_SUCCESS) return bpc_mpi_error(mrc, "MPI_Bcast of the NCCL id", err);
    if (!ok) return bp_fail(err, BP_ECOMM, "ncclGetUniqueId failed on rank 0");
    r = ncclCommInitRank(&g->nccl, g->c->size, id, g->c->rank);
    if (r != ncclSuccess)
        return bp_fail(err, BP_ECOMM, "ncclCommInitRank: %s", ncclGetErrorString(r));
    return BP_OK;
}
#endif

static bp_status choose_path(bp_gpu_comm *g, bp_gpu_path want, bp_err *err) {
    if (want == BP_GPU_PATH_STAGED) return BP_OK;
#ifndef BP_HAVE_NCCL
    (void)g;
    if (want == BP_GPU_PATH_NCCL)
        return bp_fail(err, BP_EUSAGE, "--gpu-comm nccl: this bagpipe was built without NCCL");
    return BP_OK;
#else
    if (want == BP_GPU_PATH_AUTO && bpc_net_on(g->c->world)) return BP_OK;
    int a, b, rc = shared_gpu(g->c, g->cu, &a, &b, err);
    if (rc) return rc;
    if (a >= 0 && want == BP_GPU_PATH_NCCL)
        return bp_fail(err, BP_EUSAGE,
                       "--gpu-comm nccl: ranks %d and %d of group '%s' share one GPU, which NCCL "
                       "refuses; use --gpu-comm mpi",
                       a, b, g->c->name);
    if (a >= 0) return BP_OK;
    rc = nccl_init(g, err);
    if (rc == BP_OK) g->path = BP_GPU_PATH_NCCL;
    return rc;
#endif
}

bp_status bp_gpu_comm_create(bp_comm *c, bp_cuda *cu, bp_gpu_path want, bp_gpu_comm **out,
                             bp_err *err) {
    *out = NULL;
    bp_gpu_comm *g = calloc(1, sizeof *g);
    if (!g) return bp_fail(err, BP_ENOMEM, "gpu comm: cannot allocate");
    g->c = c;
    g->cu = cu;
    g->path = BP_GPU_PATH_STAGED;
    bp_status rc = choose_path(g, want, err);
    if (rc) {
        free(g);
        return rc;
    }
    *out = g;
    return BP_OK;
}

void bp_gpu_comm_destroy(bp_gpu_comm *g) {
    if (!g) return;
#ifdef BP_HAVE_NCCL
    if (g->path == BP_GPU_PATH_NCCL) ncclCommDestroy(g->nccl);
#endif
    bp_cuda_free_host(g->host);
    free(g);
}

/* ---- the staged path ---- */

static bp_status record(bp_gpu_comm *g, bp_status rc, const bp_err *err) {
    return rc ? bpc_comm_record(g->c, rc, err) : BP_OK;
}

static bp_status stage(bp_gpu_comm *g, size_t bytes) {
    if (bytes <= g->host_bytes) return BP_OK;
    bp_err err = {0};
    bp_cuda_free_host(g->host);
    g->host_bytes = 0;
    bp_status rc = bp_cuda_alloc_host(&g->host, bytes, "the staging buffer", &err);
    if (rc == BP_OK) g->host_bytes = bytes;
    return record(g, rc, &err);
}

static bp_status down(bp_gpu_comm *g, const void *x, size_t bytes) {
    bp_err err = {0};
    bp_status rc = stage(g, bytes);
    if (!rc) rc = record(g, bp_cuda_download(g->cu, g->host, x, bytes, &err), &err);
    return rc;
}

static bp_status up(bp_gpu_comm *g, void *x, size_t bytes) {
    bp_err err = {0};
    return record(g, bp_cuda_upload(g->cu, x, g->host, bytes, &err), &err);
}

typedef bp_status (*host_op)(bp_comm *c, float *x, size_t n, const void *arg);

static bp_status staged(bp_gpu_comm *g, float *x, size_t n, bool in, bool out, host_op fn,
                        const void *arg) {
    size_t bytes = n * sizeof *x;
    bp_status rc = in ? down(g, x, bytes) : stage(g, bytes);
    if (!rc) rc = fn(g->c, (float *)g->host, n, arg);
    if (!rc && out) rc = up(g, x, bytes);
    return rc;
}

static bp_status h_sum(bp_comm *c, float *x, size_t n, const void *arg) {
    (void)arg;
    return bp_allreduce_sum(c, x, n);
}
static bp_status h_avg(bp_comm *c, float *x, size_t n, const void *arg) {
    (void)arg;
    return bp_allreduce_avg(c, x, n);
}
static bp_status h_bcast(bp_comm *c, float *x, size_t n, const void *arg) {
    return bp_bcast(c, x, n, *(const int *)arg);
}
static bp_status h_send(bp_comm *c, float *x, size_t n, const void *arg) {
    const int *pt = arg;
    return bp_send(c, x, n, pt[0], pt[1]);
}
static bp_status h_recv(bp_comm *c, float *x, size_t n, const void *arg) {
    const int *pt = arg;
    return bp_recv(c, x, n, pt[0], pt[1]);
}
static bp_status h_lp(bp_comm *c, float *x, size_t n, const void *arg) {
    return bp_allreduce_avg_lp(c, x, n, (bp_codec *)arg);
}

/* ---- NCCL operations ---- */

#ifdef BP_HAVE_NCCL
/* The emulated network's time for what NCCL just did, as a ring of 2 (size - 1) steps
 * of bytes / size each to the right neighbour (allreduce), or one message. */
static void emulate(bp_gpu_comm *g, size_t bytes, int steps, int peer) {
    bp_comm *c = g->c;
    double sent, arrive = 0, until = 0;
    for (int s = 0; s < steps; s++)
        if (bpc_net_reserve(c->world, c->proc[peer], bytes, &sent, &arrive) && arrive > until)
            until = arrive;
    if (until > 0) bp_sleep_until(until);
}

typedef enum nccl_kind { N_SUM, N_AVG, N_BCAST, N_SEND, N_RECV } nccl_kind;

static bp_status nccl_op(bp_gpu_comm *g, bp_op kind, nccl_kind what, float *x, size_t n, int peer) {
    bp_comm *c = g->c;
    op_ctx op;
    bpc_op_begin(&op, c, kind, n);
    atomic_store(&op.waiting_for, what == N_RECV ? c->proc[peer] : -1);
    cudaStream_t s = (cudaStream_t)bp_cuda_stream(g->cu);
    double t0 = bp_now();
    ncclResult_t r;
    switch (what) {
    case N_SUM:
    case N_AVG:
        r = ncclAllReduce(x, x, n, ncclFloat, what == N_SUM ? ncclSum : ncclAvg, g->nccl, s);
        break;
    case N_BCAST: r = ncclBroadcast(x, x, n, ncclFloat, peer, g->nccl, s); break;
    case N_SEND: r = ncclSend(x, n, ncclFloat, peer, g->nccl, s); break;
    default: r = ncclRecv(x, n, ncclFloat, peer, g->nccl, s); break;
    }
    bp_status rc = BP_OK;
    if (r != ncclSuccess)
        rc = bpc_op_fail(&op, BP_ECOMM, "nccl: %s", ncclGetErrorString(r));
    bp_err err = {0};
    if (!rc && (rc = bp_cuda_sync(g->cu, "nccl", &err))) rc = bpc_op_fail(&op, rc, "%s", err.msg);
    size_t bytes = n * sizeof *x, p = (size_t)c->size;
    if (!rc && c->size > 1) {
        if (what == N_SUM || what == N_AVG)
            emulate(g, bytes / p, 2 * (c->size - 1), (c->rank + 1) % c->size);
        else if (what == N_SEND || (what == N_BCAST && c->rank == peer))
            emulate(g, bytes, 1, what == N_SEND ? peer : (c->rank + 1) % c->size);
    }
    size_t sent = what == N_RECV || (what == N_BCAST && c->rank != peer) ? 0 : bytes;
    size_t recv = what == N_SEND || (what == N_BCAST && c->rank == peer) ? 0 : bytes;
    bpc_op_mpi_done(&op, t0, sent, recv);
    return bpc_op_end(&op, rc);
}
#define NCCL_OR(g, call) \
    if ((g)->path == BP_GPU_PATH_NCCL) return call
#else
#define NCCL_OR(g, call) (void)(g)
#endif

bp_status bp_gpu_allreduce_sum(bp_gpu_comm *g, float *x, size_t n) {
    NCCL_OR(g, nccl_op(g, BP_OP_ALLREDUCE, N_SUM, x, n, 0));
    return staged(g, x, n, true, true, h_sum, NULL);
}

bp_status bp_gpu_allreduce_avg(bp_gpu_comm *g, float *x, size_t n) {
    NCCL_OR(g, nccl_op(g, BP_OP_ALLREDUCE, N_AVG, x, n, 0));
    return staged(g, x, n, true, true, h_avg, NULL);
}

bp_status bp_gpu_bcast(bp_gpu_comm *g, float *x, size_t n, int root) {
    NCCL_OR(g, nccl_op(g, BP_OP_BCAST, N_BCAST, x, n, root));
    return staged(g, x, n, g->c->rank == root, g->c->rank != root, h_bcast, &root);
}

bp_status bp_gpu_send(bp_gpu_comm *g, const float *x, size_t n, int peer, int tag) {
    NCCL_OR(g, nccl_op(g, BP_OP_SEND, N_SEND, (float *)x, n, peer));
    int pt[2] = {peer, tag};
    return staged(g, (float *)x, n, true, false, h_send, pt);
}

bp_status bp_gpu_recv(bp_gpu_comm *g, float *x, size_t n, int peer, int tag) {
    NCCL_OR(g, nccl_op(g, BP_OP_RECV, N_RECV, x, n, peer));
    int pt[2] = {peer, tag};
    return staged(g, x, n, false, true, h_recv, pt);
}

bp_status bp_gpu_allreduce_avg_lp(bp_gpu_comm *g, float *x, size_t n, bp_codec *codec) {
    return staged(g, x, n, true, true, h_lp, codec);
}
