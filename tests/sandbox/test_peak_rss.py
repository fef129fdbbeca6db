"""`peak_rss_mb`: a fork's is its peak resident set from wait4 (exact: the fork ran one program); a warm
runner's is None (the kernel keeps one peak for the runner's lifetime, which is many programs')."""

from __future__ import annotations

import pytest

from potrun.sandbox.api import Sandbox
from potrun.sandbox.wire.protocol import check_result

BIG = "x = bytearray(300 * 1024 * 1024)\nans = len(x)\n"  # 300 MiB, resident: bytearray zero-fills
SMALL = "ans = 6 * 7\n"


@pytest.fixture(scope="module")
def trusted() -> Sandbox:
    with Sandbox(workers=1, policy="trusted", timeout=10) as box:
        yield box


def test_a_fork_reports_its_own_peak(trusted: Sandbox) -> None:
    big, small = trusted.run(BIG), trusted.run(SMALL)
    assert (big.status.value, big.isolation, small.isolation) == ("ok", "fork", "warm")
    assert big.peak_rss_mb is not None and big.peak_rss_mb >= 300
    assert small.peak_rss_mb is None  # the warm tier: not measured per program


def test_a_small_fork_after_a_big_one_reports_its_own(trusted: Sandbox) -> None:
    """Each fork is a new process: the peak of the one before does not carry over."""
    trusted.run(BIG)
    small = trusted.run("import os\nans = os.getpid() > 0\n")  # the trusted fork tier (not provably pure)
    assert small.isolation == "fork" and small.peak_rss_mb is not None
    assert 0 < small.peak_rss_mb < 300


@pytest.mark.parametrize("source", ["while True:\n    pass\n", "import os\nos._exit(3)\n"])
def test_timeouts_and_crashes_of_forks_have_a_peak(source: str) -> None:
    with Sandbox(workers=1, policy="trusted", timeout=0.5, isolation="fork") as box:
        result = box.run(source)
    assert result.status.value in ("timeout", "crashed") and result.isolation == "fork"
    assert result.peak_rss_mb is not None and result.peak_rss_mb > 0


def test_a_warm_runner_never_reports_one() -> None:
    with Sandbox(workers=1, timeout=0.5) as box:
        results = [box.run(SMALL), box.run("while True:\n    pass\n")]
    assert [(r.isolation, r.peak_rss_mb) for r in results] == [("warm", None), ("warm", None)]


def test_a_runner_cannot_claim_a_peak() -> None:
    """The worker measures it from outside; what a runner writes in that field is dropped."""
    message = {"op": "result", "id": 1, "status": "ok", "value": 1, "peak_rss_mb": 0.001}
    assert "peak_rss_mb" not in check_result(message, request_id=1, from_runner=True, output_bytes=1000)
    assert check_result(message, request_id=1, from_runner=False, output_bytes=1000)["peak_rss_mb"] == 0.001
    for bad in (-1.0, float("nan"), "12", True):
        with pytest.raises(Exception, match="peak_rss_mb"):
            check_result({**message, "peak_rss_mb": bad}, request_id=1, from_runner=False, output_bytes=1000)
