"""`--engine ray` on a local Ray instance (the `ray` extra; CI installs it): the same results file as
the local engine, the same resume, and no record lost when a Ray actor dies mid-run.

One local instance serves the module (started through `RayEngine.start`, as `potrun check --engine ray`
does without an address; the runs inside reuse it). Small shards, so that a few hundred records make
many shards over two actors.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_durability import RUN_STATISTICS, build_input, results_of, slow_program, slow_value

from potrun.check import engines
from potrun.check.pipeline import CheckOptions
from potrun.check.records import read_records
from potrun.cli import main

ray = pytest.importorskip("ray", reason="the ray extra is not installed (pip install 'potrun[ray]')")
pytestmark = pytest.mark.ray

ENGINE_SETTINGS = ("engine", "ray_address", "ray_actors")
ARGS = ["--workers", "1", "--timeout", "5", "--quiet"]


@pytest.fixture(scope="module")
def local_ray() -> Iterator[None]:
    engine = engines.RayEngine({"workers": 1}, num_cpus=4)  # logical CPUs: one per actor (1 here, 2 in a test)
    engine.start()
    try:
        yield
    finally:
        engine.close()
    assert not ray.is_initialized()


@pytest.fixture(autouse=True)
def small_shards(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engines, "SHARD_RECORDS", 16)


def summary_of(path: Path) -> dict[str, Any]:
    data = json.loads(path.read_text())
    return {k: v for k, v in data.items() if k not in RUN_STATISTICS + ENGINE_SETTINGS}


def run_check(preds: Path, out: Path, *extra: str) -> dict[str, Any]:
    summary = out.with_suffix(".summary.json")
    assert main(["check", str(preds), "--out", str(out), "--summary-json", str(summary), *ARGS, *extra]) == 0
    return json.loads(summary.read_text())


def test_ray_engine_gives_the_local_results(local_ray: None, tmp_path: Path) -> None:
    preds = build_input(tmp_path / "preds.jsonl", 200)
    local = run_check(preds, tmp_path / "local.jsonl")
    remote = run_check(preds, tmp_path / "ray.jsonl", "--engine", "ray", "--ray-actors", "2")
    assert remote["engine"] == "ray" and remote["ray_actors"] == 2 and local["engine"] == "local"
    assert results_of(tmp_path / "ray.jsonl") == results_of(tmp_path / "local.jsonl")
    assert summary_of(tmp_path / "ray.summary.json") == summary_of(tmp_path / "local.summary.json")
    # the resume is the engine's too: cut the file (a torn last line included), continue on Ray
    out = tmp_path / "ray.jsonl"
    lines = out.read_bytes().splitlines(keepends=True)
    out.write_bytes(b"".join(lines[:70]) + lines[70][:25])
    run_check(preds, out, "--engine", "ray", "--ray-actors", "2", "--resume")
    assert results_of(out) == results_of(tmp_path / "local.jsonl")
    assert summary_of(tmp_path / "ray.summary.json") == summary_of(tmp_path / "local.summary.json")


def test_ray_actor_killed_mid_run(local_ray: None, tmp_path: Path) -> None:
    """Ray restarts a dead actor (a fresh sandbox pool) and runs its unfinished shards again: every
    record is there once, with its right value."""
    count = 240
    preds = tmp_path / "preds.jsonl"
    preds.write_text(
        "".join(json.dumps({"id": k, "output": slow_program(k), "answer": slow_value(k)}) + "\n" for k in range(count))
    )
    engine = engines.RayEngine({"workers": 1}, actors=1)
    with engine:
        results = engine.results(read_records(preds), CheckOptions())
        seen = [next(results)]
        (actor,) = engine._handles
        before = ray.get(actor.state.remote())
        seen += [next(results) for _ in range(40)]  # shards keep being submitted
        os.kill(before["pid"], signal.SIGKILL)
        seen += list(results)
        after = ray.get(actor.state.remote())
    assert after["pid"] != before["pid"]
    assert [r.id for r in seen] == list(range(count))
    assert all(r.status == "ok" and r.value == slow_value(r.id) and r.correct for r in seen)


def test_ray_address_nothing_listens_on(tmp_path: Path) -> None:
    """An address where no cluster answers is a clear error at once (exit 2), not minutes of retries."""
    preds = build_input(tmp_path / "preds.jsonl", 5)
    with pytest.raises(engines.SandboxUnavailable, match=r"no Ray cluster answers at 127\.0\.0\.1:1"):
        engines.probe_address("127.0.0.1:1")
    code = main(["check", str(preds), "--engine", "ray", "--ray-address", "ray://127.0.0.1:1", *ARGS])
    assert code == 2


def test_ray_options_need_the_ray_engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    preds = build_input(tmp_path / "preds.jsonl", 5)
    assert main(["check", str(preds), "--ray-address", "auto", *ARGS]) == 2
    monkeypatch.setitem(__import__("sys").modules, "ray", None)  # as if the extra were not installed
    with pytest.raises(engines.UsageError, match="pip install 'potrun\\[ray\\]'"):
        engines.make_engine("ray", {"workers": 1})
