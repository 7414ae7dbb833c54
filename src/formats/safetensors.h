/* The safetensors file format (F32 tensors), so that Python tools can read
 * bagpipe's weights: 8-byte little-endian header length N, N bytes of JSON
 * {"__metadata__": {str: str}, "<name>": {"dtype": "F32", "shape": [...],
 * "data_offsets": [begin, end]}, ...} padded with spaces to a multiple of 8, then
 * the raw little-endian data. The reader validates every field: dtype, shape
 * against offsets, offsets inside the data and not overlapping. */
#ifndef BP_FORMATS_SAFETENSORS_H
#define BP_FORMATS_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "bagpipe/status.h"
#include "core/file.h"
#include "core/json.h"

#define BP_ST_MAX_DIM 4

typedef struct bp_st_tensor {
    const char *name;
    int ndim;
    int64_t shape[BP_ST_MAX_DIM];
    /* Writer: the float values. Reader: points into the file bytes and may be
     * unaligned for files written elsewhere, so read it with memcpy. */
    const void *data;
    size_t numel;
} bp_st_tensor;

typedef struct bp_st_meta {
    const char *key, *value;
} bp_st_meta;

/* Write atomically; *crc and *size receive the CRC-32 and length of the whole
 * file as written. */
bp_status bp_safetensors_save(const char *path, const bp_st_tensor *tensors, int n_tensors,
                              const bp_st_meta *meta, int n_meta, uint32_t *crc, uint64_t *size,
                              bp_err *err);

typedef struct bp_safetensors {
    bp_bytes file;
    bp_json json;
    int meta;          /* JSON node of __metadata__, or -1 */
    bp_st_tensor *tensors;
    char **names;
    int n_tensors;
} bp_safetensors;

/* Parse and validate file bytes already in memory (takes ownership of `file`). */
bp_status bp_safetensors_parse(bp_bytes file, bp_safetensors *out, bp_err *err);
void bp_safetensors_free(bp_safetensors *st);
/* The tensor called name, or NULL. */
const bp_st_tensor *bp_safetensors_find(const bp_safetensors *st, const char *name);
/* Metadata value of key copied into buf; false when absent or too long. */
int bp_safetensors_meta(const bp_safetensors *st, const char *key, char *buf, size_t n);

#endif
