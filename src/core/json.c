#include "core/json.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define JSON_MAX_DEPTH 32
#define JSON_MAX_NODES (1 << 20)

typedef struct parser {
    const char *begin, *p, *end;
    bp_json *j;
    bp_err *err;
} parser;

static bp_status fail(parser *ps, const char *what) {
    return bp_fail(ps->err, BP_EFORMAT, "JSON: %s at byte %zu", what, (size_t)(ps->p - ps->begin));
}

static void skip_ws(parser *ps) {
    while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r'))
        ps->p++;
}

static bp_status new_node(parser *ps, bp_json_type type, int *out) {
    bp_json *j = ps->j;
    if (j->n == j->cap) {
        if (j->cap >= JSON_MAX_NODES) return fail(ps, "too many values");
        int cap = j->cap ? j->cap * 2 : 64;
        bp_json_node *bigger = realloc(j->nodes, (size_t)cap * sizeof *bigger);
        if (!bigger) return bp_fail(ps->err, BP_ENOMEM, "JSON: out of memory");
        j->nodes = bigger;
        j->cap = cap;
    }
    bp_json_node *n = &j->nodes[j->n];
    memset(n, 0, sizeof *n);
    n->type = type;
    n->next = n->child = n->key = -1;
    *out = j->n++;
    return BP_OK;
}

static bp_status parse_value(parser *ps, int depth, int *out);

static bp_status parse_string(parser *ps, int *out) {
    ps->p++; /* opening quote */
    const char *start = ps->p;
    while (ps->p < ps->end && *ps->p != '"') {
        unsigned char c = (unsigned char)*ps->p;
        if (c < 0x20) return fail(ps, "control character in string");
        if (c == '\\') {
            if (ps->end - ps->p < 2 || !strchr("\"\\/bfnrtu", ps->p[1]))
                return fail(ps, "bad escape in string");
            ps->p++;
        }
        ps->p++;
    }
    if (ps->p >= ps->end) return fail(ps, "unterminated string");
    bp_status rc = new_node(ps, BP_JSON_STRING, out);
    if (rc) return rc;
    ps->j->nodes[*out].str = start;
    ps->j->nodes[*out].len = (size_t)(ps->p - start);
    ps->p++;
    return BP_OK;
}

static bp_status parse_number(parser *ps, int *out) {
    char buf[64];
    size_t k = 0;
    while (ps->p < ps->end && k < sizeof buf - 1 && strchr("+-0123456789.eE", *ps->p))
        buf[k++] = *ps->p++;
    buf[k] = '\0';
    char *endp;
    double v = strtod(buf, &endp);
    if (k == 0 || *endp != '\0' || !isfinite(v)) return fail(ps, "bad number");
    bp_status rc = new_node(ps, BP_JSON_NUMBER, out);
    if (rc == BP_OK) ps->j->nodes[*out].num = v;
    return rc;
}

static bp_status parse_literal(parser *ps, int *out) {
    static const struct { const char *word; bp_json_type type; double num; } lits[] = {
        {"true", BP_JSON_BOOL, 1}, {"false", BP_JSON_BOOL, 0}, {"null", BP_JSON_NULL, 0}};
    for (size_t i = 0; i < sizeof lits / sizeof lits[0]; i++) {
        size_t n = strlen(lits[i].word);
        if ((size_t)(ps->end - ps->p) >= n && memcmp(ps->p, lits[i].word, n) == 0) {
            ps->p += n;
            bp_status rc = new_node(ps, lits[i].type, out);
            if (rc == BP_OK) ps->j->nodes[*out].num = lits[i].num;
            return rc;
        }
    }
    return fail(ps, "unexpected character");
}

/* Arrays and objects: elements separated by ',' up to `close`; objects have
 * "key": before each value. Children are linked in order. */
static bp_status parse_container(parser *ps, int depth, int *out) {
    bool object = *ps->p == '{';
    char close = object ? '}' : ']';
    if (depth >= JSON_MAX_DEPTH) return fail(ps, "nesting too deep");
    bp_status rc = new_node(ps, object ? BP_JSON_OBJECT : BP_JSON_ARRAY, out);
    if (rc) return rc;
    ps->p++;
    skip_ws(ps);
    int prev = -1;
    if (ps->p < ps->end && *ps->p == close) {
        ps->p++;
        return BP_OK;
    }
    for (;;) {
        int key = -1, val;
        skip_ws(ps);
        if (object) {
            if (ps->p >= ps->end || *ps->p != '"') return fail(ps, "expected a member name");
            if ((rc = parse_string(ps, &key))) return rc;
            skip_ws(ps);
            if (ps->p >= ps->end || *ps->p != ':') return fail(ps, "expected ':'");
            ps->p++;
        }
        if ((rc = parse_value(ps, depth + 1, &val))) return rc;
        ps->j->nodes[val].key = key;
        if (prev < 0)
            ps->j->nodes[*out].child = val;
        else
            ps->j->nodes[prev].next = val;
        prev = val;
        skip_ws(ps);
        if (ps->p < ps->end && *ps->p == ',') {
            ps->p++;
            continue;
        }
        if (ps->p < ps->end && *ps->p == close) {
            ps->p++;
            return BP_OK;
        }
        return fail(ps, object ? "expected ',' or '}'" : "expected ',' or ']'");
    }
}

static bp_status parse_value(parser *ps, int depth, int *out) {
    skip_ws(ps);
    if (ps->p >= ps->end) return fail(ps, "unexpected end");
    char c = *ps->p;
    if (c == '{' || c == '[') return parse_container(ps, depth, out);
    if (c == '"') return parse_string(ps, out);
    if (c == '-' || (c >= '0' && c <= '9')) return parse_number(ps, out);
    return parse_literal(ps, out);
}

bp_status bp_json_parse(const char *text, size_t n, bp_json *out, bp_err *err) {
    memset(out, 0, sizeof *out);
    parser ps = {text, text, text + n, out, err};
    int root;
    bp_status rc = parse_value(&ps, 0, &root);
    if (rc == BP_OK) {
        skip_ws(&ps);
        if (ps.p != ps.end) rc = fail(&ps, "trailing characters");
    }
    if (rc) bp_json_free(out);
    return rc;
}

void bp_json_free(bp_json *j) {
    free(j->nodes);
    memset(j, 0, sizeof *j);
}

/* Resolve escapes of string node i into buf (n bytes, NUL-terminated). \u escapes
 * outside ASCII are not needed by bagpipe's files and are refused. */
static bool unescape(const bp_json_node *s, char *buf, size_t n) {
    size_t k = 0;
    for (size_t i = 0; i < s->len; i++) {
        char c = s->str[i];
        if (c == '\\') {
            char e = s->str[++i];
            static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
            const char *hit = strchr(from, e);
            if (!hit || e == 'u') return false;
            c = to[hit - from];
        }
        if (k + 1 >= n) return false;
        buf[k++] = c;
    }
    buf[k] = '\0';
    return true;
}

bool bp_json_str_copy(const bp_json *j, int i, char *buf, size_t n) {
    if (i < 0 || i >= j->n || j->nodes[i].type != BP_JSON_STRING || n == 0) return false;
    return unescape(&j->nodes[i], buf, n);
}

bool bp_json_str_eq(const bp_json *j, int i, const char *s) {
    char buf[256];
    return bp_json_str_copy(j, i, buf, sizeof buf) && strcmp(buf, s) == 0;
}

int bp_json_get(const bp_json *j, int obj, const char *key) {
    if (obj < 0 || obj >= j->n || j->nodes[obj].type != BP_JSON_OBJECT) return -1;
    for (int c = j->nodes[obj].child; c >= 0; c = j->nodes[c].next)
        if (bp_json_str_eq(j, j->nodes[c].key, key)) return c;
    return -1;
}

bool bp_json_uint(const bp_json *j, int i, unsigned long long *out) {
    if (i < 0 || i >= j->n || j->nodes[i].type != BP_JSON_NUMBER) return false;
    double v = j->nodes[i].num;
    if (v < 0 || v > 9007199254740992.0 || v != floor(v)) return false;
    *out = (unsigned long long)v;
    return true;
}
