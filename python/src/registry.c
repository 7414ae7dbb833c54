/* bagpipe._C.algorithms(): the data-parallel algorithms of parallel/dp/registry.h,
 * the --dp-algo choices in their order, each as (name, kind, options), so that
 * bagpipe.torch enumerates the registry instead of a list of its own. An option
 * is a dict: name (as on the command line), type (int, float, str, choice, flag),
 * default (None where it depends on the group: default_text says how), min, max,
 * choices (a tuple, or None), metavar and help, as --help shows them. */
#include <math.h>
#include <stdint.h>

#include "bpy.h"
#include "core/options.h"
#include "parallel/dp.h"

static const char *const type_names[] = {
    [BP_OPT_INT] = "int",       [BP_OPT_INT64] = "int", [BP_OPT_DOUBLE] = "float",
    [BP_OPT_STRING] = "str",    [BP_OPT_CHOICE] = "choice", [BP_OPT_FLAG] = "flag"};

/* "a|b|c" as ("a", "b", "c"). */
static PyObject *split_choices(const char *choices) {
    PyObject *all = PyUnicode_FromString(choices);
    PyObject *bar = all ? PyUnicode_FromString("|") : NULL;
    PyObject *parts = bar ? PyUnicode_Split(all, bar, -1) : NULL;
    PyObject *out = parts ? PyList_AsTuple(parts) : NULL;
    Py_XDECREF(all), Py_XDECREF(bar), Py_XDECREF(parts);
    return out;
}

/* The value of o in the settings struct `defaults` (a word's NAN and a value the
 * group fills in later, shown by default_text, are None). */
static PyObject *default_of(const bp_option *o, const char *defaults) {
    const char *at = defaults + o->offset;
    if (o->default_text && o->type != BP_OPT_CHOICE) Py_RETURN_NONE;
    switch (o->type) {
    case BP_OPT_INT: return PyLong_FromLong(*(const int *)at);
    case BP_OPT_INT64: return PyLong_FromLongLong((long long)*(const int64_t *)at);
    case BP_OPT_DOUBLE: {
        double d = *(const double *)at;
        if (isnan(d)) Py_RETURN_NONE;
        return PyFloat_FromDouble(d);
    }
    case BP_OPT_STRING: return PyUnicode_FromString(at);
    case BP_OPT_FLAG: return PyBool_FromLong(*(const bool *)at);
    case BP_OPT_CHOICE: {
        PyObject *names = split_choices(o->choices);
        int i = *(const int *)at;
        PyObject *v = names && i >= 0 && i < PyTuple_GET_SIZE(names)
                          ? Py_NewRef(PyTuple_GET_ITEM(names, i)) : NULL;
        Py_XDECREF(names);
        return v ? v : (PyErr_Occurred() ? NULL : Py_NewRef(Py_None));
    }
    }
    Py_RETURN_NONE;
}

static PyObject *option_of(const bp_option *o, const void *defaults) {
    PyObject *def = default_of(o, defaults);
    PyObject *choices = o->type == BP_OPT_CHOICE ? split_choices(o->choices) : Py_NewRef(Py_None);
    PyObject *d = NULL;
    if (def && choices)
        d = Py_BuildValue("{s:s,s:s,s:O,s:d,s:d,s:O,s:z,s:s,s:z}", "name", o->name, "type",
                          type_names[o->type], "default", def, "min", o->min, "max", o->max,
                          "choices", choices, "metavar", o->metavar, "help", o->help,
                          "default_text", o->default_text);
    Py_XDECREF(def), Py_XDECREF(choices);
    return d;
}

static PyObject *options_of(int algo) {
    const bp_option_group *g = bp_dp_algo_options(algo);
    PyObject *out = PyTuple_New(g ? g->n : 0);
    for (int i = 0; out && g && i < g->n; i++) {
        PyObject *o = option_of(&g->opts[i], g->defaults);
        if (!o) Py_CLEAR(out);
        else PyTuple_SET_ITEM(out, i, o);
    }
    return out;
}

static PyObject *py_algorithms(PyObject *self, PyObject *args) {
    (void)self, (void)args;
    PyObject *out = PyTuple_New(BP_DP_N_CHOICES);
    for (int a = 0; out && a < BP_DP_N_CHOICES; a++) {
        PyObject *opts = options_of(a);
        const char *kind = bp_dp_algo_kind(a) == BP_DP_GRADIENT ? "gradient" : "weight";
        PyObject *t = opts ? Py_BuildValue("(ssN)", bp_dp_algo_name(a), kind, opts) : NULL;
        if (!t) Py_CLEAR(out);
        else PyTuple_SET_ITEM(out, a, t);
    }
    return out;
}

PyMethodDef bpy_registry_methods[] = {
    {"algorithms", py_algorithms, METH_NOARGS,
     "The --dp-algo algorithms of the registry: a tuple of (name, kind, options)."},
    {NULL, NULL, 0, NULL},
};
