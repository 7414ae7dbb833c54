/* The JSON reader (core/json.c): parse any bytes, then walk every node with the
 * accessors that the safetensors and manifest readers use. */
#include <string.h>

#include "core/json.h"
#include "fuzz.h"

static void walk(const bp_json *j) {
    char buf[64];
    unsigned long long u;
    for (int i = 0; i < j->n; i++) {
        const bp_json_node *n = &j->nodes[i];
        bp_json_str_copy(j, i, buf, sizeof buf);
        bp_json_str_copy(j, i, buf, 1); /* too small for any non-empty string */
        bp_json_str_eq(j, i, "F32");
        bp_json_uint(j, i, &u);
        if (n->key >= 0) bp_json_str_copy(j, n->key, buf, sizeof buf);
        if (n->type == BP_JSON_OBJECT) {
            bp_json_get(j, i, "dtype");
            bp_json_get(j, i, "__metadata__");
            /* Look up the first member by its own name. */
            if (n->child >= 0 && bp_json_str_copy(j, j->nodes[n->child].key, buf, sizeof buf))
                bp_json_get(j, i, buf);
        }
    }
    bp_json_get(j, -1, "x");
    bp_json_get(j, j->n, "x");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    bp_json j;
    bp_err err;
    /* The reader gets no terminating NUL: it must stop at text + n. */
    if (bp_fuzz_reject(bp_json_parse((const char *)data, size, &j, &err), &err)) return 0;
    walk(&j);
    bp_json_free(&j);
    bp_fuzz_accepted++;
    return 0;
}
