/* A small, strict JSON reader for the files bagpipe reads back (the safetensors
 * header, checkpoint manifests). It parses a whole document into a flat array of
 * nodes; strings are kept as spans of the input with escapes resolved on demand.
 * Depth and node count are bounded so hostile input cannot exhaust the stack. */
#ifndef BP_CORE_JSON_H
#define BP_CORE_JSON_H

#include <stdbool.h>
#include <stddef.h>

#include "bagpipe/status.h"

typedef enum bp_json_type {
    BP_JSON_NULL,
    BP_JSON_BOOL,
    BP_JSON_NUMBER,
    BP_JSON_STRING,
    BP_JSON_ARRAY,
    BP_JSON_OBJECT
} bp_json_type;

typedef struct bp_json_node {
    bp_json_type type;
    int next;        /* next sibling (array element or object member), -1 at the end */
    int child;       /* first element/member of an array or object, -1 when empty */
    int key;         /* for object members: index of the key's string node, else -1 */
    const char *str; /* string: first byte after the opening quote */
    size_t len;      /* string: raw length (escapes not resolved) */
    double num;      /* number value; bool: 0 or 1 */
} bp_json_node;

typedef struct bp_json {
    bp_json_node *nodes;
    int n, cap;
} bp_json;

/* Parse text[0..n). Node 0 is the root. */
bp_status bp_json_parse(const char *text, size_t n, bp_json *out, bp_err *err);
void bp_json_free(bp_json *j);

/* Member `key` of object node `obj`, or -1. */
int bp_json_get(const bp_json *j, int obj, const char *key);
/* True when string node i equals s (after resolving escapes). */
bool bp_json_str_eq(const bp_json *j, int i, const char *s);
/* Copy string node i into buf (escapes resolved); false when it does not fit or is
 * not a string. */
bool bp_json_str_copy(const bp_json *j, int i, char *buf, size_t n);
/* Number node i as a non-negative integer that fits in 2^53; false otherwise. */
bool bp_json_uint(const bp_json *j, int i, unsigned long long *out);

#endif
