/* The parts every model shares: configuration check, block ranges, the tensor table
 * over one flat parameter buffer and one flat gradient buffer (of a tensor-parallel
 * shard: the shard's part of each tensor, tp.c), initialization from per-tensor RNG
 * streams, activation storage, the checks of forward/backward arguments and the
 * tensor-parallel allreduce's status. The model kinds (gpt.c, mlp.c) describe their
 * blocks and run them. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/rng.h"
#include "nn/model_impl.h"

#define OPS_ENTRY(K, name) [BP_MODEL_##K] = &bp_##name##_ops,
static const bp_model_ops *const kinds[BP_MODEL_NUM_KINDS] = {BP_MODEL_KINDS(OPS_ENTRY)};

static const bp_model_ops *ops_of(bp_model_kind kind) {
    return (unsigned)kind < BP_MODEL_NUM_KINDS ? kinds[kind] : NULL;
}

const bp_model_facts *bp_model_kind_facts(bp_model_kind kind) {
    const bp_model_ops *ops = ops_of(kind);
    return ops ? &ops->facts : NULL;
}

const char *bp_model_kind_name(bp_model_kind kind) {
    const bp_model_ops *ops = ops_of(kind);
    return ops ? ops->facts.name : "?";
}

bp_status bp_model_kind_parse(const char *name, bp_model_kind *out, bp_err *err) {
    for (int k = 0; k < BP_MODEL_NUM_KINDS; k++)
        if (strcmp(name, kinds[k]->facts.name) == 0) {
            *out = (bp_model_kind)k;
            return BP_OK;
        }
    return bp_fail(err, BP_EFORMAT, "unknown model '%s' (known: %s)", name, BP_MODEL_KIND_CHOICES);
}

const char *bp_model_describe(const bp_model_config *cfg, char *buf, size_t n) {
    const bp_model_ops *ops = ops_of(cfg->kind);
    if (ops) ops->describe(cfg, buf, n);
    else snprintf(buf, n, "a model of unknown kind %d", (int)cfg->kind);
    return buf;
}

bp_status bp_model_config_check(const bp_model_config *cfg, bp_err *err) {
    const bp_model_ops *ops = ops_of(cfg->kind);
    if (!ops)
        return bp_fail(err, BP_EUSAGE, "model config: kind (%d) is not one of %s", cfg->kind,
                       BP_MODEL_KIND_CHOICES);
    return ops->check(cfg, err);
}

/* The functions below that take only a config trust its fields (see
 * bp_model_config_check) but not its kind, so a wrong kind cannot crash them. */
int bp_model_num_blocks(const bp_model_config *cfg) {
    const bp_model_ops *ops = ops_of(cfg->kind);
    return ops ? ops->num_blocks(cfg) : 0;
}

const char *bp_model_block_name(const bp_model_config *cfg, int block, char *buf, size_t n) {
    if (block < 0 || block >= bp_model_num_blocks(cfg))
        snprintf(buf, n, "block %d (out of range)", block);
    else
        ops_of(cfg->kind)->block_name(cfg, block, buf, n);
    return buf;
}

void bp_model_config_init(bp_model_config *cfg, bp_model_kind kind) {
    memset(cfg, 0, sizeof *cfg);
    cfg->kind = kind;
    const bp_model_ops *ops = ops_of(kind);
    if (ops) ops->fixed_sizes(cfg);
}

void bp_model_config_trim(bp_model_config *cfg) {
    const bp_model_ops *ops = ops_of(cfg->kind);
    if (ops) ops->trim(cfg);
}

const char *bp_model_tied_tensor(const bp_model_config *cfg) {
    const bp_model_ops *ops = ops_of(cfg->kind);
    return ops ? ops->tied_tensor : NULL;
}

int bp_model_sample_len(const bp_model_config *cfg) {
    const bp_model_ops *ops = ops_of(cfg->kind);
    return ops ? ops->sample_len(cfg) : 0;
}

int bp_model_input_width(const bp_model_config *cfg) {
    const bp_model_ops *ops = ops_of(cfg->kind);
    return ops ? ops->input_width(cfg) : 0;
}

int bp_model_num_classes(const bp_model_config *cfg) {
    const bp_model_ops *ops = ops_of(cfg->kind);
    return ops ? ops->num_classes(cfg) : 0;
}

double bp_model_block_flops(const bp_model_config *cfg, int tp, int block, int B, int T) {
    if (block < 0 || block >= bp_model_num_blocks(cfg)) return 0; /* also a wrong kind */
    return ops_of(cfg->kind)->block_flops(cfg, tp, block, B, T);
}

size_t bp_model_act_bytes(const bp_model_config *cfg, int tp, int b0, int b1, int B, int T) {
    const bp_model_ops *ops = ops_of(cfg->kind);
    return ops ? ops->act_bytes(cfg, tp, b0, b1, B, T) : 0;
}

int bp_model_boundary_width(const bp_model_config *cfg, int block) {
    if (block < 0 || block > bp_model_num_blocks(cfg)) return 0; /* also a wrong kind */
    return ops_of(cfg->kind)->boundary_width(cfg, block);
}

int bp_model_block_layout(const bp_model_config *cfg, int block, bp_tensor_layout *out) {
    if (block < 0 || block >= bp_model_num_blocks(cfg)) return 0; /* also a wrong kind */
    bp_tensor_spec specs[BP_BLOCK_MAX_TENSORS];
    int n = ops_of(cfg->kind)->block_tensors(cfg, block, specs);
    for (int i = 0; i < n; i++) {
        out[i] = (bp_tensor_layout){.ndim = specs[i].ndim,
                                    .split_dim = specs[i].split_dim,
                                    .split_groups = specs[i].split_groups};
        memcpy(out[i].name, specs[i].name, sizeof out[i].name);
        memcpy(out[i].shape, specs[i].shape, sizeof out[i].shape);
    }
    return n;
}

void bp_tensor_spec_set(bp_tensor_spec *s, const char *name, int d0, int d1, bp_init_kind init,
                        double scale) {
    memset(s, 0, sizeof *s);
    snprintf(s->name, sizeof s->name, "%s", name);
    s->ndim = d1 > 0 ? 2 : 1;
    s->shape[0] = d0;
    s->shape[1] = d1;
    s->init = init;
    s->scale = scale;
    s->split_dim = -1;
    s->split_groups = 1;
}

/* ---- tensor table ---- */

static bool has_tied_copy(const bp_model *m) {
    return m->ops->tied_tensor && m->begin > 0 && m->end == m->ops->num_blocks(&m->cfg);
}

static bp_status alloc_table(bp_model *m, int n, bp_err *err) {
    const char *what = "tensor table";
    size_t nb = (size_t)(m->end - m->begin);
    bp_status rc =
        bp_alloc_checked((void **)&m->tensors, (size_t)n * sizeof *m->tensors, what, err);
    if (!rc) rc = bp_alloc_checked((void **)&m->init, (size_t)n * sizeof *m->init, what, err);
    if (!rc)
        rc = bp_alloc_checked((void **)&m->block_first, nb * sizeof *m->block_first, what, err);
    return rc;
}

/* Appends one tensor (this model's shard of it) at the end of the flat buffers. */
static void add_tensor(bp_model *m, const bp_tensor_spec *s, int block, uint64_t stream,
                       bool copy) {
    bp_tensor_info *t = &m->tensors[m->ntensors];
    memcpy(t->name, s->name, sizeof t->name);
    t->ndim = s->ndim;
    t->full_numel = 1;
    for (int d = 0; d < s->ndim; d++) {
        t->full_shape[d] = s->shape[d];
        t->full_numel *= (size_t)s->shape[d];
    }
    t->split_dim = s->split_dim;
    t->split_groups = s->split_groups;
    t->tp_rank = m->tp.rank;
    t->tp_size = m->tp.size;
    t->numel = bp_tensor_shard_shape(t, m->tp.size, t->shape);
    t->offset = m->nparams;
    t->block = block;
    t->tied_copy = copy;
    m->init[m->ntensors] = (bp_tensor_init){s->init, s->scale, stream};
    m->nparams += t->numel;
    m->ntensors++;
}

static bp_status build_table(bp_model *m, bp_err *err) {
    bp_tensor_spec specs[BP_BLOCK_MAX_TENSORS];
    uint64_t stream = 0; /* index in the full model of the next tensor */
    int count = has_tied_copy(m);
    for (int b = 0; b < m->end; b++) {
        int k = m->ops->block_tensors(&m->cfg, b, specs);
        if (b < m->begin)
            stream += (uint64_t)k;
        else
            count += k;
    }
    bp_status rc = alloc_table(m, count, err);
    if (rc) return rc;
    for (int b = m->begin; b < m->end; b++) {
        int k = m->ops->block_tensors(&m->cfg, b, specs);
        m->block_first[b - m->begin] = m->ntensors;
        for (int j = 0; j < k; j++) add_tensor(m, &specs[j], b, stream++, false);
    }
    if (has_tied_copy(m)) {
        /* Same rule and same stream (0) as the embed block's wte. */
        m->ops->block_tensors(&m->cfg, 0, specs);
        add_tensor(m, &specs[0], m->end - 1, 0, true);
    }
    return BP_OK;
}

/* ---- create / destroy ---- */

static bp_status check_range(const bp_model_config *cfg, int begin, int *end, bp_err *err) {
    int nb = bp_model_num_blocks(cfg);
    if (*end == -1) *end = nb;
    if (begin < 0 || begin >= nb || *end <= begin || *end > nb)
        return bp_fail(err, BP_EUSAGE, "model block range [%d, %d) is not within [0, %d) or empty",
                       begin, *end, nb);
    return BP_OK;
}

bp_status bp_model_tp_check(const bp_model_config *cfg, int tp_size, bp_err *err) {
    bp_status rc = bp_model_config_check(cfg, err);
    if (rc || tp_size == 1) return rc;
    if (tp_size < 1) return bp_fail(err, BP_EUSAGE, "tp size (%d) must be >= 1", tp_size);
    const bp_model_ops *ops = ops_of(cfg->kind);
    if (!ops->check_tp)
        return bp_fail(err, BP_EUSAGE,
                       "tp size %d: tensor parallelism does not split %s; it needs tp 1",
                       tp_size, ops->facts.name);
    return ops->check_tp(cfg, tp_size, err);
}

static bp_status check_tp(const bp_model_config *cfg, const bp_tp *tp, bp_err *err) {
    bp_status rc = bp_model_tp_check(cfg, tp->size, err);
    if (rc) return rc;
    if (tp->rank < 0 || tp->rank >= tp->size)
        return bp_fail(err, BP_EUSAGE, "tp rank (%d) is not in [0, %d)", tp->rank, tp->size);
    if (tp->size > 1 && !tp->allreduce_sum)
        return bp_fail(err, BP_EUSAGE, "tp size %d needs an allreduce_sum callback", tp->size);
    return BP_OK;
}

bp_status bp_model_create(const bp_model_config *cfg, int block_begin, int block_end,
                          bp_model **out, bp_err *err) {
    return bp_model_create_tp(cfg, block_begin, block_end, NULL, out, err);
}

bp_status bp_model_create_tp(const bp_model_config *cfg, int block_begin, int block_end,
                             const bp_tp *tp, bp_model **out, bp_err *err) {
    *out = NULL;
    const bp_tp one = {.rank = 0, .size = 1};
    if (!tp) tp = &one;
    bp_status rc = check_tp(cfg, tp, err);
    if (!rc) rc = check_range(cfg, block_begin, &block_end, err);
    if (rc) return rc;
    bp_model *m = calloc(1, sizeof *m);
    if (!m) return bp_fail(err, BP_ENOMEM, "cannot allocate the model");
    m->cfg = *cfg;
    m->ops = ops_of(cfg->kind);
    m->be = bp_backend_cpu(); /* the layers of nn/ run on the host */
    m->tp = *tp;
    m->begin = block_begin;
    m->end = block_end;
    rc = build_table(m, err);
    if (!rc)
        rc = bp_alloc_checked((void **)&m->params, m->nparams * sizeof(bp_real), "parameters", err);
    if (!rc)
        rc = bp_alloc_checked((void **)&m->grads, m->nparams * sizeof(bp_real), "gradients", err);
    if (rc) {
        bp_model_destroy(m);
        return rc;
    }
    *out = m;
    return BP_OK;
}

void bp_model_destroy(bp_model *m) {
    if (!m) return;
    bp_free(m->tensors);
    bp_free(m->init);
    bp_free(m->block_first);
    if (m->dev) m->dev->detach(m);
    m->be->free(m->be, m->params);
    m->be->free(m->be, m->grads);
    m->be->free(m->be, m->scratch);
    bp_free(m->wcopy);
    free(m);
}

bp_status bp_model_set_bf16(bp_model *m, bp_err *err) {
    if (m->cfg.kind != BP_MODEL_GPT || m->be != bp_backend_cpu() || m->dev)
        return bp_fail(err, BP_EUSAGE,
                       "--dtype bf16 on the cpu: gpt on the cpu backend only (this is %s on %s)",
                       m->ops->facts.name, m->be->name);
    if (m->wcopy || !m->nparams) return BP_OK;
    return bp_alloc_checked((void **)&m->wcopy, m->nparams * sizeof(bp_real), "bf16 weights", err);
}

bp_status bp_model_set_backend(bp_model *m, const bp_backend *be, bp_err *err) {
    return bp_model_set_device(m, be, NULL, false, err);
}

/* Refuses what the host layers or dev cannot run, before anything moves. */
static bp_status check_device(const bp_model *m, const bp_backend *be,
                              const bp_model_device_ops *dev, bool bf16, bp_err *err) {
    if (m->be != bp_backend_cpu() || m->dev)
        return bp_fail(err, BP_EUSAGE, "a model moves to another backend once, from the cpu");
    if (!dev && !be->host_begin)
        return bp_fail(err, BP_EUSAGE, "the layers of nn/ do not run on the %s backend", be->name);
    if (!dev && bf16)
        return bp_fail(err, BP_EUSAGE,
                       "the layers of nn/ compute in fp32 only (bf16 is the "
                       "GPU's)");
    return dev ? dev->check(m, bf16, err) : BP_OK;
}

bp_status bp_model_set_device(bp_model *m, const bp_backend *be, const bp_model_device_ops *dev,
                              bool bf16, bp_err *err) {
    if (be == m->be && !dev) return bf16 ? bp_model_set_bf16(m, err) : BP_OK;
    bp_status rc = check_device(m, be, dev, bf16, err);
    if (rc) return rc;
    size_t bytes = m->nparams * sizeof(bp_real);
    bp_real *p = NULL, *g = NULL;
    rc = bytes ? be->alloc(be, (void **)&p, bytes, "parameters", err) : BP_OK;
    if (!rc && bytes) rc = be->alloc(be, (void **)&g, bytes, "gradients", err);
    if (rc) {
        be->free(be, p);
        return rc;
    }
    if (bytes) {
        m->be->host_begin(m->be, m->params);
        be->to_device(be, p, m->params, bytes);
        m->be->host_end(m->be, m->params);
    }
    m->be->free(m->be, m->params);
    m->be->free(m->be, m->grads);
    m->be->free(m->be, m->scratch);
    m->be = be;
    m->params = p;
    m->grads = g;
    m->scratch = NULL;
    m->scratch_len = 0;
    m->dev = dev;
    if (dev && (rc = dev->attach(m, bf16, err))) m->dev = NULL;
    return rc;
}

/* A device model's buffer as the table's float vectors: devices run fp32 builds only
 * (the double build of nn/ is the gradient checks', on the host). */
static float *dev_floats(bp_real *p) { return (float *)(void *)p; }

/* Host code of nn/ on the model's memory (see bp_model_set_backend). */
static void open_mem(const bp_model *m, const void *p) {
    if (p) m->be->host_begin(m->be, p);
}
static void close_mem(const bp_model *m, const void *p) {
    if (p) m->be->host_end(m->be, p);
}

/* ---- accessors ---- */

const bp_model_config *bp_model_get_config(const bp_model *m) { return &m->cfg; }
int bp_model_block_begin(const bp_model *m) { return m->begin; }
int bp_model_block_end(const bp_model *m) { return m->end; }
int bp_model_tp_rank(const bp_model *m) { return m->tp.rank; }
int bp_model_tp_size(const bp_model *m) { return m->tp.size; }
bool bp_model_has_first(const bp_model *m) { return m->begin == 0; }
bool bp_model_has_last(const bp_model *m) { return m->end == m->ops->num_blocks(&m->cfg); }
const bp_backend *bp_model_backend(const bp_model *m) { return m->be; }
size_t bp_model_num_params(const bp_model *m) { return m->nparams; }
bp_real *bp_model_params(bp_model *m) { return m->params; }
bp_real *bp_model_grads(bp_model *m) { return m->grads; }
int bp_model_num_tensors(const bp_model *m) { return m->ntensors; }
size_t bp_model_workspace_bytes(const bp_model *m) { return m->scratch_len * sizeof(bp_real); }

const bp_tensor_info *bp_model_tensor(const bp_model *m, int i) {
    return i >= 0 && i < m->ntensors ? &m->tensors[i] : NULL;
}

const bp_tensor_info *bp_model_find_tensor(const bp_model *m, const char *name) {
    for (int i = 0; i < m->ntensors; i++)
        if (strcmp(m->tensors[i].name, name) == 0) return &m->tensors[i];
    return NULL;
}

/* ---- initialization ---- */

/* One value drawn by the rule of `in`. */
static bp_real draw(const bp_tensor_init *in, bp_rng *r) {
    switch (in->kind) {
    case BP_INIT_ZERO: return 0;
    case BP_INIT_ONE: return 1;
    case BP_INIT_NORMAL: return (bp_real)(in->scale * bp_rng_normal(r));
    case BP_INIT_UNIFORM: return (bp_real)(in->scale * (2 * bp_rng_uniform(r) - 1));
    }
    return 0;
}

/* Every tp rank draws the whole tensor from its stream and keeps its own runs, so
 * that the shards together are the tensor of one process. */
static void init_tensor(bp_model *m, int i, uint64_t seed) {
    const bp_tensor_info *t = &m->tensors[i];
    bp_shard_runs s = bp_tensor_shard_runs(t, m->tp.size);
    bp_real *p = m->params + t->offset;
    bp_rng r;
    bp_rng_seed(&r, seed, m->init[i].stream);
    for (size_t k = 0; k < s.count; k++) {
        bool mine = k % (size_t)s.parts == (size_t)(m->tp.rank % s.parts);
        bp_real *run = p + k / (size_t)s.parts * s.len;
        for (size_t e = 0; e < s.len; e++) {
            bp_real v = draw(&m->init[i], &r);
            if (mine) run[e] = v;
        }
    }
}

void bp_model_init_weights(bp_model *m, uint64_t seed) {
    if (m->dev && m->dev->no_values) return;
    if (m->dev) { /* drawn on the host, then copied: the same values on every device */
        bp_real *dev = m->params, *host = calloc(m->nparams ? m->nparams : 1, sizeof *host);
        if (!host) { /* weights the step's finite check stops at, naming them */
            m->be->fill(m->be, dev_floats(dev), m->nparams, NAN);
            return;
        }
        m->params = host;
        for (int i = 0; i < m->ntensors; i++) init_tensor(m, i, seed);
        m->params = dev;
        if (m->nparams) m->be->to_device(m->be, dev, host, m->nparams * sizeof *host);
        free(host);
        return;
    }
    open_mem(m, m->params);
    for (int i = 0; i < m->ntensors; i++) init_tensor(m, i, seed);
    close_mem(m, m->params);
}

void bp_model_zero_grad(bp_model *m) {
    if (m->dev) {
        m->be->fill(m->be, dev_floats(m->grads), m->nparams, 0.0f);
        return;
    }
    open_mem(m, m->grads);
    if (m->nparams) memset(m->grads, 0, m->nparams * sizeof(bp_real));
    close_mem(m, m->grads);
}

/* ---- activations ---- */

static bp_status check_acts_dims(const bp_model *m, int B, int T, bp_err *err) {
    int tmax = m->ops->sample_len(&m->cfg);
    if (B < 1) return bp_fail(err, BP_EUSAGE, "activations: batch size B (%d) must be >= 1", B);
    if (T < 1 || T > tmax)
        return bp_fail(err, BP_EUSAGE, "activations: T (%d) must be in [1, %d]", T, tmax);
    /* Row counts are passed to BLAS as int. */
    if ((size_t)B * (size_t)T > (size_t)INT32_MAX / 4)
        return bp_fail(err, BP_EUSAGE, "activations: B*T (%d*%d) is too large", B, T);
    return BP_OK;
}

bp_status bp_acts_create(const bp_model *m, int B, int T, bp_acts **out, bp_err *err) {
    *out = NULL;
    bp_status rc = check_acts_dims(m, B, T, err);
    if (rc) return rc;
    bp_acts *a = calloc(1, sizeof *a);
    if (!a) return bp_fail(err, BP_ENOMEM, "cannot allocate activations");
    a->m = m;
    a->Bmax = B;
    a->Tmax = T;
    if (m->dev) { /* one buffer that the device's kernels lay out themselves */
        a->bytes = m->dev->acts_bytes(m, B, T);
        rc = m->be->alloc(m->be, (void **)&a->buf, a->bytes, "activations", err);
        if (rc) {
            bp_acts_destroy(a);
            return rc;
        }
        *out = a;
        return BP_OK;
    }
    a->nslots = m->ops->acts_slots(m, B, T, NULL);
    size_t *sizes = calloc((size_t)a->nslots, sizeof *sizes);
    a->slot = calloc((size_t)a->nslots, sizeof *a->slot);
    if (!sizes || !a->slot) rc = bp_fail(err, BP_ENOMEM, "cannot allocate activations");
    size_t total = 0;
    if (!rc) {
        m->ops->acts_slots(m, B, T, sizes);
        for (int i = 0; i < a->nslots; i++) total += bp_acts_slot_floats(sizes[i]);
        a->bytes = total * sizeof(bp_real);
        rc = m->be->alloc(m->be, (void **)&a->buf, a->bytes, "activations", err);
    }
    for (size_t i = 0, off = 0; !rc && i < (size_t)a->nslots;
         off += bp_acts_slot_floats(sizes[i]), i++)
        a->slot[i] = a->buf + off;
    free(sizes);
    if (rc) {
        bp_acts_destroy(a);
        return rc;
    }
    *out = a;
    return BP_OK;
}

void bp_acts_destroy(bp_acts *a) {
    if (!a) return;
    a->m->be->free(a->m->be, a->buf);
    free(a->slot);
    free(a);
}

size_t bp_acts_bytes(const bp_acts *a) { return a->bytes; }

const bp_real *bp_acts_output(const bp_acts *a) {
    if (bp_model_has_last(a->m)) return NULL;
    return a->m->dev ? a->m->dev->output(a) : a->m->ops->output(a);
}

const bp_real *bp_acts_logits(const bp_acts *a) {
    if (!bp_model_has_last(a->m)) return NULL;
    return a->m->dev ? a->m->dev->logits(a) : a->m->ops->logits(a);
}

/* ---- forward / backward ---- */

/* Whether activations made for a->m serve m: the same model, or one of the same
 * layout (the replicas of one stage under AvgPipe share a pool of activations). */
static bool acts_fit(const bp_model *m, const bp_acts *a) {
    const bp_model *o = a->m;
    return o == m || (o->ops == m->ops && o->begin == m->begin && o->end == m->end &&
                      o->tp.size == m->tp.size && o->tp.rank == m->tp.rank &&
                      memcmp(&o->cfg, &m->cfg, sizeof m->cfg) == 0);
}

/* Checks shared by forward and backward. */
static bp_status check_step(const bp_model *m, const bp_acts *a, const bp_batch *b, bool backward,
                            bp_err *err) {
    const char *what = backward ? "backward" : "forward";
    if (!acts_fit(m, a))
        return bp_fail(err, BP_EUSAGE, "%s: activations made for a model of another layout", what);
    if (b->B < 1 || b->B > a->Bmax || b->T < 1 || b->T > a->Tmax)
        return bp_fail(err, BP_EUSAGE, "%s: batch %dx%d does not fit activations made for %dx%d",
                       what, b->B, b->T, a->Bmax, a->Tmax);
    if (backward && (b->B != a->B || b->T != a->T))
        return bp_fail(err, BP_EUSAGE, "backward: batch %dx%d is not the %dx%d of the last forward",
                       b->B, b->T, a->B, a->T);
    return m->ops->check_batch(m, b, backward, err);
}

bp_status bp_model_forward(bp_model *m, bp_acts *a, const bp_batch *batch, const bp_real *x_in,
                           double *loss, bp_err *err) {
    bp_status rc = check_step(m, a, batch, false, err);
    if (rc) return rc;
    if (bp_model_has_first(m) != (x_in == NULL))
        return bp_fail(err, BP_EUSAGE, "forward: x_in must be %s for blocks [%d, %d)",
                       x_in ? "NULL" : "given", m->begin, m->end);
    a->B = batch->B;
    a->T = batch->T;
    double l = 0;
    if (m->dev) {
        rc = m->dev->forward(m, a, batch, x_in, &l, err);
    } else {
        open_mem(m, m->params), open_mem(m, a->buf), open_mem(m, x_in);
        if (x_in) {
            /* Copied so that the caller may reuse its receive buffer at once. */
            size_t n = (size_t)a->B * a->T * m->ops->boundary_width(&m->cfg, m->begin);
            memcpy(a->slot[0], x_in, n * sizeof *x_in);
        }
        rc = m->ops->forward(m, a, batch, &l, err);
        close_mem(m, x_in), close_mem(m, a->buf), close_mem(m, m->params);
    }
    if (rc) {
        a->B = a->T = 0; /* half-computed: a backward on them must fail */
        return rc;
    }
    if (loss) *loss = l;
    return BP_OK;
}

bp_status bp_model_tp_allreduce(bp_model *m, bp_real *x, size_t n, int block, const char *what,
                                bp_err *err) {
    if (m->tp.size == 1) return BP_OK;
    bp_status rc = m->tp.allreduce_sum(m->tp.ctx, x, n);
    if (rc == BP_OK) return BP_OK;
    char name[32];
    bp_model_block_name(&m->cfg, block, name, sizeof name);
    return bp_fail(err, rc, "tensor-parallel allreduce at %s.%s (tp rank %d of %d) failed: %s",
                   name, what, m->tp.rank, m->tp.size, bp_status_name(rc));
}

static bp_status ensure_scratch(bp_model *m, size_t n, bp_err *err) {
    if (n <= m->scratch_len) return BP_OK;
    m->be->free(m->be, m->scratch);
    m->scratch = NULL;
    m->scratch_len = 0;
    bp_status rc =
        m->be->alloc(m->be, (void **)&m->scratch, n * sizeof(bp_real), "backward workspace", err);
    if (!rc) m->scratch_len = n;
    return rc;
}

void bp_model_set_grad_hook(bp_model *m, bp_grad_ready_fn fn, void *ctx) {
    m->grad_hook = fn;
    m->grad_hook_ctx = ctx;
}

bp_status bp_model_backward(bp_model *m, bp_acts *a, const bp_batch *batch, const bp_real *dy,
                            bp_real *dx_in, bp_real loss_scale, bp_err *err) {
    if (a->B == 0)
        return bp_fail(err, BP_EUSAGE, "backward: no forward has run on these activations");
    bp_status rc = check_step(m, a, batch, true, err);
    if (rc) return rc;
    bool last = bp_model_has_last(m);
    if (last != (dy == NULL))
        return bp_fail(err, BP_EUSAGE, "backward: dy must be %s for blocks [%d, %d)",
                       dy ? "NULL" : "given", m->begin, m->end);
    if (bp_model_has_first(m) && dx_in)
        return bp_fail(err, BP_EUSAGE, "backward: dx_in must be NULL for blocks [%d, %d)", m->begin,
                       m->end);
    if (m->dev) return m->dev->backward(m, a, batch, dy, dx_in, loss_scale, err);
    rc = ensure_scratch(m, m->ops->scratch_len(m, a->B, a->T), err);
    if (rc) return rc;
    const void *mem[6] = {m->params, m->grads, m->scratch, a->buf, dy, dx_in};
    for (int i = 0; i < 6; i++) open_mem(m, mem[i]);
    rc = m->ops->backward(m, a, batch, dy, dx_in, loss_scale, err);
    for (int i = 5; i >= 0; i--) close_mem(m, mem[i]);
    return rc;
}
