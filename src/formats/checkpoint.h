/* Checkpoints: everything a run needs to continue bit-identically.
 *
 * Layout of an output directory:
 *   DIR/ckpt-00000500/manifest.json          step, grid (dp x pp x tp), algorithm, how the
 *                                            dp replicas were combined, the list of shards,
 *                                            the replica files with owner and CRC-32,
 *                                            and a CRC-32 of the manifest itself
 *   DIR/ckpt-00000500/stage0-tp0.safetensors weights of pipeline stage 0, tensor-parallel
 *                                            rank 0 (+ model configuration as metadata)
 *   DIR/ckpt-00000500/stage0-tp0.state       step, data-sampler state, optimizer state,
 *                                            size and CRC-32 of the .safetensors, own CRC
 *   DIR/ckpt-00000500/stage0-tp0-dp1.replica what rank (dp 1, stage 0, tp 0) keeps beyond
 *                                            the consensus model (replica_file.c), when
 *                                            the run keeps anything: its replicas' own
 *                                            weights and optimizer buffers, an elastic
 *                                            center, error feedback and PowerSGD's Q
 *   DIR/latest                               "ckpt-00000500": the newest complete one
 * One shard per (stage, tp rank); data-parallel replicas share their shard, the
 * consensus model, which resumes on any --dp; the replica files make a resume on
 * the same grid and options exact where the replicas differ or carry state. Every
 * file is written atomically (core/file.h); `latest` is switched only after every
 * shard and the manifest are on disk, so an interrupted save leaves the previous
 * checkpoint intact and pointed to. A flipped byte anywhere fails a CRC on load. */
#ifndef BP_FORMATS_CHECKPOINT_H
#define BP_FORMATS_CHECKPOINT_H

#include <stdint.h>

#include "bagpipe/status.h"
#include "core/rng.h"
#include "core/state.h"
#include "nn/model.h"
#include "nn/optim.h"
#include "formats/safetensors.h"

/* Training progress besides weights and optimizer moments. */
/* Bounds of the sampler state accepted from a checkpoint: epochs a run could
 * reach, and positions in a data set of int-indexed items. */
#define BP_MAX_EPOCH ((int64_t)1 << 40)
#define BP_MAX_ITEMS ((int64_t)1 << 30)

typedef struct bp_resume_state {
    int64_t step;    /* optimizer steps completed */
    bp_rng data_rng; /* text sampler */
    int64_t epoch;   /* image sampler */
    int64_t pos;     /* image sampler */
} bp_resume_state;

typedef struct bp_manifest {
    int64_t step;
    int dp, pp, tp;      /* the grid that wrote it */
    char dp_algo[128];   /* algorithm and settings */
    char replicas[16];   /* "identical" (dp replicas were equal) or "averaged" */
    char partition[256]; /* blocks per stage, "2,3,3" */
    /* The options that shape the replica files ("" when there are none): every
     * rank of the dp x pp x tp grid wrote one. */
    char replica_key[512];
    double bucket_mb; /* the size --bucket-mb auto measured (0: none) */
    /* Writing only: each replica file's CRC-32, in the order of
     * bp_checkpoint_replica_index (not owned). Read back with bp_manifest_replica_crcs. */
    const uint32_t *replica_crc;
} bp_manifest;

/* "stage<s>-tp<t>.<ext>" */
bp_status bp_checkpoint_shard_name(int stage, int tp, const char *ext, char *buf, size_t n);
/* out_dir/ckpt-<step, 8 digits> */
bp_status bp_checkpoint_dir(const char *out_dir, int64_t step, char *buf, size_t n, bp_err *err);

/* Write the shard (stage, tp) into ckpt_dir: the weights `params` laid out as the
 * tensors of m (usually bp_model_params(m); an average of replicas otherwise) and
 * the optimizer state of o. */
bp_status bp_checkpoint_write_shard(const char *ckpt_dir, int stage, int tp, const bp_model *m,
                                    const bp_real *params, const bp_optim *o,
                                    const bp_resume_state *rs, bp_err *err);
/* After a failed save (a full disk): remove shard (stage, tp) and the directory when
 * it is left empty, so that no incomplete checkpoint stays behind. */
void bp_checkpoint_discard_shard(const char *ckpt_dir, int stage, int tp);
/* "stage<s>-tp<t>-dp<d>.replica" */
bp_status bp_checkpoint_replica_name(int stage, int tp, int d, char *buf, size_t n);
/* The place of rank (d, stage, tp)'s replica file among a manifest's (stage, then tp,
 * then dp) on a grid of tps x dps. */
int bp_checkpoint_replica_index(int stage, int tp, int d, int tps, int dps);
/* Write the replica file of rank (d, stage, tp): the buffers of l by name; *crc is
 * the file's CRC-32, for the manifest. */
bp_status bp_checkpoint_write_replica(const char *ckpt_dir, int stage, int tp, int d,
                                      int64_t step, const bp_state_list *l, uint32_t *crc,
                                      bp_err *err);
/* After a failed save: remove that file, and the directory when it is left empty. */
void bp_checkpoint_discard_replica(const char *ckpt_dir, int stage, int tp, int d);
/* Copy the replica file of rank (d, stage, tp) into l's buffers: it must be of
 * `step`, pass its CRC, be the file the manifest lists for this rank (its CRC the
 * listed one of `crcs`, the manifest's; NULL for a manifest that lists none), and
 * hold exactly l's names and sizes, in order (BP_EFORMAT naming the file otherwise:
 * another rank's file, swapped or copied, or one of another run). */
bp_status bp_checkpoint_read_replica(const char *ckpt_dir, const bp_manifest *mf, int stage,
                                     int tp, int d, const uint32_t *crcs, const bp_state_list *l,
                                     bp_err *err);
/* Write ckpt_dir/manifest.json (after every shard is written). */
bp_status bp_manifest_write(const char *ckpt_dir, const bp_manifest *mf, bp_err *err);
/* Read and verify ckpt_dir/manifest.json. */
bp_status bp_manifest_read(const char *ckpt_dir, bp_manifest *mf, bp_err *err);
/* The CRC-32 of each of the manifest's replica files (mf, as read, gives the grid)
 * into a new array *crcs, in the order of bp_checkpoint_replica_index; NULL when it
 * lists none (a checkpoint without replica files, or of an older version). */
bp_status bp_manifest_replica_crcs(const char *ckpt_dir, const bp_manifest *mf, uint32_t **crcs,
                                   bp_err *err);
/* Point out_dir/latest at the checkpoint of `step` and remove older ones beyond
 * the newest `keep`. */
bp_status bp_checkpoint_commit(const char *out_dir, int64_t step, int keep, bp_err *err);
/* The checkpoint directory that `dir` means: dir/latest's target when dir is an
 * output directory, else dir itself. */
bp_status bp_checkpoint_resolve(const char *dir, char *out, size_t n, bp_err *err);

typedef struct bp_checkpoint {
    char dir[4096]; /* the ckpt-* directory actually read */
    bp_manifest manifest;
    bp_safetensors weights;
    char weights_name[64]; /* its file in dir, e.g. "stage0-tp0.safetensors" */
    bp_bytes state;
    bp_resume_state rs;
    int optim_kind;
    int64_t optim_t;
    uint64_t n_params;
    const uint8_t *moments; /* optimizer buffers inside `state`, n_params floats each */
} bp_checkpoint;

/* Open shard (stage, tp) of the checkpoint `dir` means (see bp_checkpoint_resolve),
 * verifying the manifest, both CRCs and the safetensors structure. */
bp_status bp_checkpoint_open(const char *dir, int stage, int tp, bp_checkpoint *ck, bp_err *err);
void bp_checkpoint_close(bp_checkpoint *ck);

/* The model configuration recorded in the checkpoint. */
bp_status bp_checkpoint_model_config(const bp_checkpoint *ck, bp_model_config *cfg, bp_err *err);
/* Copy weights into m; every tensor of m must be present with the same shape. */
bp_status bp_checkpoint_load_model(const bp_checkpoint *ck, bp_model *m, bp_err *err);
/* Copy the tensors of m that this shard holds (same shape required) and count them
 * in *loaded: for assembling a whole model from the shards of several stages. */
bp_status bp_checkpoint_load_present(const bp_checkpoint *ck, bp_model *m, int *loaded, bp_err *err);
/* The whole model of the checkpoint `dir` means, assembled from the shards of all
 * its pipeline stages (e.g. for sampling). */
bp_status bp_checkpoint_load_whole(const char *dir, bp_model **out, bp_err *err);

/* Copy optimizer state into o (same kind and size). */
bp_status bp_checkpoint_load_optim(const bp_checkpoint *ck, bp_optim *o, bp_err *err);

#endif
