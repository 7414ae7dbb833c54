#include "formats/safetensors.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors data is little-endian; a big-endian port must swap bytes here"
#endif

#define ST_MAX_HEADER (100u << 20) /* the format's own limit is 100 MB */

/* Append printf output to a growing string. */
typedef struct strbuf {
    char *s;
    size_t n, cap;
    int oom;
} strbuf;

static void sb_printf(strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void sb_printf(strbuf *b, const char *fmt, ...) {
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(b->s ? b->s + b->n : NULL, b->s ? b->cap - b->n : 0, fmt, ap);
        va_end(ap);
        if (k < 0) {
            b->oom = 1;
            return;
        }
        if (b->s && b->n + (size_t)k < b->cap) {
            b->n += (size_t)k;
            return;
        }
        size_t cap = (b->cap + (size_t)k + 1) * 2;
        char *bigger = realloc(b->s, cap);
        if (!bigger) {
            b->oom = 1;
            return;
        }
        b->s = bigger;
        b->cap = cap;
    }
}

static void build_header(strbuf *b, const bp_st_tensor *t, int n, const bp_st_meta *meta,
                         int n_meta) {
    sb_printf(b, "{\"__metadata__\":{");
    for (int i = 0; i < n_meta; i++)
        sb_printf(b, "%s\"%s\":\"%s\"", i ? "," : "", meta[i].key, meta[i].value);
    sb_printf(b, "}");
    size_t offset = 0;
    for (int i = 0; i < n; i++) {
        sb_printf(b, ",\"%s\":{\"dtype\":\"F32\",\"shape\":[", t[i].name);
        for (int d = 0; d < t[i].ndim; d++)
            sb_printf(b, "%s%lld", d ? "," : "", (long long)t[i].shape[d]);
        size_t bytes = t[i].numel * sizeof(float);
        sb_printf(b, "],\"data_offsets\":[%zu,%zu]}", offset, offset + bytes);
        offset += bytes;
    }
    sb_printf(b, "}");
    while (!b->oom && b->n % 8) sb_printf(b, " "); /* data starts 8-byte aligned */
}

bp_status bp_safetensors_save(const char *path, const bp_st_tensor *tensors, int n_tensors,
                              const bp_st_meta *meta, int n_meta, uint32_t *crc, uint64_t *size,
                              bp_err *err) {
    strbuf head = {0};
    build_header(&head, tensors, n_tensors, meta, n_meta);
    bp_iovec *parts = malloc(((size_t)n_tensors + 2) * sizeof *parts);
    if (head.oom || !parts) {
        free(head.s);
        free(parts);
        return bp_fail(err, BP_ENOMEM, "cannot build the safetensors header for %s", path);
    }
    uint8_t len[8];
    for (int i = 0; i < 8; i++) len[i] = (uint8_t)((uint64_t)head.n >> (8 * i));
    parts[0] = (bp_iovec){len, 8};
    parts[1] = (bp_iovec){head.s, head.n};
    for (int i = 0; i < n_tensors; i++)
        parts[i + 2] = (bp_iovec){tensors[i].data, tensors[i].numel * sizeof(float)};
    uLong c = crc32(0L, Z_NULL, 0);
    *size = 0;
    for (int i = 0; i < n_tensors + 2; i++) {
        c = crc32_z(c, parts[i].data, parts[i].n);
        *size += parts[i].n;
    }
    bp_status rc = bp_write_parts_atomic(path, parts, n_tensors + 2, err);
    *crc = (uint32_t)c;
    free(parts);
    free(head.s);
    return rc;
}

/* Validate one tensor entry (node e named `name`) and fill t. */
static bp_status parse_entry(const bp_json *j, int e, const char *name, const uint8_t *data,
                             size_t data_n, bp_st_tensor *t, bp_err *err) {
    int dtype = bp_json_get(j, e, "dtype"), shape = bp_json_get(j, e, "shape");
    int offs = bp_json_get(j, e, "data_offsets");
    if (!bp_json_str_eq(j, dtype, "F32"))
        return bp_fail(err, BP_EFORMAT, "tensor %s: dtype is not F32", name);
    if (shape < 0 || j->nodes[shape].type != BP_JSON_ARRAY || offs < 0 ||
        j->nodes[offs].type != BP_JSON_ARRAY)
        return bp_fail(err, BP_EFORMAT, "tensor %s: missing shape or data_offsets", name);
    unsigned long long numel = 1, dim, begin, end;
    t->ndim = 0;
    for (int d = j->nodes[shape].child; d >= 0; d = j->nodes[d].next) {
        if (t->ndim == BP_ST_MAX_DIM || !bp_json_uint(j, d, &dim) || dim > (1ull << 40))
            return bp_fail(err, BP_EFORMAT, "tensor %s: bad shape", name);
        t->shape[t->ndim++] = (int64_t)dim;
        numel *= dim;
        if (numel > (1ull << 40)) return bp_fail(err, BP_EFORMAT, "tensor %s: bad shape", name);
    }
    int b = j->nodes[offs].child, en = b >= 0 ? j->nodes[b].next : -1;
    if (en < 0 || j->nodes[en].next >= 0 || !bp_json_uint(j, b, &begin) ||
        !bp_json_uint(j, en, &end) || begin > end || end > data_n ||
        end - begin != numel * sizeof(float) || begin % sizeof(float))
        return bp_fail(err, BP_EFORMAT, "tensor %s: data_offsets do not match its shape or the file",
                       name);
    t->data = data + begin;
    t->numel = (size_t)numel;
    return BP_OK;
}

/* Tensors must tile the data without overlapping; sort offsets to check. */
static int cmp_begin(const void *a, const void *b) {
    const char *x = ((const bp_st_tensor *)a)->data, *y = ((const bp_st_tensor *)b)->data;
    return x < y ? -1 : x > y;
}

static bp_status check_overlap(const bp_safetensors *st, bp_err *err) {
    bp_st_tensor *sorted = malloc((size_t)st->n_tensors * sizeof *sorted + 1);
    if (!sorted) return bp_fail(err, BP_ENOMEM, "out of memory");
    memcpy(sorted, st->tensors, (size_t)st->n_tensors * sizeof *sorted);
    qsort(sorted, (size_t)st->n_tensors, sizeof *sorted, cmp_begin);
    bp_status rc = BP_OK;
    for (int i = 1; i < st->n_tensors && rc == BP_OK; i++)
        if ((const char *)sorted[i - 1].data + sorted[i - 1].numel * sizeof(float) >
            (const char *)sorted[i].data)
            rc = bp_fail(err, BP_EFORMAT, "tensors %s and %s overlap", sorted[i - 1].name,
                         sorted[i].name);
    free(sorted);
    return rc;
}

static bp_status parse_tensors(bp_safetensors *st, const uint8_t *data, size_t data_n,
                               bp_err *err) {
    const bp_json *j = &st->json;
    int count = 0;
    for (int c = j->nodes[0].child; c >= 0; c = j->nodes[c].next) count++;
    st->tensors = calloc((size_t)count + 1, sizeof *st->tensors);
    st->names = calloc((size_t)count + 1, sizeof *st->names);
    if (!st->tensors || !st->names) return bp_fail(err, BP_ENOMEM, "out of memory");
    for (int c = j->nodes[0].child; c >= 0; c = j->nodes[c].next) {
        char name[256];
        if (!bp_json_str_copy(j, j->nodes[c].key, name, sizeof name))
            return bp_fail(err, BP_EFORMAT, "bad tensor name");
        if (strcmp(name, "__metadata__") == 0) {
            st->meta = c;
            continue;
        }
        if (j->nodes[c].type != BP_JSON_OBJECT || bp_safetensors_find(st, name))
            return bp_fail(err, BP_EFORMAT, "tensor %s: bad or repeated entry", name);
        bp_st_tensor *t = &st->tensors[st->n_tensors];
        if (!(st->names[st->n_tensors] = strdup(name)))
            return bp_fail(err, BP_ENOMEM, "out of memory");
        t->name = st->names[st->n_tensors];
        bp_status rc = parse_entry(j, c, name, data, data_n, t, err);
        if (rc) return rc;
        st->n_tensors++;
    }
    return check_overlap(st, err);
}

bp_status bp_safetensors_parse(bp_bytes file, bp_safetensors *out, bp_err *err) {
    memset(out, 0, sizeof *out);
    out->file = file;
    out->meta = -1;
    uint64_t hn = 0;
    for (int i = 0; i < 8 && file.n >= 8; i++) hn |= (uint64_t)file.data[i] << (8 * i);
    bp_status rc = BP_OK;
    if (file.n < 8 || hn > ST_MAX_HEADER || hn > file.n - 8)
        rc = bp_fail(err, BP_EFORMAT, "not a safetensors file (bad header length)");
    if (rc == BP_OK) rc = bp_json_parse((const char *)file.data + 8, (size_t)hn, &out->json, err);
    if (rc == BP_OK && out->json.nodes[0].type != BP_JSON_OBJECT)
        rc = bp_fail(err, BP_EFORMAT, "safetensors header is not a JSON object");
    if (rc == BP_OK) rc = parse_tensors(out, file.data + 8 + hn, file.n - 8 - (size_t)hn, err);
    if (rc) bp_safetensors_free(out);
    return rc;
}

void bp_safetensors_free(bp_safetensors *st) {
    /* names is NULL-terminated and may hold one more name than n_tensors: that of an
     * entry that failed to parse. */
    for (int i = 0; st->names && st->names[i]; i++) free(st->names[i]);
    free(st->names);
    free(st->tensors);
    bp_json_free(&st->json);
    free(st->file.data);
    memset(st, 0, sizeof *st);
}

const bp_st_tensor *bp_safetensors_find(const bp_safetensors *st, const char *name) {
    for (int i = 0; i < st->n_tensors; i++)
        if (strcmp(st->tensors[i].name, name) == 0) return &st->tensors[i];
    return NULL;
}

int bp_safetensors_meta(const bp_safetensors *st, const char *key, char *buf, size_t n) {
    return bp_json_str_copy(&st->json, bp_json_get(&st->json, st->meta, key), buf, n);
}
