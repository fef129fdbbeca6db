"""What a warm (pure) program may reach, each entry with its reason: the builtins it gets and those it is
refused, the pure members of each module it may import, and the attribute names it may read on any
value (`pure.py`'s verifier and runtime read these tables).
"""

from __future__ import annotations


def _each(names: str, reason: str) -> dict[str, str]:
    """One reason shared by a group of names (the data reads as one reviewed line per group)."""
    return dict.fromkeys(names.split(), reason)


# ----------------------------------------------------------------------------------------- builtins
PURE_BUILTIN_REASONS: dict[str, str] = {
    **_each(
        "abs divmod pow round sum min max len all any sorted reversed enumerate zip range map filter iter next",
        "computes from its arguments; returns a number, a fresh object or an iterator over the arguments",
    ),
    **_each(
        "bool int float complex list tuple dict set frozenset slice",
        "builtin type: makes a fresh or immutable value (its class is immutable)",
    ),
    **_each(
        "bin oct hex chr ord format",
        "number or character formatting: a fresh str (format(x, spec) walks no attributes)",
    ),
    "str": "only called as str(value), one argument (the verifier checks each use): str(data, encoding) "
    "looks a codec up by the program's name, and the codec registry caches every name it was asked",
    "isinstance": "reads a type relation (ABC caches it fills are keyed by types, semantically invisible)",
    "callable": "reads a type slot",
    "print": "writes to sys.stdout, which the runner captures per program",
    "Ellipsis": "immutable singleton",
    **_each(
        "Exception ArithmeticError AssertionError AttributeError IndexError KeyError LookupError NameError "
        "NotImplementedError OverflowError RecursionError RuntimeError StopIteration TypeError "
        "UnboundLocalError ValueError ZeroDivisionError FloatingPointError",
        "an exception class to raise or catch (not BaseException: SystemExit and friends stay the runner's)",
    ),
}

REFUSED_BUILTINS: dict[str, str] = {
    **_each(
        "open input breakpoint help exit quit license credits copyright",
        "files, the terminal or the interpreter's exit",
    ),
    **_each("eval exec compile", "run strings as code"),
    **_each("globals locals vars dir", "hand out namespaces (the builtins dict, module dicts)"),
    **_each("getattr setattr delattr hasattr", "attribute access by names given as strings"),
    **_each("type object super property classmethod staticmethod issubclass", "classes and metaclasses"),
    **_each("id hash repr ascii", "addresses (id, default hash, repr of functions) vary by run and allocator"),
    "memoryview": "raw buffers of other objects",
    **_each(
        "bytes bytearray NotImplemented",
        "not among the restricted policy's builtins, which a pure program must not exceed (bytes literals are fine)",
    ),
    **_each("aiter anext", "async iteration"),
    **_each("BaseException SystemExit KeyboardInterrupt GeneratorExit", "exceptions the runner uses to stop a program"),
    "__import__": "the import hook (pure programs import with `import`, which gets the proxy)",
    "__build_class__": "classes",
}

# ------------------------------------------------------------------------------------------ modules
# The pure members of each module a pure program may import: immutable constants; functions that read
# no shared mutable state, write none, keep no reference to their arguments, and return fresh or
# immutable values; classes whose instances are the program's own. A member naming a submodule listed
# here (numpy.linalg) is that submodule's proxy.
_MATH_FN = "pure function of numbers; returns a number"
_NP_FN = "numpy function: computes a fresh array or scalar from its arguments"
_NP_UFUNC = "numpy ufunc: a fresh array or scalar; out= can only name the program's own array"
PURE_MODULES: dict[str, dict[str, str]] = {
    "math": {
        **_each(
            "acos acosh asin asinh atan atan2 atanh cbrt ceil comb copysign cos cosh degrees dist erf "
            "erfc exp exp2 expm1 fabs factorial floor fmod frexp fsum gamma gcd hypot isclose isfinite "
            "isinf isnan isqrt lcm ldexp lgamma log log10 log1p log2 modf nextafter perm pow prod "
            "radians remainder sin sinh sqrt tan tanh trunc ulp",
            _MATH_FN,
        ),
        **_each("e pi tau inf nan", "float constant"),
    },
    "cmath": {
        **_each(
            "acos acosh asin asinh atan atanh cos cosh exp isclose isfinite isinf isnan log log10 phase "
            "polar rect sin sinh sqrt tan tanh",
            _MATH_FN,
        ),
        **_each("e pi tau inf infj nan nanj", "float or complex constant"),
    },
    "fractions": {"Fraction": "immutable rational numbers; pure-Python class the program cannot write"},
    "statistics": {
        **_each(
            "mean fmean geometric_mean harmonic_mean median median_low median_high median_grouped mode "
            "multimode pstdev pvariance stdev variance quantiles correlation covariance linear_regression",
            "computes from its data (Decimal inputs, which touch the decimal context, are unreachable)",
        ),
        "StatisticsError": "exception class to catch",
        # (Not what statistics re-exports from math, fractions, bisect...: the restricted policy refuses
        # those names there, so a program that reads one is unproven and takes the fork tier.)
    },
    "itertools": _each(
        "accumulate chain combinations combinations_with_replacement compress count cycle dropwhile "
        "filterfalse groupby islice pairwise permutations product repeat starmap takewhile tee zip_longest",
        "C iterator over the program's arguments; holds nothing shared",
    ),
    "functools": {
        "reduce": "folds the program's own iterable with its function",
        "partial": "a fresh partial object around the program's callable",
        "cmp_to_key": "a fresh key wrapper around the program's function",
        **_each(
            "lru_cache cache",
            "a fresh cache around the program's own function (update_wrapper writes only the new wrapper)",
        ),
    },
    "collections": {
        **_each("Counter defaultdict deque OrderedDict", "container class: instances are the program's own"),
    },
    "operator": {
        **_each(
            "abs add and_ concat contains countOf eq floordiv ge gt index indexOf inv invert is_ is_not "
            "le lshift lt mod mul ne neg not_ or_ pos pow rshift sub truediv truth xor "
            "matmul",
            "the function form of an operator",
        ),
        "itemgetter": "item access (like BINARY_SUBSCR), never attributes (attrgetter/methodcaller refused)",
    },
    "heapq": _each(
        "heappush heappop heapify heapreplace heappushpop nlargest nsmallest",
        "works on the program's own list (merge, a Python generator, is left out)",
    ),
    "bisect": _each(
        "bisect bisect_left bisect_right insort insort_left insort_right", "works on the program's own list"
    ),
    "string": {
        **_each(
            "ascii_letters ascii_lowercase ascii_uppercase digits hexdigits octdigits punctuation printable whitespace",
            "str constant",
        ),
        "capwords": "str function (Formatter and Template, which walk fields, are left out)",
    },
    "numpy": {
        **_each(
            "array asarray arange linspace zeros ones full eye identity zeros_like ones_like full_like copy "
            "diag tile repeat concatenate stack vstack hstack column_stack append insert reshape ravel "
            "transpose swapaxes squeeze flip fliplr flipud roll split take where nonzero argmax argmin "
            "argsort sort unique searchsorted partition clip cumsum cumprod cumulative_sum diff sum prod "
            "mean median average std var max min amax amin nanmax nanmin nansum nanmean percentile "
            "quantile count_nonzero all any allclose isclose array_equal dot matmul inner outer cross "
            "trace diagonal interp polyfit polyval roots bincount round around shape size ndim real imag "
            "astype trapezoid",
            _NP_FN,
        ),
        **_each(
            "abs absolute add subtract multiply divide true_divide floor_divide mod remainder fmod divmod "
            "power negative reciprocal sqrt cbrt square exp exp2 expm1 log log10 log2 log1p sin cos tan "
            "arcsin arccos arctan arctan2 sinh cosh tanh arcsinh arccosh arctanh hypot degrees radians "
            "deg2rad rad2deg floor ceil trunc rint sign fabs maximum minimum fmax fmin gcd lcm isnan isinf "
            "isfinite logical_and logical_or logical_not logical_xor equal not_equal less less_equal "
            "greater greater_equal conj conjugate acos acosh asin asinh atan atan2 atanh copysign frexp "
            "invert ldexp modf nextafter pow",
            _NP_UFUNC,
        ),
        **_each("compress concat indices", _NP_FN),
        **_each("int32 int64 float32 float64 complex128 bool", "numpy scalar type (immutable C class)"),
        **_each("pi e inf nan euler_gamma newaxis", "immutable constant"),
        "linalg": "the numpy.linalg proxy",
    },
    "numpy.linalg": {
        **_each(
            "det inv solve norm eig eigh eigvals eigvalsh matrix_rank matrix_power lstsq pinv qr svd "
            "cholesky cond slogdet multi_dot",
            "linear algebra on the program's arrays; fresh results "
            "(its internal errstate is entered and left inside the call)",
        ),
        **_each("cross diagonal matmul outer trace", "the numpy function numpy.linalg re-exports"),
        "LinAlgError": "exception class to catch",
    },
}

# ---------------------------------------------------------------------------------------- attributes
# Attribute names a pure program may read on any value (members of pure modules are allowed too). An
# attribute is allowed by name alone, since bytecode does not tell types apart: each name was checked
# on every type a pure program can hold (tests/policies/test_pure.py probes them). Never frames, code, globals,
# buffers (`base`, `data`, `ctypes`, `flags`, `view`), file writers (`tofile`, `dump`), `dtype` (shared
# descriptor objects), field walkers (`format`, `format_map`), codecs (`encode`, `decode`), nor any
# name starting with "_".
PURE_ATTRIBUTES: dict[str, str] = {
    **_each(
        "real imag conjugate numerator denominator bit_length bit_count to_bytes from_bytes "
        "as_integer_ratio is_integer hex fromhex",
        "number method or field: a number or a fresh str",
    ),
    **_each(
        "capitalize casefold center count endswith expandtabs find index isalnum isalpha isascii isdecimal "
        "isdigit isidentifier islower isnumeric isprintable isspace istitle isupper join ljust lower lstrip "
        "maketrans partition removeprefix removesuffix replace rfind rindex rjust rpartition rsplit rstrip "
        "split splitlines startswith strip swapcase title translate upper zfill",
        "str method: a fresh str, list or number",
    ),
    **_each("append clear copy extend insert pop remove reverse sort", "list method on the program's own list"),
    **_each("fromkeys get items keys popitem setdefault update values", "dict method on the program's own dict"),
    **_each(
        "add difference difference_update discard intersection intersection_update isdisjoint issubset "
        "issuperset symmetric_difference symmetric_difference_update union",
        "set method on its own set",
    ),
    **_each("start stop step indices", "range or slice field: an int"),
    **_each("most_common elements subtract total", "Counter method"),
    **_each("appendleft extendleft popleft rotate maxlen", "deque method or field"),
    "move_to_end": "OrderedDict method",
    "default_factory": "the program's own defaultdict's factory",
    **_each("limit_denominator from_float", "Fraction method: a fresh Fraction"),
    "from_iterable": "itertools.chain.from_iterable",
    "args": "an exception's arguments (the program's own values, or strs)",
    **_each("T shape ndim size nbytes itemsize", "ndarray field: a fresh view of its own array or a number"),
    **_each(
        "all any argmax argmin argsort astype clip cumprod cumsum diagonal dot fill flatten item max mean min "
        "nonzero prod ravel repeat reshape round searchsorted squeeze std sum swapaxes take tolist trace "
        "transpose var conj",
        "ndarray method: computes from or writes its own array",
    ),
    **_each("reduce accumulate outer", "ufunc method: a fresh array"),
    **_each("slope intercept", "statistics.linear_regression result field"),
    **_each("eigenvalues eigenvectors", "numpy.linalg.eig result field (a fresh array)"),
}
