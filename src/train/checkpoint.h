/* Checkpoints: everything a run needs to continue bit-identically.
 *
 * Layout of an output directory:
 *   DIR/ckpt-00000500/model.safetensors   weights (+ model configuration as metadata)
 *   DIR/ckpt-00000500/state.bin           step, data-sampler state, optimizer state,
 *                                         size and CRC-32 of model.safetensors, own CRC
 *   DIR/latest                            "ckpt-00000500": the newest complete one
 * Each file is written atomically (core/file.h) and `latest` is switched only after
 * both files of the new checkpoint are on disk, so an interrupted save leaves the
 * previous checkpoint intact and pointed to. Older checkpoints beyond `keep` are
 * removed after the switch. A flipped byte anywhere fails a CRC check on load. */
#ifndef BP_TRAIN_CHECKPOINT_H
#define BP_TRAIN_CHECKPOINT_H

#include <stdint.h>

#include "bagpipe/status.h"
#include "core/rng.h"
#include "nn/model.h"
#include "nn/optim.h"
#include "train/safetensors.h"

/* Training progress besides weights and optimizer moments. */
typedef struct bp_resume_state {
    int64_t step;     /* optimizer steps completed */
    bp_rng data_rng;  /* text sampler */
    int64_t epoch;    /* image sampler */
    int64_t pos;      /* image sampler */
} bp_resume_state;

int bp_checkpoint_save(const char *out_dir, bp_model *m, const bp_optim *o,
                       const bp_resume_state *rs, int keep, bp_err *err);

typedef struct bp_checkpoint {
    char dir[4096]; /* the ckpt-* directory actually read */
    bp_safetensors weights;
    bp_bytes state;
    bp_resume_state rs;
    int optim_kind;
    int64_t optim_t;
    uint64_t n_params;
    const uint8_t *moments; /* optimizer buffers inside `state`, n_params floats each */
} bp_checkpoint;

/* Open `dir`: an output directory (follows its `latest`) or a ckpt-* directory.
 * Verifies both CRCs and the safetensors structure. */
int bp_checkpoint_open(const char *dir, bp_checkpoint *ck, bp_err *err);
void bp_checkpoint_close(bp_checkpoint *ck);

/* The model configuration recorded in the checkpoint. */
int bp_checkpoint_model_config(const bp_checkpoint *ck, bp_model_config *cfg, bp_err *err);
/* Copy weights into m; every tensor of m must be present with the same shape. */
int bp_checkpoint_load_model(const bp_checkpoint *ck, bp_model *m, bp_err *err);
/* Copy optimizer state into o (same kind and size). */
int bp_checkpoint_load_optim(const bp_checkpoint *ck, bp_optim *o, bp_err *err);

#endif
