/* Buffers in device memory (bp_comm_set_memory): staged through host copies for the
 * length of one operation. The copies are the backend's own calls, so the library
 * never touches device memory itself.
 *
 * The host copies come from a small pool per group rather than one allocation per
 * operation: the host memory that the device copies fastest (pinned, on CUDA) takes
 * milliseconds to allocate, longer than many of the operations it serves. */
#include <stdint.h>
#include <string.h>

#include "comm/internal.h"
#include "core/buf.h"

bp_status bp_comm_set_memory(bp_comm *c, const bp_comm_memory *mem) {
    const char *bad = NULL;
    if (mem && (!mem->owns || !mem->to_host || !mem->to_device))
        bad = "set_memory: owns, to_host and to_device are all needed";
    else if (mem && !mem->host_alloc != !mem->host_free)
        bad = "set_memory: host_alloc and host_free go together";
    if (bad) {
        bp_err err;
        bp_fail(&err, BP_EUSAGE, "%s", bad);
        return bpc_comm_record(c, BP_EUSAGE, &err);
    }
    bpc_pool_drain(c); /* blocks of the old host_alloc go back through its host_free */
    c->mem = mem ? *mem : (bp_comm_memory){0};
    if (c->local) bp_comm_set_memory(c->local, mem);
    if (c->leaders) bp_comm_set_memory(c->leaders, mem);
    return BP_OK;
}

bool bpc_on_device(const bp_comm *c, const void *x) {
    return c->mem.owns && x && c->mem.owns(c->mem.ctx, x);
}

/* ---- blocks and the pool ---- */

static float *block_alloc(const bp_comm *c, size_t n) {
    if (n > SIZE_MAX / sizeof(float)) return NULL;
    size_t bytes = n * sizeof(float);
    return c->mem.host_alloc ? c->mem.host_alloc(c->mem.ctx, bytes) : bp_alloc(bytes);
}

static void block_free(const bp_comm *c, bpc_block b) {
    if (!b.p) return;
    if (c->mem.host_free)
        c->mem.host_free(c->mem.ctx, b.p);
    else
        bp_free(b.p);
}

void bpc_pool_init(bp_comm *c) {
    pthread_mutex_init(&c->pool_mu, NULL);
    c->pool_count = 0;
}

/* The smallest free block of at least n floats, out of the pool; {0} when none fits. */
static bpc_block pool_take(bp_comm *c, size_t n) {
    bpc_block b = {0};
    pthread_mutex_lock(&c->pool_mu);
    int best = -1;
    for (int i = 0; i < c->pool_count; i++)
        if (c->pool[i].n >= n && (best < 0 || c->pool[i].n < c->pool[best].n)) best = i;
    if (best >= 0) {
        b = c->pool[best];
        c->pool[best] = c->pool[--c->pool_count];
    }
    pthread_mutex_unlock(&c->pool_mu);
    return b;
}

/* Keeps b for later. A full pool drops its smallest block (b or one it holds): a
 * large block serves every smaller request, a small one only some. */
static void pool_give(bp_comm *c, bpc_block b) {
    pthread_mutex_lock(&c->pool_mu);
    if (c->pool_count < BPC_POOL_KEEP) {
        c->pool[c->pool_count++] = b;
        b = (bpc_block){0};
    } else {
        int small = 0;
        for (int i = 1; i < c->pool_count; i++)
            if (c->pool[i].n < c->pool[small].n) small = i;
        if (c->pool[small].n < b.n) {
            bpc_block t = c->pool[small];
            c->pool[small] = b;
            b = t;
        }
    }
    pthread_mutex_unlock(&c->pool_mu);
    block_free(c, b); /* outside the lock: freeing pinned memory is slow as well */
}

void bpc_pool_drain(bp_comm *c) {
    bpc_block kept[BPC_POOL_KEEP];
    pthread_mutex_lock(&c->pool_mu);
    int k = c->pool_count;
    memcpy(kept, c->pool, sizeof kept);
    c->pool_count = 0;
    pthread_mutex_unlock(&c->pool_mu);
    for (int i = 0; i < k; i++) block_free(c, kept[i]);
}

void bpc_pool_destroy(bp_comm *c) {
    bpc_pool_drain(c);
    pthread_mutex_destroy(&c->pool_mu);
}

/* ---- staging ---- */

bp_status bpc_stage(bp_comm *c, float **x, size_t n, bool in, bpc_staged *s) {
    *s = (bpc_staged){0};
    if (n == 0 || !bpc_on_device(c, *x)) return BP_OK;
    bpc_block b = pool_take(c, n);
    if (!b.p) b = (bpc_block){block_alloc(c, n), n};
    if (!b.p) {
        bp_err err;
        bp_fail(&err, BP_ENOMEM, "cannot stage %zu floats of device memory", n);
        return bpc_comm_record(c, BP_ENOMEM, &err);
    }
    if (in) c->mem.to_host(c->mem.ctx, b.p, *x, n * sizeof *b.p);
    *s = (bpc_staged){.dev = *x, .n = n, .block = b};
    *x = b.p;
    return BP_OK;
}

bp_status bpc_unstage(bp_comm *c, bpc_staged *s, bool out, bp_status rc) {
    if (!s->dev) return rc;
    if (out && rc == BP_OK)
        c->mem.to_device(c->mem.ctx, s->dev, s->block.p, s->n * sizeof *s->block.p);
    pool_give(c, s->block);
    *s = (bpc_staged){0};
    return rc;
}
