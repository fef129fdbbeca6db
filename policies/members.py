"""Which members of each allowed module a restricted program may read: default deny, as data.

`MEMBERS[module][member]` is the one-line reason a member was admitted. A module attribute that is not
listed is refused (`forbidden_attribute`), whether it is read as `module.name`, by `getattr`, or by
`from module import name`; a module with no entry here gives nothing. Attributes of *values* (methods of
lists, arrays, Fractions...) are not listed here: `restricted.Guards` checks those by name and by what
they return (see its module docstring).

How a member was reviewed. Admitted: functions and classes that compute on their arguments and return
fresh or immutable values; constants; exception classes. Refused, with the reason at the refusal below:
anything that opens files or reads raw memory; anything that looks attributes up by a name given as a
string (those are supplied guarded instead, see `GUARDED`); anything that evaluates a string as code;
anything that hands out modules, frames, globals or metaclasses; mutable module-level tables that only
serve to change a library's behaviour for later callers. A member marked "fork-private" changes state
that a fork of the worker owns alone (the restricted policy runs every unverified program in a fresh
fork), so nothing outlives the program.
"""

from __future__ import annotations


def _group(reason: str, names: str) -> dict[str, str]:
    """Every whitespace-separated name in `names`, admitted for `reason`."""
    return dict.fromkeys(names.split(), reason)


_PURE = "pure function of its arguments"
_CONST = "constant"
_EXC = "exception class"
_CLASS = "value class: its instances compute, they reach nothing"

MEMBERS: dict[str, dict[str, str]] = {
    "math": {
        **_group(
            _PURE,
            """
            acos acosh asin asinh atan atan2 atanh cbrt ceil comb copysign cos cosh degrees dist erf
            erfc exp exp2 expm1 fabs factorial floor fmod frexp fsum gamma gcd hypot isclose isfinite
            isinf isnan isqrt lcm ldexp lgamma log log10 log1p log2 modf nextafter perm pow prod
            radians remainder sin sinh sqrt tan tanh trunc ulp""",
        ),
        **_group(_CONST, "e inf nan pi tau"),
    },
    "cmath": {
        **_group(
            _PURE,
            """
            acos acosh asin asinh atan atanh cos cosh exp isclose isfinite isinf isnan log log10
            phase polar rect sin sinh sqrt tan tanh""",
        ),
        **_group(_CONST, "e inf infj nan nanj pi tau"),
    },
    "statistics": {
        **_group(
            _PURE,
            """
            correlation covariance fmean geometric_mean harmonic_mean linear_regression mean median
            median_grouped median_high median_low mode multimode pstdev pvariance quantiles stdev
            variance""",
        ),
        # NormalDist.samples draws from a Random seeded by the program or the fork's own state.
        "NormalDist": _CLASS + "; samples() uses a fork-private generator",
        "StatisticsError": _EXC,
        # Not: the modules and helpers statistics re-exports (math, sys, random, Decimal, ...).
    },
    "fractions": {"Fraction": _CLASS},  # not: the re-exported math, operator, re, sys, Decimal
    "decimal": {
        **_group(_CLASS, "Decimal Context DecimalTuple"),
        # The thread's context is fork-private: a program that sets prec or traps changes only its own
        # fork. Not the module-level DefaultContext/BasicContext/ExtendedContext singletons: changing
        # them only serves to change what later callers get, and Context(...) builds any of them.
        **_group("the current context: fork-private", "getcontext setcontext localcontext"),
        **_group(
            _CONST,
            """
            MAX_EMAX MAX_PREC MIN_EMIN MIN_ETINY HAVE_CONTEXTVAR HAVE_THREADS ROUND_05UP ROUND_CEILING
            ROUND_DOWN ROUND_FLOOR ROUND_HALF_DOWN ROUND_HALF_EVEN ROUND_HALF_UP ROUND_UP""",
        ),
        **_group(
            _EXC,
            """
            Clamped ConversionSyntax DecimalException DivisionByZero DivisionImpossible
            DivisionUndefined FloatOperation Inexact InvalidContext InvalidOperation Overflow Rounded
            Subnormal Underflow""",
        ),
    },
    "datetime": {
        **_group(_CLASS, "date datetime time timedelta timezone tzinfo"),
        **_group(_CONST, "MAXYEAR MINYEAR UTC"),
        # Not: datetime_CAPI (a C capsule of the module's internals), sys.
    },
    "itertools": _group(
        "lazy combinator over the program's own iterables",
        """
        accumulate chain combinations combinations_with_replacement compress count cycle dropwhile
        filterfalse groupby islice pairwise permutations product repeat starmap takewhile tee
        zip_longest""",
    ),
    "functools": {
        **_group(_PURE, "reduce cmp_to_key"),
        "partial": "binds arguments; names no attribute",
        "partialmethod": "binds arguments; names no attribute",
        # lru_cache/cache copy the wrapped function's fixed WRAPPER_ASSIGNMENTS, never names chosen by
        # the program; the cache is the program's own.
        **_group("memoizes the program's function under fixed attribute names", "cache lru_cache"),
        "cached_property": "stores under the name of the program's own class attribute",
        "total_ordering": "adds comparison methods to the program's own class under fixed names",
        # Not: update_wrapper/wraps (copy attributes named by the caller: `updated=('__globals__',)`
        # hands out a module's globals), WRAPPER_ASSIGNMENTS/WRAPPER_UPDATES, singledispatch and
        # singledispatchmethod (they eval() string annotations outside RestrictedPython),
        # get_cache_token, recursive_repr, RLock, GenericAlias.
    },
    "collections": {
        **_group(_CLASS, "ChainMap Counter OrderedDict UserDict UserList defaultdict deque"),
        # namedtuple exec()s a fixed template; the names it puts there are checked identifiers that may
        # not start with an underscore, so a program chooses no code and no dunder through it.
        "namedtuple": "class factory over a fixed template and checked field names",
        # Not: abc (a module outside the allowlist), UserString (its format and format_map call
        # str.format on its data: '{0.__class__}' fields unchecked).
    },
    "operator": {
        **_group(
            _PURE,
            """
            abs add and_ call concat contains countOf eq floordiv ge gt iadd iand iconcat ifloordiv
            ilshift imatmul imod imul index indexOf inv invert ior ipow irshift is_ is_not isub
            itruediv ixor le length_hint lshift lt matmul mod mul ne neg not_ or_ pos pow rshift sub
            truediv truth xor""",
        ),
        # Item writes through these are the same writes `x[k] = v` may make.
        **_group("item write, as `x[k] = v`", "setitem delitem"),
        # These four read items or attributes by a caller's key or name: supplied guarded (GUARDED).
        **_group("guarded: item reads pass the item guard", "getitem itemgetter"),
        **_group("guarded: attribute reads pass the attribute guard", "attrgetter methodcaller"),
    },
    "re": {
        **_group(_PURE, "compile escape findall finditer fullmatch match search split sub subn purge"),
        **_group(_CLASS, "Match Pattern RegexFlag"),
        "error": _EXC,
        **_group(_CONST, "A ASCII DEBUG DOTALL I IGNORECASE L LOCALE M MULTILINE NOFLAG S U UNICODE VERBOSE X"),
        # Not: template/TEMPLATE/T (deprecated), Scanner, and the re-exported copyreg, enum, functools.
    },
    "string": {
        **_group(
            _CONST,
            "ascii_letters ascii_lowercase ascii_uppercase digits hexdigits octdigits printable punctuation whitespace",
        ),
        "capwords": _PURE,
        # Template fields are identifiers looked up as keys of the mapping given: no attribute walk.
        "Template": "substitutes $identifiers from a mapping by key, never by attribute",
        # Not: Formatter (its fields walk attributes and items: '{0.__class__}').
    },
    "random": {
        **_group(
            "draws from the fork-private generator",
            """
            betavariate choice choices expovariate gammavariate gauss getrandbits getstate
            lognormvariate normalvariate paretovariate randbytes randint random randrange sample seed
            setstate shuffle triangular uniform vonmisesvariate weibullvariate""",
        ),
        **_group(_CLASS, "Random SystemRandom"),
        **_group(_CONST, "BPF LOG4 NV_MAGICCONST RECIP_BPF SG_MAGICCONST TWOPI"),
    },
    "heapq": _group(
        "works on the program's own list", "heapify heappop heappush heappushpop heapreplace merge nlargest nsmallest"
    ),
    "bisect": _group(
        "works on the program's own list", "bisect bisect_left bisect_right insort insort_left insort_right"
    ),
    "copy": {
        # copy/deepcopy use an object's own __reduce_ex__/__deepcopy__: a program class cannot define
        # dunders (RestrictedPython), so only library hooks run, and they return copies, not internals.
        "copy": "copies a value through the library's own hooks",
        # Guarded: deepcopy(x, memo) would leave every original it copied (a library object's real
        # __dict__ included) in the program's memo.
        "deepcopy": "guarded: copies through the library's hooks, no caller memo",
        **_group(_EXC, "Error error"),
        # Not: dispatch_table (copyreg's table: a program that wrote to it would choose how every
        # later copy is made).
    },
    "numbers": {
        # register() on these ABCs changes only the fork's ABC registry.
        **_group(
            "abstract base class for isinstance checks; register() is fork-private",
            "Number Complex Real Rational Integral",
        ),
        # Not: ABCMeta (a metaclass: a class factory), abstractmethod.
    },
    "calendar": {
        **_group(
            _PURE,
            """
            isleap leapdays monthrange monthcalendar weekday timegm weekheader week month calendar
            formatstring""",
        ),
        **_group("prints to the program's own captured output", "prmonth prcal prweek format"),
        **_group("first weekday of the module's functions: fork-private", "setfirstweekday firstweekday"),
        **_group(_CLASS, "Calendar TextCalendar HTMLCalendar"),
        **_group(
            _CONST,
            """
            MONDAY TUESDAY WEDNESDAY THURSDAY FRIDAY SATURDAY SUNDAY January February EPOCH day_name
            day_abbr month_name month_abbr""",
        ),
        **_group(_EXC, "IllegalMonthError IllegalWeekdayError error"),
        # Not: mdays (a mutable table the module's functions read), LocaleTextCalendar,
        # LocaleHTMLCalendar and different_locale (setlocale), main (argparse and file output),
        # the re-exported datetime, sys, repeat, c.
    },
}

# Everyday Python that models write (issue 37: the idiom corpus, tests/data/idioms.jsonl).
MEMBERS["typing"] = {
    # Annotations only: each is a marker or an alias that subscripting turns into another alias; none
    # evaluates a string (get_type_hints, which eval()s annotations, is not listed).
    **_group(
        "annotation marker or generic alias; evaluates nothing",
        """
        Any Callable ClassVar Dict DefaultDict Deque Final FrozenSet Generic Iterable Iterator List
        Literal Mapping MutableMapping NamedTuple Optional OrderedDict Sequence Set Tuple Type TypeVar
        Union Counter""",
    ),
    "cast": "returns its second argument unchanged",
    "TYPE_CHECKING": _CONST,
    # Not: get_type_hints and ForwardRef (eval() of annotation strings), NewType and TypedDict (classes
    # made from names and namespaces given at run time), Protocol (runtime_checkable reads attributes by
    # name), overload, no_type_check, the re-exported modules.
}
MEMBERS["dataclasses"] = {
    # dataclass() sets attributes on the program's own class under fixed names and exec()s methods it
    # generates from the class's field names (checked identifiers: class-body names); reviewed in
    # restricted.REVIEWED_EVALUATORS. Guarded: the class it returns is the program's (slots=True makes a
    # new one).
    "dataclass": "guarded: generates methods under fixed names from the program's checked field names",
    "field": "describes a field: default, factory, flags",
    **_group("reads the program's dataclass", "fields is_dataclass"),
    # Guarded: asdict and astuple deep-copy the fields' values (the copy protocol's review applies).
    **_group("guarded: copies through the reviewed copy protocol", "asdict astuple"),
    "replace": "a new instance through the class's own __init__ (keyword names checked as every call's)",
    **_group(_EXC, "FrozenInstanceError"),
    **_group(_CONST, "MISSING KW_ONLY"),
    "InitVar": "annotation marker",
    "Field": _CLASS,
    # Not: make_dataclass (a class from a namespace given at run time), the re-exported modules.
}
MEMBERS["__future__"] = _group(
    "a compiler feature flag, a record of dates",
    "annotations division absolute_import print_function unicode_literals generator_stop nested_scopes "
    "with_statement generators barry_as_FLUFL",
)
MEMBERS["sys"] = {
    # Fork-private: a restricted program always runs in its own fork, which nothing else shares.
    "setrecursionlimit": "this fork's recursion limit: fork-private (a stack overflow crashes only it)",
    "set_int_max_str_digits": "this fork's int-to-str digit limit: fork-private",
    **_group("reads a limit or a number", "getrecursionlimit get_int_max_str_digits"),
    **_group(_CONST, "maxsize float_info int_info byteorder version_info hexversion"),
    # Not: everything else (modules, _getframe, settrace, stdout/stdin, exit, path, argv...).
}
MEMBERS["sympy.abc"] = _group(
    "a Symbol named by its letter (sympy.abc's own, made at its import)",
    """
    A B C D E F G H I J K L M N O P Q R S T U V W X Y Z a alpha b beta c chi d delta e epsilon eta f g
    gamma h i iota j k kappa l lamda m mu n nu o omega omicron p phi pi psi q r rho s sigma t tau theta
    u upsilon v w x xi y z zeta""",
)

MEMBERS["sympy.ntheory.modular"] = _group(
    "number theory on integers (Chinese remainder theorem)", "crt crt1 crt2 solve_congruence symmetric_residue"
)

# numpy: creation, math, statistics, sorting and set routines, dtypes and constants. Reviewed out:
# file and buffer I/O (load save savez savez_compressed savetxt loadtxt genfromtxt fromfile fromregex
# frombuffer fromstring from_dlpack memmap), raw memory (ctypeslib lib core f2py; `lib` holds
# stride_tricks.as_strided), submodules outside the allowlist (testing char rec ma strings typing
# dtypes exceptions), the ndarray constructor (shape, buffer, offset, strides: see GUARDED), ndarray
# subclasses with their own constructors (matrix asmatrix recarray record; bmat also reads the
# caller's frame), process-wide tables and hooks (sctypeDict typecodes ScalarType seterrcall
# geterrcall setbufsize getbufsize set_printoptions get_printoptions printoptions), introspection and
# build info (show_config show_runtime get_include info test), low-level iterators and memory probes
# (nditer nested_iters ndindex flatiter broadcast copyto may_share_memory shares_memory), and classes
# that are only useful as constructors of raw objects (void object_ generic ufunc frompyfunc).
_NUMPY = """
    False_ True_ abs absolute acos acosh add all allclose amax amin angle any append apply_along_axis
    apply_over_axes arange arccos arccosh arcsin arcsinh arctan arctan2 arctanh argmax argmin
    argpartition argsort argwhere around array array2string array_equal array_equiv array_repr
    array_split array_str asanyarray asarray asarray_chkfinite ascontiguousarray asfortranarray asin
    asinh astype atan atan2 atanh atleast_1d atleast_2d atleast_3d average bartlett base_repr
    binary_repr bincount bitwise_and bitwise_count bitwise_invert bitwise_left_shift bitwise_not
    bitwise_or bitwise_right_shift bitwise_xor blackman block bool bool_ broadcast_arrays
    broadcast_shapes broadcast_to byte bytes_ c_ can_cast cbrt cdouble ceil character choose clip
    clongdouble column_stack common_type complex128 complex256 complex64 complexfloating compress
    concat concatenate conj conjugate convolve copy copysign corrcoef correlate cos cosh
    count_nonzero cov cross csingle cumprod cumsum cumulative_prod cumulative_sum datetime64
    datetime_as_string deg2rad degrees delete diag diag_indices diag_indices_from diagflat diagonal
    diff digitize divide divmod dot double dsplit dstack dtype e ediff1d einsum einsum_path empty
    empty_like equal errstate euler_gamma exp exp2 expand_dims expm1 extract eye fabs
    fill_diagonal finfo fix flatnonzero flexible flip fliplr flipud float128 float16 float32 float64
    float_power floating floor floor_divide fmax fmin fmod format_float_positional
    format_float_scientific frexp fromfunction fromiter full full_like gcd geomspace geterr gradient
    greater greater_equal half hamming hanning heaviside histogram histogram2d histogram_bin_edges
    histogramdd hsplit hstack hypot i0 identity iinfo imag index_exp indices inexact inf inner insert
    int16 int32 int64 int8 int_ intc integer interp intersect1d intp invert isclose iscomplex
    iscomplexobj isdtype isfinite isfortran isin isinf isnan isnat isneginf isposinf isreal isrealobj
    isscalar issubdtype iterable ix_ kaiser kron lcm ldexp left_shift less less_equal lexsort
    linspace log log10 log1p log2 logaddexp logaddexp2 logical_and logical_not logical_or
    logical_xor logspace long longdouble longlong mask_indices matmul matrix_transpose matvec max
    maximum mean median meshgrid mgrid min min_scalar_type minimum mod modf moveaxis multiply nan
    nan_to_num nanargmax nanargmin nancumprod nancumsum nanmax nanmean nanmedian nanmin
    nanpercentile nanprod nanquantile nanstd nansum nanvar ndenumerate ndim negative newaxis
    nextafter nonzero not_equal number ogrid ones ones_like outer packbits pad partition percentile
    permute_dims pi piecewise place poly poly1d polyadd polyder polydiv polyfit polyint polymul
    polysub polyval positive pow power prod promote_types ptp put put_along_axis putmask quantile r_
    rad2deg radians ravel ravel_multi_index real real_if_close reciprocal remainder repeat require
    reshape resize result_type right_shift rint roll rollaxis roots rot90 round row_stack s_
    searchsorted select setdiff1d seterr setxor1d shape short sign signbit signedinteger sin sinc
    single sinh size sort sort_complex spacing split sqrt square squeeze stack std str_ subtract sum
    swapaxes take take_along_axis tan tanh tensordot tile timedelta64 trace transpose trapezoid tri
    tril tril_indices tril_indices_from trim_zeros triu triu_indices triu_indices_from true_divide
    trunc ubyte uint uint16 uint32 uint64 uint8 uintc uintp ulong ulonglong union1d unique unique_all
    unique_counts unique_inverse unique_values unpackbits unravel_index unsignedinteger unstack
    unwrap ushort vander var vdot vecdot vecmat vectorize vsplit vstack where zeros zeros_like
"""
MEMBERS["numpy"] = {
    **_group("array creation, math, statistics or dtype; reviewed: reads no file, pointer or string code", _NUMPY),
    **_group("allowed submodule, itself listed here", "linalg random fft polynomial emath"),
    "ndarray": "guarded: a stand-in for isinstance checks that refuses construction (GUARDED)",
}
MEMBERS["numpy.linalg"] = {
    **_group(
        "linear algebra on the program's arrays",
        """
        cholesky cond cross det diagonal eig eigh eigvals eigvalsh inv lstsq matmul matrix_norm
        matrix_power matrix_rank matrix_transpose multi_dot norm outer pinv qr slogdet solve svd
        svdvals tensordot tensorinv tensorsolve trace vecdot vector_norm""",
    ),
    "LinAlgError": _EXC,
}
MEMBERS["numpy.random"] = {
    **_group(
        "draws from the fork-private global generator",
        """
        beta binomial bytes chisquare choice dirichlet exponential f gamma geometric get_state gumbel
        hypergeometric laplace logistic lognormal logseries multinomial multivariate_normal
        negative_binomial noncentral_chisquare noncentral_f normal pareto permutation poisson power
        rand randint randn random random_integers random_sample ranf rayleigh sample seed set_state
        shuffle standard_cauchy standard_exponential standard_gamma standard_normal standard_t
        triangular uniform vonmises wald weibull zipf""",
    ),
    **_group(_CLASS, "Generator RandomState SeedSequence BitGenerator MT19937 PCG64 PCG64DXSM Philox SFC64"),
    **_group("makes or swaps a generator: fork-private", "default_rng get_bit_generator set_bit_generator"),
    # Not: the mtrand and bit_generator modules, test.
}
MEMBERS["numpy.fft"] = _group(
    "transform of the program's arrays",
    """
    fft fft2 fftfreq fftn fftshift hfft ifft ifft2 ifftn ifftshift ihfft irfft irfft2 irfftn rfft
    rfft2 rfftfreq rfftn""",
)
_EMATH = _group("complex-valued math on the program's arrays", "arccos arcsin arctanh log log10 log2 logn power sqrt")
MEMBERS["numpy.lib.scimath"] = _EMATH  # numpy.emath is this module
MEMBERS["numpy.emath"] = _EMATH
MEMBERS["numpy.polynomial"] = {
    **_group(_CLASS, "Polynomial Chebyshev Legendre Hermite HermiteE Laguerre"),
    **_group("allowed submodule, itself listed here", "polynomial chebyshev legendre hermite hermite_e laguerre"),
    # Not: polyutils (it holds the warnings module), set_default_printstyle (process-wide), test.
}
_POLY = "polynomial arithmetic on the program's coefficients"
MEMBERS["numpy.polynomial.polynomial"] = _group(
    _POLY,
    """
    polyzero polyone polyx polydomain polyline polyadd polysub polymulx polymul polydiv polypow
    polyval polyvalfromroots polyder polyint polyfromroots polyvander polyfit polytrim polyroots
    Polynomial polyval2d polyval3d polygrid2d polygrid3d polyvander2d polyvander3d polycompanion""",
)
MEMBERS["numpy.polynomial.chebyshev"] = _group(
    _POLY,
    """
    chebzero chebone chebx chebdomain chebline chebadd chebsub chebmulx chebmul chebdiv chebpow
    chebval chebder chebint cheb2poly poly2cheb chebfromroots chebvander chebfit chebtrim chebroots
    chebpts1 chebpts2 Chebyshev chebval2d chebval3d chebgrid2d chebgrid3d chebvander2d chebvander3d
    chebcompanion chebgauss chebweight chebinterpolate""",
)
MEMBERS["numpy.polynomial.legendre"] = _group(
    _POLY,
    """
    legzero legone legx legdomain legline legadd legsub legmulx legmul legdiv legpow legval legder
    legint leg2poly poly2leg legfromroots legvander legfit legtrim legroots Legendre legval2d
    legval3d leggrid2d leggrid3d legvander2d legvander3d legcompanion leggauss legweight""",
)
MEMBERS["numpy.polynomial.hermite"] = _group(
    _POLY,
    """
    hermzero hermone hermx hermdomain hermline hermadd hermsub hermmulx hermmul hermdiv hermpow
    hermval hermder hermint herm2poly poly2herm hermfromroots hermvander hermfit hermtrim hermroots
    Hermite hermval2d hermval3d hermgrid2d hermgrid3d hermvander2d hermvander3d hermcompanion
    hermgauss hermweight""",
)
MEMBERS["numpy.polynomial.hermite_e"] = _group(
    _POLY,
    """
    hermezero hermeone hermex hermedomain hermeline hermeadd hermesub hermemulx hermemul hermediv
    hermepow hermeval hermeder hermeint herme2poly poly2herme hermefromroots hermevander hermefit
    hermetrim hermeroots HermiteE hermeval2d hermeval3d hermegrid2d hermegrid3d hermevander2d
    hermevander3d hermecompanion hermegauss hermeweight""",
)
MEMBERS["numpy.polynomial.laguerre"] = _group(
    _POLY,
    """
    lagzero lagone lagx lagdomain lagline lagadd lagsub lagmulx lagmul lagdiv lagpow lagval lagder
    lagint lag2poly poly2lag lagfromroots lagvander lagfit lagtrim lagroots Laguerre lagval2d
    lagval3d laggrid2d laggrid3d lagvander2d lagvander3d lagcompanion laggauss lagweight""",
)

# sympy: symbols, numbers, the usual functions and solvers. A string given to any of these reaches
# sympify() -> parse_expr(), which eval()s it: the policy replaces parse_expr with a refusal in every
# restricted runner (restricted._close_sympy_string_parsing). Reviewed out: sympify, S (calling it is
# sympify), parse_expr, lambdify (exec()s generated code), var (writes names into the caller's
# frame globals), init_printing/preview/plot (files, viewers), srepr (only useful to feed eval),
# and every submodule (utilities, parsing, printing, core, ...).
MEMBERS["sympy"] = {
    **_group(
        "symbolic value or function",
        """
        Symbol Dummy Wild symbols Rational Integer Float Number Tuple Add Mul Pow Abs Mod Min Max
        Piecewise Lambda Derivative Integral Limit Sum Product Subs Poly Matrix ImmutableMatrix
        SparseMatrix Interval Union Intersection FiniteSet EmptySet Reals Integers Naturals
        Eq Ne Lt Le Gt Ge Equality Unequality LessThan GreaterThan StrictLessThan StrictGreaterThan
        And Or Not Xor Implies true false Heaviside DiracDelta KroneckerDelta
        exp log ln sin cos tan cot sec csc asin acos atan atan2 acot sinh cosh tanh asinh acosh atanh
        sqrt cbrt root real_root floor ceiling frac factorial factorial2 binomial rf ff gamma beta
        erf zeta re im conjugate arg sign fibonacci lucas catalan harmonic bell""",
    ),
    # Function('f', **kwargs) puts its keyword arguments into the new class's namespace: the
    # transformer and _apply_ refuse keyword names that start with an underscore, so no dunder.
    "Function": "undefined function symbol; keyword names are checked (no dunders)",
    **_group(_CONST, "pi E I oo zoo nan GoldenRatio EulerGamma Catalan"),
    **_group(
        "symbolic algorithm on the program's expressions",
        """
        solve solveset nsolve linsolve nonlinsolve dsolve roots real_roots nroots simplify expand
        factor factorint factor_list sqf_list diff integrate limit series summation product N nfloat
        trigsimp nsimplify collect cancel apart together radsimp powsimp logcombine expand_trig
        expand_log expand_power_base count_ops degree div rem quo groebner resultant discriminant
        numer denom fraction eye zeros ones diag det solve_linear_system interpolate
        rational_interpolate continued_fraction""",
    ),
    **_group(
        "number theory on integers",
        """
        gcd lcm igcd ilcm gcd_list lcm_list isprime prime primerange nextprime prevprime primepi
        divisors divisor_count totient primefactors mod_inverse integer_nthroot perfect_power
        multinomial_coefficients binomial_coefficients discrete_log n_order primitive_root
        legendre_symbol jacobi_symbol sieve""",
    ),
    **_group("a random prime in a range, from sympy's own generator (seeded per program)", "randprime"),
    **_group("renders an expression as text", "latex pretty pprint sstr"),
}


def _qualified(module: str, reason: str, names: str) -> dict[str, str]:
    return {f"{module}.{name}": reason for name in names.split()}


# The allowlist sweep's review (tests/security/test_allowlist_sweep.py): members whose code, or the code one level
# below it, reaches frames, eval/exec/compile, setattr, an object's __dict__, getattr by a computed name or
# globals(). Each with the reason that reach is safe as the member uses it. A member the sweep flags and
# this does not list fails the sweep: it is refused until reviewed.
_SYMPY_BASIC = (
    "sympy's own dispatch: getattr of names it builds from fixed prefixes ('_eval_rewrite_as_', '_eval_expand_'"
    " + a hint, which is one of expand()'s keyword names, checked like every name), Rational._Rrel's fixed name;"
    " setattr only in __setstate__, whose state is sympy's own __getstate__, reached through the reviewed copy"
)
REVIEWED_REACH: dict[str, str] = {
    **_qualified(
        "sympy",
        _SYMPY_BASIC,
        """
        Abs Add And Derivative DiracDelta Dummy Eq Equality FiniteSet Float Function Ge GreaterThan
        Gt Heaviside ImmutableMatrix Implies Integer Integral Intersection Interval KroneckerDelta
        Lambda Le LessThan Limit Lt Matrix Max Min Mod Mul Ne Not Number Or Piecewise Poly Pow
        Product Rational SparseMatrix StrictGreaterThan StrictLessThan Subs Sum Symbol Tuple
        Unequality Union Wild Xor acos acosh acot arg asin asinh atan atan2 atanh bell beta binomial
        cancel catalan cbrt ceiling collect conjugate continued_fraction cos cosh cot count_ops csc
        degree det divisor_count erf exp expand_log factor factorial factorial2 factorint ff
        fibonacci floor frac fraction gamma gcd_list groebner harmonic im integrate interpolate
        jacobi_symbol lcm_list legendre_symbol limit linsolve ln log logcombine lucas nfloat
        nonlinsolve nroots nsimplify perfect_power powsimp primepi product radsimp re real_root
        real_roots rf root roots sec sign simplify sin sinh solve solveset sqrt summation tan tanh
        together totient trigsimp zeta""",
    ),
    **_qualified(
        "sympy",
        "matrix code: getattr of a printer's method names (MatrixBase.table) and of fixed operator names"
        " (call_highest_priority)",
        "eye zeros ones diag solve_linear_system",
    ),
    "sympy.dsolve": "globals()['ode_' + hint] picks one of dsolve's own solvers (fixed prefix); otherwise "
    + _SYMPY_BASIC,
    **_qualified(
        "typing",
        "typing's aliases forward attribute reads and writes to their origin class (a program's writes to a"
        " typing object are refused: Guards.write_attr); __reduce__'s globals() runs only through copy, which"
        " refuses typing objects; _caller reads its caller's __name__ (REVIEWED_FRAME_READERS)",
        "TypeVar Generic",
    ),
    "typing.NamedTuple": "_caller reads its caller's __name__ (restricted.REVIEWED_FRAME_READERS)",
    "dataclasses.dataclass": "guarded (the program's classes only): sets generated methods under fixed names; exec"
    " of code generated from checked field names (restricted.REVIEWED_EVALUATORS)",
    **_qualified(
        "dataclasses",
        "getattr of a dataclass's field names (the program's class-body names, checked) or of the module's"
        " constant _FIELDS; asdict/astuple are guarded (the copy review)",
        "field fields is_dataclass asdict astuple replace Field",
    ),
    "functools.cached_property": "writes instance.__dict__[attrname]: attrname is the program's class-body name"
    " (checked by the transformer), and a cached_property's attributes are not writable (Guards.write_attr)",
    "functools.lru_cache": "update_wrapper copies the fixed WRAPPER_ASSIGNMENTS names",
    "functools.total_ordering": "getattr/setattr of the fixed comparison method names",
    **_qualified(
        "collections",
        "__copy__ copies the object's own __dict__ into the copy",
        "ChainMap UserDict UserList",
    ),
    "collections.namedtuple": "reads its caller's __name__ and evaluates a fixed template over checked field names"
    " (restricted.REVIEWED_FRAME_READERS and REVIEWED_EVALUATORS)",
    **_qualified("copy", "handed out guarded: only reviewed kinds are copied (Guards._copy_refusal)", "copy deepcopy"),
    **_qualified(
        "numpy",
        "reads and writes its own __dict__ under fixed names (coefficients, domain, symbol)",
        """
        poly1d polynomial.Polynomial polynomial.Chebyshev polynomial.Legendre polynomial.Hermite
        polynomial.HermiteE polynomial.Laguerre""",
    ),
    "numpy.finfo": "__str__ formats a fixed list of its own attribute names",
    **{
        f"numpy.polynomial.{module}.{name}": "reads and writes its own __dict__ under fixed names"
        for module, name in (
            ("polynomial", "Polynomial"),
            ("chebyshev", "Chebyshev"),
            ("legendre", "Legendre"),
            ("hermite", "Hermite"),
            ("hermite_e", "HermiteE"),
            ("laguerre", "Laguerre"),
        )
    },
    **_qualified(
        "random",
        "__init_subclass__ reads a subclass's own __dict__ for the fixed names 'random' and 'getrandbits'",
        "Random SystemRandom",
    ),
    "string.Template": "__init_subclass__ reads a subclass's own __dict__ for its fixed pattern names",
    "re.RegexFlag": "Enum.__dir__ reads the flag's __dict__ for dir(), which programs may not call",
}
