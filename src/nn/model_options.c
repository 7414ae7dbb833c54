#include "nn/model_options.h"

#define S bp_model_settings
static const bp_option options[] = {
    BP_OPT_NUM(S, "layers", BP_OPT_INT, layers, 1, 1024, "L", "gpt: transformer blocks"),
    BP_OPT_NUM(S, "embd", BP_OPT_INT, embd, 1, 65536, "C", "gpt: channels"),
    BP_OPT_NUM(S, "heads", BP_OPT_INT, heads, 1, 1024, "H",
               "gpt: attention heads (must divide --embd)"),
    BP_OPT_NUM(S, "seq-len", BP_OPT_INT, seq_len, 1, 65536, "T", "gpt: sequence length"),
    BP_OPT_NUM(S, "hidden", BP_OPT_INT, hidden, 1, 1 << 20, "H", "mlp: width of the hidden layers"),
    BP_OPT_NUM(S, "hidden-layers", BP_OPT_INT, hidden_layers, 1, 64, "N",
               "mlp: number of hidden layers"),
};
#undef S
static const bp_model_settings defaults = {
    .layers = 4, .embd = 128, .heads = 4, .seq_len = 64, .hidden = 256, .hidden_layers = 2};
const bp_option_group bp_model_options = BP_OPTION_GROUP(options, defaults);

void bp_model_settings_config(const bp_model_settings *s, bp_model_kind kind, bp_model_config *m) {
    bp_model_config_init(m, kind);
    m->n_layer = s->layers;
    m->n_embd = s->embd;
    m->n_head = s->heads;
    m->seq_len = s->seq_len;
    m->hidden = s->hidden;
    m->n_hidden = s->hidden_layers;
    bp_model_config_trim(m);
}

bp_status bp_model_settings_check(const bp_model_settings *s, bp_model_kind kind, bp_err *err) {
    bp_model_config m;
    bp_model_settings_config(s, kind, &m);
    if (m.n_head && m.n_embd % m.n_head != 0)
        return bp_fail(err, BP_EUSAGE, "option --heads: %d does not divide --embd %d", s->heads,
                       s->embd);
    return BP_OK;
}
