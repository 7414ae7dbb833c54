"""The data-parallel algorithms as the C registry declares them (parallel/dp/registry.h,
read through bagpipe._C.algorithms()): their names, kinds and options with defaults
and ranges. bagpipe.torch lists no algorithm of its own: with_bagpipe's choices are
the registry's, and a binding (the Python side of one algorithm: a DDP hook or a
weight algorithm's class) says which of the algorithm's options it takes under
which keyword; the registry checks their values. An algorithm of the registry
without a binding is refused with one line that says where it runs."""
import collections
import math

from .. import Error, _C

Option = collections.namedtuple("Option",
                                "name type default min max choices metavar help default_text")
Algorithm = collections.namedtuple("Algorithm", "name kind options")


def _load():
    out = {}
    for name, kind, options in _C.algorithms():
        out[name] = Algorithm(name, kind, {o["name"]: Option(**o) for o in options})
    return out


#: name -> Algorithm, in the order of --dp-algo's choices.
REGISTRY = _load()
ALGORITHMS = tuple(REGISTRY)
GRADIENT_ALGORITHMS = tuple(n for n, a in REGISTRY.items() if a.kind == "gradient")
WEIGHT_ALGORITHMS = tuple(n for n, a in REGISTRY.items() if a.kind == "weight")


def option(spec):
    """The registry's option by "name" of its own algorithm's group or
    "algorithm:name" (lp-decentralized's interval is decentralized's)."""
    algo, _, name = spec.rpartition(":")
    return algo, name


def _flag(o):
    meta = "" if o.type == "flag" else " " + ("|".join(o.choices) if o.choices else o.metavar)
    return f"--{o.name}{meta}"


def no_binding(name):
    """The line that refuses an algorithm bagpipe.torch has no binding for."""
    a = REGISTRY[name]
    opts = ", ".join(_flag(o) for o in a.options.values())
    return (f"bagpipe: algorithm '{name}' ({a.kind}) has no PyTorch binding: it runs in "
            f"bagpipe train --dp-algo {name}" + (f" (its options: {opts})" if opts else ""))


def check_value(name, keyword, o, value):
    """value for the registry's option o, checked as the command line checks it."""
    if o.type == "choice":
        if value not in o.choices:
            raise Error(f"{name}: {keyword} '{value}' is not one of {', '.join(o.choices)}")
    elif o.type in ("int", "float"):
        if o.type == "int" and (isinstance(value, bool) or not isinstance(value, int)):
            raise Error(f"{name}: {keyword} must be an integer, not {value!r}")
        if not isinstance(value, (int, float)) or math.isnan(value) or \
                not o.min <= value <= o.max:
            raise Error(f"{name}: {keyword} must be within [{o.min:g}, {o.max:g}] "
                        f"(--{o.name}), not {value!r}")


def check_options(name, binding, options):
    """The keyword arguments of with_bagpipe for algorithm `name`: those the binding
    maps to the registry's options, checked by them, and the binding's own extras.
    binding.OPTIONS: keyword -> registry option; binding.EXTRAS: keywords of the
    PyTorch side alone."""
    mapped = getattr(binding, "OPTIONS", {})
    extras = getattr(binding, "EXTRAS", ())
    for keyword, value in options.items():
        if keyword in mapped:
            algo, opt = option(mapped[keyword])
            o = REGISTRY[algo or name].options[opt]
            if value is not None or o.default is not None:
                check_value(name, keyword, o, value)
        elif keyword not in extras:
            taken = sorted(set(mapped) | set(extras))
            unbound = [f"--{o}" for o in REGISTRY[name].options
                       if o not in {option(s)[1] for s in mapped.values()}]
            raise Error(f"bagpipe: {name} takes no option '{keyword}' (it takes "
                        f"{', '.join(taken) if taken else 'none'}"
                        + (f"; {', '.join(unbound)} only in bagpipe train" if unbound else "")
                        + ")")


def defaults(name, binding):
    """The registry's defaults of the options a binding takes, by keyword (None where
    the default depends on the group)."""
    out = {}
    for keyword, spec in getattr(binding, "OPTIONS", {}).items():
        algo, opt = option(spec)
        out[keyword] = REGISTRY[algo or name].options[opt].default
    return out
