"""Time limits: CPU time decides a timeout, the wall clock is a safety net (README, "Limits").

The CPU timer itself, in a forked child: SIGPROF at the limit (rusage at least the limit), nothing
once disarmed. Then over both policies and both isolation settings, with real runners:
- a busy loop and a long C call (`10**10**7`, ~6 s of CPU here) end with `timeout_kind` "cpu", and
  the runner's own CPU accounting shows at least the limit;
- a trusted `time.sleep` past the wall net ends with "wall"; so does a busy loop whose wall net is set
  below its CPU limit (the warm tier's wall kill);
- a trusted program that deletes its CPU timer, or ignores SIGPROF (and SIGXCPU), is still stopped
  (RLIMIT_CPU, the backstop); one that sends itself SIGPROF is `crashed`, not a timeout;
- a restricted program cannot wait without computing (stdin, numpy's file readers, sleep): each way
  is refused, or ends by CPU time, after one run;
- a program that needs ~0.4 of its CPU limit finishes ok under a CPU hog that the test starts;
- after a CPU kill the warm runner is replaced and the next program runs right, in the warm tier,
  its CPU time counted from its own start.

No test asserts a timing: only statuses, kinds, values, and CPU accounting.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import platform
import signal
import time
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import assert_pool_healthy, describe

from potrun import Limits, Sandbox, Status
from potrun.cli import main
from potrun.sandbox.inside.cputimer import CpuTimer, default_signals
from potrun.sandbox.wire.protocol import (
    REQUEST_HEADER,
    RunRequest,
    decode,
    encode_request,
    request_header,
    request_message,
)
from potrun.types import WALL_FLOOR_S, WALL_MULTIPLE, default_wall_timeout

CPU_S = 0.5  # the CPU limit of most tests: small, so that a kill costs little
TIERS = [("restricted", "warm"), ("restricted", "fork"), ("trusted", "warm"), ("trusted", "fork")]
BUSY = "x = 0\nwhile True:\n    x = x + 1\n"
C_CALL = "x = 10 ** 10 ** 7\nans = 1\n"  # one long C call: no Python-level check can interrupt it
# Loops `N` times: for the hog test, sized by a first run to use a set share of the CPU limit.
STEPS = "total = 0\nfor k in range({n}):\n    total = total + k % 7\nans = total\n"
SYS_TIMER_DELETE = {"x86_64": 226, "aarch64": 111}.get(platform.machine())


@pytest.fixture(scope="module", params=TIERS, ids=[f"{p}-{i}" for p, i in TIERS])
def tier_box(request: pytest.FixtureRequest) -> Iterator[Sandbox]:
    policy, isolation = request.param
    with Sandbox(policy=policy, isolation=isolation, workers=1, timeout=CPU_S, wall_timeout=60) as box:
        yield box


@pytest.fixture(scope="module")
def trusted_box() -> Iterator[Sandbox]:
    with Sandbox(policy="trusted", isolation="fork", workers=1, timeout=CPU_S, wall_timeout=60) as box:
        yield box


def _assert_cpu_timeout(result: Any, limit: float = CPU_S) -> None:
    assert result.status is Status.TIMEOUT and result.timeout_kind == "cpu", describe(result)
    assert result.cpu_s >= 0.95 * limit, describe(result)  # the kernel's account confirms the verdict


# ---------------------------------------------------------------------------------- the CPU limit


def _child_status(timer: CpuTimer, arm_s: float, disarm: bool, burn_s: float) -> tuple[int, float]:
    """Fork a child that arms `timer` (made here, as the worker makes a fork runner's), disarms it or
    not, then burns `burn_s` of CPU and exits 0; its wait status and the CPU time it used."""
    pid = os.fork()
    if pid == 0:
        try:
            default_signals()
            timer.arm(arm_s)
            if disarm:
                timer.disarm()
            started = time.process_time()
            while time.process_time() - started < burn_s:
                pass
        finally:
            os._exit(0)
    _, status, usage = os.wait4(pid, 0)
    return status, usage.ru_utime + usage.ru_stime


def test_the_cpu_timer_ends_a_process_at_its_cpu_limit_and_disarms() -> None:
    timer = CpuTimer()
    assert timer.precise  # Linux with glibc or musl: the exact clock, not the fallback
    status, used = _child_status(timer, 0.3, disarm=False, burn_s=5.0)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGPROF, status
    assert used >= 0.3
    status, used = _child_status(timer, 0.2, disarm=True, burn_s=0.4)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0 and used >= 0.4, status


@pytest.mark.parametrize("source", [BUSY, C_CALL], ids=["busy-loop", "c-call"])
def test_cpu_bound_program_times_out_by_cpu(tier_box: Sandbox, source: str) -> None:
    _assert_cpu_timeout(tier_box.run(source))


def test_warm_runner_is_replaced_after_a_cpu_kill_and_counts_each_program_alone(tier_box: Sandbox) -> None:
    # A first program that uses ~0.15 s of CPU (well inside the 0.5 s limit even if the machine's load
    # makes CPU time itself grow 3x between the probe and it), so that a count from the runner's start
    # rather than the killed program's would show: the killed program's cpu_s is its own.
    probe = tier_box.run(STEPS.format(n=300_000))
    assert probe.status is Status.OK and probe.cpu_s > 0, describe(probe)
    steps = STEPS.format(n=int(300_000 * 0.15 / probe.cpu_s))
    first, killed, after, again = tier_box.run_many([steps, BUSY, "ans = 6 * 7", BUSY.replace("x", "y")])
    assert first.status is Status.OK and first.cpu_s > 0.03, describe(first)
    _assert_cpu_timeout(killed)
    assert killed.cpu_s < CPU_S + first.cpu_s / 2, describe(killed)  # not counted from before it
    assert after.status is Status.OK and after.value == 42, describe(after)
    _assert_cpu_timeout(again)
    if tier_box.isolation.value == "warm":
        assert (first.isolation, killed.isolation, after.isolation) == ("warm", "warm", "warm")


def test_every_result_carries_both_times(tier_box: Sandbox) -> None:
    for result in tier_box.run_many(["ans = 1", BUSY, "raise ValueError('x')"]):
        data = result.to_json()
        assert isinstance(data["wall_s"], float) and isinstance(data["cpu_s"], float), data
    assert tier_box.run(BUSY).wall_s > 0


# ------------------------------------------------------------------------------- the wall-clock net


@pytest.mark.parametrize("isolation", ["warm", "fork"])
def test_sleep_past_the_wall_net_is_a_wall_timeout(isolation: str) -> None:
    with Sandbox(policy="trusted", isolation=isolation, workers=1, timeout=CPU_S, wall_timeout=1.0) as box:
        result = box.run("import time\ntime.sleep(60)\nans = 1")
    assert result.status is Status.TIMEOUT and result.timeout_kind == "wall", describe(result)
    assert result.wall_s >= 1.0 and result.cpu_s < CPU_S, describe(result)


@pytest.mark.parametrize(("policy", "isolation"), TIERS, ids=[f"{p}-{i}" for p, i in TIERS])
def test_a_wall_net_below_the_cpu_limit_binds_first(policy: str, isolation: str) -> None:
    with Sandbox(policy=policy, isolation=isolation, workers=1, timeout=60, wall_timeout=0.5) as box:
        result, after = box.run_many([BUSY, "ans = 6 * 7"])
    assert result.status is Status.TIMEOUT and result.timeout_kind == "wall", describe(result)
    assert result.isolation == isolation, describe(result)
    assert after.status is Status.OK and after.value == 42, describe(after)


# A program that computes an eighth of the time: to the wall-clock net, it looks as a program starved by
# a busy machine looks. Under a CPU limit of 0.4 s its default net is 2 s, where it has used ~0.27 s.
TRICKLE = (
    "import time\n"
    "while True:\n"
    "    end = time.process_time() + 0.012\n"
    "    while time.process_time() < end:\n"
    "        pass\n"
    "    time.sleep(0.078)\n"
)
TRICKLE_CPU_S = 0.4


@pytest.mark.parametrize("policy", ["trusted"])
def test_a_program_the_net_stopped_while_computing_is_run_again_before_its_timeout_is_reported(
    box: Sandbox,
) -> None:
    """The first run ends at the net short of its CPU limit, so the load may have decided: a second
    run, under twice the net, gives the verdict (here the CPU limit, reached in the wider net)."""
    result = box.run(TRICKLE, timeout=TRICKLE_CPU_S)
    assert result.status is Status.TIMEOUT and result.attempts == 2, describe(result)
    first_net = default_wall_timeout(TRICKLE_CPU_S)
    assert result.timeout_kind == "cpu" or result.wall_s >= 2 * first_net, describe(result)
    assert_pool_healthy(box)


@pytest.mark.parametrize("policy", ["trusted"])
def test_a_sleeper_stopped_by_the_net_is_reported_at_once(box: Sandbox) -> None:
    """Sleeping burns no CPU: nothing for the load to have decided, so no second run."""
    result = box.run("import time\ntime.sleep(60)\nans = 1", timeout=TRICKLE_CPU_S)
    assert (result.status, result.timeout_kind, result.attempts) == (Status.TIMEOUT, "wall", 1), describe(result)


# Ways a program could wait without computing, each of which would make the wall net (5x the CPU
# limit, and a confirming run under twice that) decide instead of the CPU limit. The restricted policy
# refuses every one.
WAITS = {
    "input": "ans = input()",
    "open-stdin": "ans = open(0).read()",
    "numpy-fromfile-stdin": "import numpy as np\nans = int(np.fromfile('/dev/stdin', dtype=np.uint8).size)",
    "numpy-loadtxt-stdin": "import numpy as np\nans = float(np.loadtxt('/dev/stdin').sum())",
    "numpy-genfromtxt-stdin": "import numpy as np\nans = float(np.genfromtxt('/dev/stdin').sum())",
    "numpy-load-stdin": "import numpy as np\nans = np.load('/dev/stdin')",
    "numpy-fromregex-stdin": "import numpy as np\nans = np.fromregex('/dev/stdin', r'(\\d+)', [('n', int)])",
    "numpy-datasource": "import numpy as np\nans = np.lib.npyio.DataSource().open('/proc/self/fd/0').read()",
    "time-sleep": "ans = __import__('time').sleep(60)",
}
CLOCK_WAIT = (
    "import datetime\nend = datetime.datetime.now() + datetime.timedelta(seconds=60)\n"
    "while datetime.datetime.now() < end:\n    pass\nans = 1"
)


@pytest.mark.parametrize("policy", ["restricted"])
@pytest.mark.parametrize("source", WAITS.values(), ids=WAITS.keys())
def test_a_restricted_program_cannot_wait_without_computing(box: Sandbox, source: str) -> None:
    result = box.run(source, timeout=CPU_S)
    assert (result.status, result.attempts) == (Status.POLICY_VIOLATION, 1), describe(result)


def test_a_restricted_program_waiting_on_the_clock_computes_and_ends_by_cpu(backend: str) -> None:
    """The one wait the policy allows, a loop on the clock, burns CPU: its CPU time ends it, long
    before a wall net (set here, so that no machine's load can decide it instead)."""
    with Sandbox(backend, policy="restricted", workers=1, timeout=CPU_S, wall_timeout=60) as box:
        result = box.run(CLOCK_WAIT)
    _assert_cpu_timeout(result)
    assert result.attempts == 1, describe(result)


# ------------------------------------------------------------------ trusted programs that dodge it

DODGES = {
    "ignores-sigprof": "import signal\nsignal.signal(signal.SIGPROF, signal.SIG_IGN)\n" + BUSY,
    "ignores-sigprof-and-sigxcpu": "import signal\nsignal.signal(signal.SIGPROF, signal.SIG_IGN)\n"
    "signal.signal(signal.SIGXCPU, signal.SIG_IGN)\n" + BUSY,
    "handles-sigprof": "import signal\nsignal.signal(signal.SIGPROF, lambda *a: None)\n" + BUSY,
    "cancels-itimer": "import signal\nsignal.setitimer(signal.ITIMER_PROF, 0)\n" + BUSY,
    # Deletes every POSIX timer of the process (the CPU timer among them), through the raw system call;
    # an error if it found none, so that a timeout below means "deleted, and still stopped".
    "deletes-cpu-timer": (
        "import ctypes, signal\n"
        f"deleted = sum(ctypes.pythonapi.syscall({SYS_TIMER_DELETE}, i) == 0 for i in range(64))\n"
        "signal.setitimer(signal.ITIMER_PROF, 0)\n"
        "if deleted == 0:\n    raise RuntimeError('no timer to delete')\n" + BUSY
    ),
}


@pytest.mark.parametrize("source", DODGES.values(), ids=DODGES.keys())
def test_trusted_program_that_dodges_the_timer_is_still_stopped(trusted_box: Sandbox, source: str) -> None:
    if "syscall" in source and SYS_TIMER_DELETE is None:
        pytest.skip(f"no timer_delete number for {platform.machine()}")
    # Stopped by RLIMIT_CPU (SIGKILL at the rlimit, soft = hard), a little past the exact limit.
    _assert_cpu_timeout(trusted_box.run(source))


def test_a_program_that_sends_itself_sigprof_earns_no_timeout(trusted_box: Sandbox) -> None:
    result = trusted_box.run("import os, signal\nos.kill(os.getpid(), signal.SIGPROF)\nans = 1")
    assert result.status is Status.CRASHED and result.error_type == "SIGPROF", describe(result)


# ------------------------------------------------------------------------------------- under load


def _busy() -> None:
    while True:
        pass


@pytest.fixture
def cpu_hog() -> Iterator[int]:
    """Twice as many busy processes as this process may use cores, killed at the end."""
    count = 2 * len(os.sched_getaffinity(0))
    hogs = [multiprocessing.get_context("fork").Process(target=_busy, daemon=True) for _ in range(count)]
    for hog in hogs:
        hog.start()
    try:
        yield count
    finally:
        for hog in hogs:
            hog.kill()
            hog.join()


@pytest.mark.parametrize(("policy", "isolation"), TIERS, ids=[f"{p}-{i}" for p, i in TIERS])
def test_a_program_within_its_cpu_limit_finishes_under_a_cpu_hog(
    policy: str, isolation: str, request: pytest.FixtureRequest
) -> None:
    limit = 1.0
    with Sandbox(policy=policy, isolation=isolation, workers=1, timeout=limit, wall_timeout=120) as box:
        # Sized before the hog starts by CPU time, which waiting for a core does not change: ~0.4 of the
        # limit. (Not more: the same work also costs more CPU time when every core is busy, the
        # shared caches and the host's other tenants slowing each instruction; on the 2-core VM, 1.3x
        # to 1.7x was measured, and a program sized to 0.6 of its limit was seen to reach it.)
        probe = box.run(STEPS.format(n=1_000_000))
        assert probe.status is Status.OK and probe.cpu_s > 0, describe(probe)
        steps = int(1_000_000 * 0.4 * limit / probe.cpu_s)
        request.getfixturevalue("cpu_hog")
        results = list(box.run_many([STEPS.format(n=steps) + f"# {copy}\n" for copy in range(3)]))
    expected = sum(k % 7 for k in range(steps))
    for result in results:
        assert result.status is Status.OK and result.value == expected, describe(result)
        assert result.timeout_kind is None


# ---------------------------------------------------------------------------- options and the wire


def test_the_wall_net_defaults_to_a_multiple_of_the_cpu_limit_with_a_floor() -> None:
    assert default_wall_timeout(5.0) == WALL_MULTIPLE * 5.0
    assert default_wall_timeout(0.01) == WALL_FLOOR_S
    assert Limits(timeout_s=5.0).wall_limit_s == WALL_MULTIPLE * 5.0
    assert Limits(timeout_s=5.0, wall_timeout_s=7.5).wall_limit_s == 7.5
    box = Sandbox(timeout=2.0, wall_timeout=3.0)
    assert (box.limits.timeout_s, box.limits.wall_limit_s) == (2.0, 3.0)
    assert box.companion().limits == box.limits


def test_the_header_carries_the_wall_net_and_the_body_both_limits() -> None:
    request = RunRequest(source="ans = 1", limits=Limits(timeout_s=2.0, wall_timeout_s=9.0))
    body = encode_request(request, 3)[4:]
    assert request_header(body).wall_s == 9.0
    again = request_message(body)
    assert (again.limits.timeout_s, again.limits.wall_limit_s) == (2.0, 9.0)
    assert decode(body[REQUEST_HEADER.size :])["limits"]["wall_timeout_s"] == 9.0


def test_cli_takes_wall_timeout_and_refuses_the_old_cpu_timeout(tmp_path: Any) -> None:
    corpus = tmp_path / "in.jsonl"
    corpus.write_text('{"id": 1, "code": "import time\\ntime.sleep(30)\\nans = 1", "answer": 1}\n')
    out = tmp_path / "out.jsonl"
    main(
        [
            "check",
            str(corpus),
            "--policy",
            "trusted",
            "--workers",
            "1",
            "--timeout",
            "0.5",
            "--wall-timeout",
            "1",
            "--quiet",
            "--out",
            str(out),
        ]
    )
    record = json.loads(out.read_text())
    assert (record["status"], record["timeout_kind"]) == ("timeout", "wall"), record
    with pytest.raises(SystemExit) as exit_info:
        main(["check", str(corpus), "--cpu-timeout", "1"])
    assert exit_info.value.code == 2
