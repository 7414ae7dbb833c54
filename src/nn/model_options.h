/* The model's shape (--layers, --embd, --heads, --seq-len for gpt; --hidden,
 * --hidden-layers for mlp), set by the options declared in model_options.c. The
 * kind itself (--model) is the training's; each kind reads the fields it has and
 * bp_model_config_trim clears the others. */
#ifndef BP_NN_MODEL_OPTIONS_H
#define BP_NN_MODEL_OPTIONS_H

#include "bagpipe/status.h"
#include "core/options.h"
#include "nn/model.h"

typedef struct bp_model_settings {
    int layers, embd, heads, seq_len; /* gpt */
    int hidden, hidden_layers;        /* mlp */
} bp_model_settings;

extern const bp_option_group bp_model_options;

/* The configuration of a model of `kind` with this shape. */
void bp_model_settings_config(const bp_model_settings *s, bp_model_kind kind, bp_model_config *m);
/* The combinations the ranges of the options do not catch; the message names the option. */
bp_status bp_model_settings_check(const bp_model_settings *s, bp_model_kind kind, bp_err *err);

#endif
