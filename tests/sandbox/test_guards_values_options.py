"""Sandbox units: the restricted import guard, value conversion limits, frames, options.

Fast tests of pieces the hostile suite (test_hostile.py) exercises end to end, plus regressions:
- C code in allowlisted modules imports its helpers lazily through the program frame's `__import__`
  (`ndarray.sum` imports numpy._core._methods, `datetime.strptime` imports _strptime): those imports
  must pass while the program's own import statements stay on the allowlist;
- an integer too long to write in decimal is the program's error (as `print(10 ** 100000)` is), not
  an output limit.
"""

from __future__ import annotations

import os
import sys

import pytest
from conftest import describe

from potrun import Isolation, Sandbox, Status, UsageError
from potrun.policies import get_policy
from potrun.policies.restricted import Guards, PolicyViolation
from potrun.sandbox.wire import values
from potrun.sandbox.wire.protocol import MAX_FRAME, FrameReader, ProtocolError, decode, encode

# ------------------------------------------------------------------------------- the import guard

# (id, program, status, value): lazy imports made by allowlisted C code pass, import statements do not.
IMPORTS = [
    ("ndarray-sum", "import numpy as np\nans = np.array([1, 2, 3]).sum()", "ok", 6),
    ("ndarray-mean", "import numpy as np\nans = float(np.arange(5).mean())", "ok", 2.0),
    ("strptime", "import datetime\nans = datetime.datetime.strptime('2020-01-02', '%Y-%m-%d').day", "ok", 2),
    ("date-today", "import datetime\nans = datetime.date.today().year > 2000", "ok", True),
    ("import-time", "import time\nans = 1", "policy_violation", None),
    ("import-time-in-function", "def solution():\n    import time\n    return 1", "policy_violation", None),
    ("import-os-from-numpy", "from numpy import ctypeslib\nans = 1", "policy_violation", None),
    ("import-numpy-ctypeslib", "import numpy.ctypeslib\nans = 1", "policy_violation", None),
    ("import-subprocess", "import subprocess\nans = 1", "policy_violation", None),
    # Modules that a worker imports only on demand, or that numpy makes on first use: what they hold is
    # unknown when the program is checked, so it takes the guarded path, which refuses what they reach.
    (
        "on-demand-module-reaches-warnings",
        "import numpy as np\nans = str(np.polynomial.polyutils.warnings)",
        "policy_violation",
        None,
    ),
    ("on-demand-module-reaches-mtrand", "import numpy as np\nans = str(np.random.mtrand)", "policy_violation", None),
    ("lazy-numpy-submodule", "import numpy as np\nans = str(np.ma)", "policy_violation", None),
    ("sympy-submodule", "import sympy\nans = str(sympy.plotting)", "policy_violation", None),
    (
        "on-demand-module-works",
        "import numpy as np\nans = float(np.polynomial.polynomial.polyval(2, [1, 2, 3]))",
        "ok",
        17.0,
    ),
    (
        "numpy-random-works",
        "import numpy as np\nans = int(np.random.default_rng(1).integers(10))",
        "ok",
        int(__import__("numpy").random.default_rng(1).integers(10)),
    ),
]


@pytest.mark.parametrize("policy", ["restricted"])
@pytest.mark.parametrize(("source", "status", "value"), [pytest.param(*row[1:], id=row[0]) for row in IMPORTS])
def test_restricted_imports(box: Sandbox, source: str, status: str, value: object) -> None:
    result = box.run(source)
    assert result.status.value == status, describe(result)
    if status == "ok":
        assert result.value == value and type(result.value) is type(value), describe(result)


@pytest.fixture
def guards() -> Guards:
    return Guards(get_policy("restricted"))


@pytest.mark.parametrize("name", ["numpy._core._methods", "_strptime", "time", "numpy.linalg"])
def test_implicit_import_of_library_helpers_passes(guards: Guards, name: str) -> None:
    module = guards.import_(name)  # called from here, not from a program's import statement
    assert module.__name__ == name.partition(".")[0] and name in sys.modules
    assert not guards.violations


@pytest.mark.parametrize("name", ["os", "subprocess", "ctypes", "_posixsubprocess", "sys"])
def test_implicit_import_of_anything_else_is_refused(guards: Guards, name: str) -> None:
    with pytest.raises(PolicyViolation):
        guards.import_(name)
    assert guards.violations and guards.violations[0].rule == "forbidden_import"


# ----------------------------------------------------------------------------------------- values


def test_integer_too_long_to_print_is_a_value_error() -> None:
    assert values.to_plain(10**3000) == 10**3000
    with pytest.raises(ValueError):
        values.to_plain(10**5000)
    with pytest.raises(ValueError):
        values.to_plain([1, 10**5000])


@pytest.mark.parametrize("policy", ["restricted", "trusted"])
def test_integer_too_long_is_the_program_error(box: Sandbox) -> None:
    result = box.run("def solution():\n    return 10 ** 100000")
    assert result.status is Status.ERROR and result.error_type == "ValueError", describe(result)


def test_oversized_answers_stay_output_limits() -> None:
    with pytest.raises(values.TooLarge):
        values.to_plain(list(range(values.MAX_ITEMS + 1)))


# ----------------------------------------------------------------------------------------- frames


def test_frames_survive_any_split() -> None:
    data = encode({"op": "run", "id": 1}) + encode({"op": "exit"})
    for cut in range(len(data) + 1):
        reader = FrameReader()
        bodies = reader.feed(data[:cut]) + reader.feed(data[cut:])
        assert [decode(body)["op"] for body in bodies] == ["run", "exit"]
        assert reader.pending == 0


def test_an_oversized_frame_is_a_protocol_error() -> None:
    with pytest.raises(ProtocolError):
        FrameReader().feed((MAX_FRAME + 1).to_bytes(4, "big"))
    with pytest.raises(ProtocolError):
        decode(b"[1, 2]")


# ---------------------------------------------------------------------------------------- options


@pytest.mark.parametrize(
    "options",
    [
        {"policy": "trusted", "isolation": "lukewarm"},
        {"timeout": 0},
        {"wall_timeout": 0},
        {"memory_mb": -1},
    ],
    ids=["unknown-isolation", "zero-timeout", "zero-wall-timeout", "negative-memory"],
)
def test_bad_options_are_usage_errors(options: dict[str, object]) -> None:
    with pytest.raises(UsageError):
        Sandbox(**options)  # type: ignore[arg-type]


def test_unknown_backend_is_a_usage_error() -> None:
    with pytest.raises(UsageError):
        Sandbox("vm")


@pytest.mark.parametrize("policy", ["restricted"])
def test_a_missing_request_keeps_its_place(box: Sandbox) -> None:
    requests = [box.request("ans = 1"), None, box.request("ans = 3")]
    results = list(box.run_requests(requests))
    assert results[1] is None
    assert [r.value for r in (results[0], results[2])] == [1, 3]  # type: ignore[union-attr]


# ----------------------------------------------------------------------------- modules on demand

# (spelled so that the source does not say "random": a program that does gets numpy.random seeded)
HOLDS_NUMPY_FFT = "import sys\nans = 'numpy.' + 'ff' + 't' in sys.modules"
USES_NUMPY_FFT = "import numpy as np\nans = float(np.fft.fft([1.0, 2.0, 7.0]).real[0])"


def test_a_worker_imports_on_demand_the_modules_its_programs_used() -> None:
    """numpy.fft is not preloaded (every module a worker holds makes each fork dearer); once a
    forked program has imported it, the worker imports it too, and later forks start with it."""
    expected = 10.0
    with Sandbox(policy="trusted", isolation="fork", workers=1, timeout=10) as box:
        before, used, after, again = box.run_many([HOLDS_NUMPY_FFT, USES_NUMPY_FFT, HOLDS_NUMPY_FFT, USES_NUMPY_FFT])
    assert before.value is False, describe(before)
    assert used.status is Status.OK and used.value == expected, describe(used)
    assert after.value is True, describe(after)
    assert again.value == expected, describe(again)


def test_fork_isolation_gets_two_workers_per_core() -> None:
    from potrun.sandbox.parent.pool import default_workers

    assert (
        Sandbox(policy="trusted", isolation="fork").workers == 2 * default_workers() == default_workers(Isolation.FORK)
    )
    assert Sandbox(policy="restricted").workers == Sandbox(policy="trusted").workers == default_workers()


def test_process_workers_take_the_cpus_in_turn() -> None:
    """Each worker, with the runners it forks, is kept on one CPU (a fork's TLB flush then stays local);
    the next worker on the next CPU."""
    allowed = sorted(os.sched_getaffinity(0))
    with Sandbox(policy="trusted", isolation="fork", workers=2, timeout=10) as box:
        assert box._pool is not None
        pinned = [sorted(os.sched_getaffinity(slot.conn.process.pid)) for slot in box._pool.slots]
        forked = box.run("import os\nans = sorted(os.sched_getaffinity(0))")
    assert all(len(cpus) == 1 and cpus[0] in allowed for cpus in pinned), pinned
    if len(allowed) >= 2:
        assert pinned[0] != pinned[1]
    assert forked.value in pinned, describe(forked)


NAMES_NO_MODULE = "import sys\nans = 'num' + 'py' in sys.modules"
NAMES_NUMPY = "import sys\nans = 'numpy' in sys.modules"


def test_numpy_is_imported_by_the_worker_before_the_first_program_that_names_it() -> None:
    """A worker holds numpy only once its programs need it (every module it holds makes each fork
    dearer), and then imports it itself, outside the program's limits: the program finds it imported."""
    with Sandbox(policy="trusted", isolation="fork", workers=1, timeout=10) as box:
        before, named, after = box.run_many([NAMES_NO_MODULE, NAMES_NUMPY, NAMES_NO_MODULE])
    assert before.value is False, describe(before)
    assert named.value is True, describe(named)
    assert after.value is True, describe(after)


def test_warm_workers_are_not_pinned() -> None:
    """A warm worker and its runner work at once: they keep every CPU."""
    allowed = os.sched_getaffinity(0)
    with Sandbox(policy="restricted", workers=2, timeout=10) as box:
        assert box._pool is not None
        assert all(os.sched_getaffinity(slot.conn.process.pid) == allowed for slot in box._pool.slots)
