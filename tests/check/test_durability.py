"""Durability of `potrun check` (issue 8): output appended as records complete, `--resume` after SIGINT
or SIGKILL, a worker killed from outside during a run, and the dedup cache.

The runs that get interrupted are real `python -m potrun.cli check` subprocesses; what they leave
(the output file, the process table) is looked at from outside. Each must end identical to an
uninterrupted run, ignoring the timings (wall_s, cpu_s; elapsed_s, programs_per_s, slowest and
cache_hits in the summary describe the invocation, not the results).
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from conftest import process_table

from potrun import ExecResult, Status
from potrun.check.cache import CachedSandbox, ResultCache, request_key
from potrun.cli import main
from potrun.sandbox.wire.protocol import RunRequest
from potrun.types import Limits

RECORDS = 400
WORKER_MODULE = "potrun.sandbox.inside.worker"
RUN_STATISTICS = ("elapsed_s", "programs_per_s", "slowest", "cache_hits", "run")  # "run": its times and command
BASE_ARGS = ["--workers", "2", "--timeout", "5", "--quiet"]


def slow_program(k: int) -> str:
    """About 10 ms of work, a distinct program (and value) per record so that the cache runs each."""
    return f"def solution():\n    s = 0\n    for i in range(100000):\n        s += i % 7\n    return s + {k}"


def slow_value(k: int) -> int:
    return sum(i % 7 for i in range(100000)) + k


def build_input(path: Path, count: int = RECORDS) -> Path:
    """`count` slow records, with every kind of outcome mixed in: wrong, error, policy violation,
    syntax error, no program (skipped), a bad line, and a record with several samples."""
    lines = []
    for k in range(count):
        record: dict[str, Any] = {"id": f"r{k}", "output": slow_program(k), "answer": slow_value(k)}
        if k % 50 == 7:
            record["answer"] = -1  # wrong
        elif k % 50 == 13:
            record["output"] = "ans = 1 / 0"
        elif k % 50 == 19:
            record["output"] = "import os\nans = os.getpid()"
        elif k % 50 == 23:
            record["output"] = "def solution(:\n    return 1"
        elif k % 50 == 29:
            record = {"id": f"r{k}", "question": "no program field"}
        elif k % 50 == 31:
            record["output"] = [slow_program(k), "ans = 2", slow_program(k)]
        lines.append(json.dumps(record))
        if k % 100 == 41:
            lines.append("{not json")
    path.write_text("\n".join(lines) + "\n")
    return path


def results_of(path: Path) -> list[dict[str, Any]]:
    """The output lines without their timings."""
    results = []
    for line in path.read_text().splitlines():
        data = json.loads(line)
        data.pop("wall_s", None)
        data.pop("cpu_s", None)
        results.append(data)
    return results


def summary_of(path: Path) -> dict[str, Any]:
    data = json.loads(path.read_text())
    return {key: value for key, value in data.items() if key not in RUN_STATISTICS}


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The input, and an uninterrupted run of it."""
    root = tmp_path_factory.mktemp("reference")
    preds = build_input(root / "preds.jsonl")
    out, summary = root / "out.jsonl", root / "summary.json"
    assert main(["check", str(preds), "--out", str(out), "--summary-json", str(summary), *BASE_ARGS]) == 0
    return {"preds": preds, "results": results_of(out), "summary": summary_of(summary)}


def test_reference_run_is_complete(reference: dict[str, Any]) -> None:
    results, summary = reference["results"], reference["summary"]
    lines = RECORDS + RECORDS // 100
    assert [r["line"] for r in results] == list(range(1, lines + 1))  # input order, one per line
    assert summary["total"] == lines and summary["bad_record"] == RECORDS // 100
    statuses = summary["status_counts"]
    assert statuses["ok"] > 300 and statuses["error"] == 8 and statuses["policy_violation"] == 8
    assert statuses["syntax_error"] == 8 and statuses["skipped"] == 8
    assert summary["correct"] == statuses["ok"] - 8  # the 8 wrong golds


# ----------------------------------------------------------------------------- interrupted runs


def start_check(preds: Path, out: Path, summary: Path) -> subprocess.Popen[str]:
    command = [
        sys.executable,
        "-m",
        "potrun.cli",
        "check",
        str(preds),
        "--out",
        str(out),
        "--summary-json",
        str(summary),
        *BASE_ARGS,
    ]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for_lines(out: Path, count: int, process: subprocess.Popen[str], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if out.exists() and out.read_bytes().count(b"\n") >= count:
            return
        if process.poll() is not None:
            pytest.fail(f"the run ended before {count} results: {process.communicate()[1]}")
        time.sleep(0.02)
    process.kill()
    pytest.fail(f"no {count} results in {out} after {timeout} s")


def descendants(pid: int) -> set[int]:
    table = process_table()
    found, stack = set(), [pid]
    while stack:
        parent = stack.pop()
        for proc in table.values():
            if proc.ppid == parent and proc.pid not in found:
                found.add(proc.pid)
                stack.append(proc.pid)
    return found


def alive(pids: set[int]) -> list[str]:
    table = process_table()
    return [table[pid].cmdline for pid in pids if pid in table and table[pid].alive]


def wait_gone(pids: set[int], timeout: float = 10.0) -> list[str]:
    deadline = time.monotonic() + timeout
    while (left := alive(pids)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


def run_resume_command(command: str, cwd: Path) -> int:
    """Run the command potrun printed (its `potrun` is this interpreter's `python -m potrun.cli`)."""
    words = shlex.split(command)
    assert words[0] == "potrun" and "--resume" in words
    return subprocess.run([sys.executable, "-m", "potrun.cli", *words[1:]], cwd=cwd, timeout=120).returncode


def assert_complete_lines(out: Path) -> None:
    text = out.read_bytes()
    assert text.endswith(b"\n"), "an interrupted run left a torn line"
    for line in text.splitlines():
        json.loads(line)


def test_sigint_stops_cleanly_and_resumes(reference: dict[str, Any], tmp_path: Path) -> None:
    out, summary = tmp_path / "out.jsonl", tmp_path / "summary.json"
    process = start_check(reference["preds"], out, summary)
    wait_for_lines(out, 60, process)
    machinery = descendants(process.pid)
    assert any(WORKER_MODULE in cmd for cmd in alive(machinery))
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=30)
    assert process.returncode == 130, stderr
    assert wait_gone(machinery) == [], "workers left after Ctrl-C"
    assert_complete_lines(out)
    done = results_of(out)
    assert 60 <= len(done) < len(reference["results"]), "the run was not interrupted midway"
    assert done == reference["results"][: len(done)]
    command = stderr.strip().splitlines()[-1].strip()  # "... Resume with:", then the command
    assert f"{len(done)} records are in {out}" in stderr
    assert run_resume_command(command, Path.cwd()) == 0
    assert results_of(out) == reference["results"]
    assert summary_of(summary) == reference["summary"]


def test_sigkill_then_resume(reference: dict[str, Any], tmp_path: Path) -> None:
    out, summary = tmp_path / "out.jsonl", tmp_path / "summary.json"
    process = start_check(reference["preds"], out, summary)
    wait_for_lines(out, 60, process)
    machinery = descendants(process.pid)
    process.kill()
    process.communicate(timeout=30)
    assert wait_gone(machinery) == [], "workers outlived a killed potrun"
    done = len(out.read_bytes().splitlines())
    assert done < len(reference["results"])
    args = ["check", str(reference["preds"]), "--out", str(out), "--summary-json", str(summary), *BASE_ARGS]
    assert main([*args, "--resume"]) == 0
    assert results_of(out) == reference["results"]
    assert summary_of(summary) == reference["summary"]


@pytest.mark.parametrize("tail", [b'{"line": 17, "id": "r1', b"{}", b'{"line": 1'], ids=["torn", "not-result", "short"])
def test_torn_last_line_is_redone(reference: dict[str, Any], tmp_path: Path, tail: bytes) -> None:
    """A killed write leaves part of a line: it is cut off and its record runs again."""
    out, summary = tmp_path / "out.jsonl", tmp_path / "summary.json"
    full = "".join(json.dumps(r) + "\n" for r in reference["results"][:40]).encode()
    out.write_bytes(full + tail)
    args = ["check", str(reference["preds"]), "--out", str(out), "--summary-json", str(summary), *BASE_ARGS]
    assert main([*args, "--resume"]) == 0
    assert results_of(out) == reference["results"]
    assert summary_of(summary) == reference["summary"]


def test_resume_of_a_complete_run_runs_nothing(reference: dict[str, Any], tmp_path: Path) -> None:
    out, summary = tmp_path / "out.jsonl", tmp_path / "summary.json"
    args = ["check", str(reference["preds"]), "--out", str(out), "--summary-json", str(summary), *BASE_ARGS]
    out.write_text("".join(json.dumps(r) + "\n" for r in reference["results"]))
    before = out.read_bytes()
    assert main([*args, "--resume"]) == 0
    assert out.read_bytes() == before
    assert summary_of(summary) == reference["summary"]


def test_resume_without_output_starts_from_scratch(tmp_path: Path) -> None:
    preds = build_input(tmp_path / "preds.jsonl", 20)
    out = tmp_path / "out.jsonl"
    assert main(["check", str(preds), "--out", str(out), "--resume", *BASE_ARGS]) == 0
    assert len(out.read_text().splitlines()) == 20


@pytest.mark.parametrize("case", ["other-input", "corrupt-middle", "longer-than-input", "no-out"])
def test_resume_refuses_what_it_cannot_continue(reference: dict[str, Any], tmp_path: Path, case: str) -> None:
    out = tmp_path / "out.jsonl"
    lines = [json.dumps(r) for r in reference["results"][:30]]
    preds = reference["preds"]
    if case == "other-input":
        preds = tmp_path / "other.jsonl"
        preds.write_text("".join(json.dumps({"id": f"x{k}", "output": "ans = 1"}) + "\n" for k in range(50)))
    elif case == "corrupt-middle":
        lines[10] = lines[10][:20]
    elif case == "longer-than-input":
        preds = build_input(tmp_path / "short.jsonl", 10)
    out.write_text("\n".join(lines) + "\n")
    before = out.read_bytes()
    args = ["check", str(preds), *BASE_ARGS, "--resume"] + ([] if case == "no-out" else ["--out", str(out)])
    assert main(args) == 2
    assert out.read_bytes() == before  # a refused resume touches nothing


# ---------------------------------------------------------------------------- a worker killed


def test_worker_killed_during_run(tmp_path: Path) -> None:
    """SIGKILL one sandbox worker from outside while it has programs in flight: they are retried once on
    its replacement; every record is present exactly once, with its right status and value."""
    count = 300
    preds = tmp_path / "preds.jsonl"
    preds.write_text(
        "".join(json.dumps({"id": k, "output": slow_program(k), "answer": slow_value(k)}) + "\n" for k in range(count))
    )
    out, summary = tmp_path / "out.jsonl", tmp_path / "summary.json"
    process = start_check(preds, out, summary)
    wait_for_lines(out, 40, process)
    table = process_table()
    workers = [p.pid for p in table.values() if p.ppid == process.pid and WORKER_MODULE in p.cmdline]
    assert len(workers) == 2, [table[p].cmdline for p in descendants(process.pid)]
    os.kill(workers[0], signal.SIGKILL)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 0, stderr
    results = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(results) > 40
    assert [r["id"] for r in results] == list(range(count))  # all present, none twice, in order
    assert all(r["status"] == "ok" and r["value"] == slow_value(r["id"]) and r["correct"] for r in results), [
        r for r in results if r["status"] != "ok"
    ][:3]
    assert json.loads(summary.read_text())["status_counts"] == {"ok": count}


# ----------------------------------------------------------------------------------------- the cache


def test_cache_serves_repeated_programs(tmp_path: Path) -> None:
    """Rollouts repeat programs: each distinct program runs once, the rest come from the cache, and the
    results are those of a run without it."""
    programs = ["ans = 6 * 7", "ans = 1 / 0", "def solution():\n    return 2 ** 10", "import os\nans = 1"]
    preds = tmp_path / "preds.jsonl"
    records = [{"id": k, "output": programs[k % 4], "answer": 42} for k in range(200)]
    records[5]["output"] = [programs[0], programs[0], programs[2]]  # samples of one record too
    preds.write_text("".join(json.dumps(r) + "\n" for r in records))
    runs = {}
    for name, extra in (("cached", []), ("uncached", ["--no-cache"])):
        out, summary = tmp_path / f"{name}.jsonl", tmp_path / f"{name}.json"
        assert main(["check", str(preds), "--out", str(out), "--summary-json", str(summary), *BASE_ARGS, *extra]) == 0
        runs[name] = (results_of(out), json.loads(summary.read_text()))
    assert runs["cached"][0] == runs["uncached"][0]
    assert runs["cached"][1]["cache_hits"] == 202 - 4  # 202 programs, 4 distinct
    assert runs["uncached"][1]["cache_hits"] == 0


class CountingSandbox:
    """A fake sandbox: answers each request with its source's length, reading every request before the
    first answer (as the real pool reads far ahead), and counts what it ran."""

    def __init__(self) -> None:
        self.ran: list[str] = []

    def request(
        self, source: str, entry: str | None = None, *, capture: bool = False, timeout: float | None = None
    ) -> RunRequest:
        assert timeout is None  # the pipeline asks a per-program limit only for a benchmark's programs
        return RunRequest(source=source, entry=entry or "auto", capture=capture)

    def run_requests(self, requests: Any) -> Iterator[ExecResult | None]:
        batch = list(requests)
        for message in batch:
            if message is None:
                yield None
                continue
            self.ran.append(message.source)
            status = Status.SANDBOX_ERROR if "lost" in message.source else Status.OK
            yield ExecResult(status, value=len(message.source), value_type="int")


def test_cache_dedupes_in_flight_and_stays_bounded() -> None:
    fake = CountingSandbox()
    box = CachedSandbox(fake, ResultCache(max_entries=2))
    sources = ["a", "bb", "a", "ccc", "a", "bb", "ddd"]
    messages = [box.request(s) for s in sources[:3]] + [None] + [box.request(s) for s in sources[3:]]
    results = list(box.run_requests(messages))
    assert [r.value if r is not None else None for r in results] == [1, 2, 1, None, 3, 1, 2, 3]
    assert fake.ran == ["a", "bb", "ccc", "ddd"]  # every duplicate was in flight: none ran twice
    assert box.hits == 3 and len(box.cache) == 2  # LRU: the two most recent results
    assert [r.value for r in box.run_requests([box.request("ddd"), box.request("a")])] == [3, 1]
    assert fake.ran[-1] == "a" and box.hits == 4  # "ddd" was cached, "a" had been evicted


def test_cache_key_covers_the_whole_request() -> None:
    base = RunRequest(source="ans = 1", policy="restricted", entry="auto", limits=Limits(timeout_s=5))
    variants = [
        replace(base, policy="trusted"),
        replace(base, entry="ans"),
        replace(base, limits=Limits(timeout_s=1)),
        replace(base, capture=True),
        replace(base, source="ans = 1 "),
        replace(base, isolation="fork"),
    ]
    keys = {request_key(v) for v in variants} | {request_key(base)}
    assert len(keys) == len(variants) + 1
    assert request_key(replace(base, id=7)) == request_key(base)  # the pool's index is not the program


def test_machinery_failures_are_not_cached() -> None:
    fake = CountingSandbox()
    box = CachedSandbox(fake)
    list(box.run_requests([box.request("lost worker")]))
    list(box.run_requests([box.request("lost worker")]))
    assert fake.ran == ["lost worker", "lost worker"] and box.hits == 0
