/* Communication of device buffers over a bp_comm group.
 *
 * Two paths, chosen once per group when it is made:
 *   - NCCL, when every rank of the group has a GPU of its own (NCCL refuses two ranks
 *     on one GPU). The NCCL communicator is bootstrapped through the group: rank 0's
 *     unique id is broadcast with MPI_Bcast on the group's communicator, so one made on
 *     each axis group of the grid (dp, pp, tp) is split along that axis.
 *   - staged: the buffer goes through pinned host memory and the group's own
 *     operations (bagpipe/comm.h), which is the path for several ranks on one GPU.
 * BP_GPU_PATH_AUTO takes NCCL when it can, and the staged path while network emulation
 * is on (it emulates every message). Either path counts calls, messages and bytes in
 * the group's counters (NCCL's like MPI's collectives: one message per call and the
 * payload this rank contributes and gets back), is watched by the watchdog, and pays
 * the emulated network: a forced NCCL operation waits, after it completed, for the
 * time a ring would have taken on the emulated links.
 *
 * Device pointers are on the GPU of the bp_cuda context; calls wait for completion
 * (the context's stream is synchronized before and after). Point-to-point messages on
 * the NCCL path are matched in order per peer: NCCL has no tags, so `tag` serves the
 * staged path only, and the two sides must issue their messages in the same order. */
#ifndef BP_COMM_CUDA_GPU_COMM_H
#define BP_COMM_CUDA_GPU_COMM_H

#include "bagpipe/comm.h"
#include "core/cuda/cuda.h"

/* The order of --gpu-comm's choices (auto|nccl|mpi). */
typedef enum bp_gpu_path { BP_GPU_PATH_AUTO, BP_GPU_PATH_NCCL, BP_GPU_PATH_STAGED } bp_gpu_path;

typedef struct bp_gpu_comm bp_gpu_comm;

/* Collective over c. BP_EUSAGE when NCCL is asked for and cannot be used (built
 * without NCCL, or two ranks of c on one GPU: the message names them). c and cu must
 * outlive the result. */
bp_status bp_gpu_comm_create(bp_comm *c, bp_cuda *cu, bp_gpu_path want, bp_gpu_comm **out,
                             bp_err *err);
/* Collective over the group. */
void bp_gpu_comm_destroy(bp_gpu_comm *g);
/* BP_GPU_PATH_NCCL or BP_GPU_PATH_STAGED. */
bp_gpu_path bp_gpu_comm_path(const bp_gpu_comm *g);
const char *bp_gpu_path_name(bp_gpu_path p);

/* The operations of bagpipe/comm.h on device buffers; errors as the group's
 * (bp_comm_errmsg). */
bp_status bp_gpu_allreduce_sum(bp_gpu_comm *g, float *x, size_t n);
bp_status bp_gpu_allreduce_avg(bp_gpu_comm *g, float *x, size_t n);
bp_status bp_gpu_bcast(bp_gpu_comm *g, float *x, size_t n, int root);
bp_status bp_gpu_send(bp_gpu_comm *g, const float *x, size_t n, int peer, int tag);
bp_status bp_gpu_recv(bp_gpu_comm *g, float *x, size_t n, int peer, int tag);
/* C_LP_S with a codec of compress/ on the host copy (staged on either path: the
 * codec's wire is what travels). */
bp_status bp_gpu_allreduce_avg_lp(bp_gpu_comm *g, float *x, size_t n, bp_codec *codec);

#endif
