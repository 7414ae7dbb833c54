/* Buffers in device memory (bp_comm_set_memory): staged through host copies for the
 * length of one operation. The copies are the backend's own calls, so the library
 * never touches device memory itself. */
#include <stdlib.h>
#include <string.h>

#include "comm/internal.h"

bp_status bp_comm_set_memory(bp_comm *c, const bp_comm_memory *mem) {
    if (mem && (!mem->owns || !mem->to_host || !mem->to_device)) {
        bp_err err;
        bp_fail(&err, BP_EUSAGE, "set_memory: owns, to_host and to_device are all needed");
        return bpc_comm_record(c, BP_EUSAGE, &err);
    }
    c->mem = mem ? *mem : (bp_comm_memory){0};
    if (c->local) bp_comm_set_memory(c->local, mem);
    if (c->leaders) bp_comm_set_memory(c->leaders, mem);
    return BP_OK;
}

bool bpc_on_device(const bp_comm *c, const void *x) {
    return c->mem.owns && x && c->mem.owns(c->mem.ctx, x);
}

bp_status bpc_stage(bp_comm *c, float **x, size_t n, bool in, bpc_staged *s) {
    *s = (bpc_staged){0};
    if (n == 0 || !bpc_on_device(c, *x)) return BP_OK;
    float *h = malloc(n * sizeof *h);
    if (!h) {
        bp_err err;
        bp_fail(&err, BP_ENOMEM, "cannot stage %zu floats of device memory", n);
        return bpc_comm_record(c, BP_ENOMEM, &err);
    }
    if (in) c->mem.to_host(c->mem.ctx, h, *x, n * sizeof *h);
    *s = (bpc_staged){.dev = *x, .host = h, .n = n};
    *x = h;
    return BP_OK;
}

bp_status bpc_unstage(bp_comm *c, bpc_staged *s, bool out, bp_status rc) {
    if (!s->dev) return rc;
    if (out && rc == BP_OK) c->mem.to_device(c->mem.ctx, s->dev, s->host, s->n * sizeof *s->host);
    free(s->host);
    *s = (bpc_staged){0};
    return rc;
}
