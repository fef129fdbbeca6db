"""A whole `potrun check` as one library call: read the records (and the golds), score them on an
engine, write each result to `out` as it comes (a run that stops can be resumed), and return the
Summary that `--summary-json` writes.

    from potrun import CheckOptions, SandboxConfig, run_check

    summary = run_check("preds.jsonl", CheckOptions(), sandbox=SandboxConfig(workers=2), out="results.jsonl")
    summary.accuracy()                                  # pass@1; summary.to_json() is --summary-json
    run_check("preds.jsonl", out="results.jsonl", resume=True)  # after an interrupt: only what is not in out

`CheckRun` is the same run in two steps, for a caller that reports a stop itself (the command line):
opening it reads the inputs far enough to fail before anything starts; `run()` runs it; `kept` is how
many records `out` holds when the run stopped, those of the runs it resumes included.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from potrun.check.engines import ENGINES, LocalEngine, make_engine
from potrun.check.output import InputDigests, OutputWriter, resume_output, run_fingerprint
from potrun.check.pipeline import CheckOptions, RecordResult, load_golds
from potrun.check.progress import Progress
from potrun.check.records import MAX_LINE_BYTES, FirstRecord, Record, count_records, given_record, read_records
from potrun.check.runrecord import run_record
from potrun.check.summary import Summary
from potrun.sandbox.api import SandboxConfig
from potrun.types import BadRecord, UsageError

Records = str | Path | Iterable[Mapping[str, Any]]  # a file (- for standard input), or the records themselves


class CheckRun:
    """One resumable run, opened: the golds loaded, the records' file opened (a missing file or extra
    raises here), the engine made, not started."""

    def __init__(
        self,
        preds: Records,
        options: CheckOptions | None = None,
        *,
        gold: str | Path | None = None,
        sandbox: SandboxConfig | Mapping[str, Any] | None = None,
        out: str | Path | None = None,
        resume: bool = False,
        engine: str = ENGINES[0],
        cache: bool = True,
        ray_address: str | None = None,
        ray_actors: int | None = None,
        max_line_bytes: int = MAX_LINE_BYTES,
        command: Sequence[str] | None = None,
    ) -> None:
        if resume and not out:
            raise UsageError("resume needs out: the output file of the run to continue")
        self.preds = preds
        self.options = options if options is not None else CheckOptions()
        self.gold = gold
        self.out = out
        self.resume = resume
        self.command = list(command) if command is not None else None
        self.golds = load_golds(gold, self.options.id_fields, self.options.gold_fields) if gold else None
        self.first = FirstRecord(_items(preds, max_line_bytes))
        self.engine = make_engine(
            engine, _sandbox_config(sandbox), cache=cache, ray_address=ray_address, ray_actors=ray_actors
        )
        # Records in `out` once it is closed (those of the runs it resumes included); None before.
        self.kept: int | None = None

    def run(self, *, progress: bool = False) -> Summary:
        """Score every record not already in `out` (with `resume`); the Summary counts them all."""
        options, engine = self.options, self.engine
        summary = Summary(options.presets, settings=self._settings())
        results: list[RecordResult] = []  # kept for a benchmark's metrics, which need them all

        def add(result: RecordResult) -> None:
            summary.add(result)
            if options.benchmark is not None:
                results.append(result)

        records: Iterator[Any] = self.first
        digests = InputDigests(run_fingerprint(options, engine.config), options.id_fields, self.golds)
        done = 0
        if self.resume:  # the results already in `out` count, and their records are not run again
            assert self.out is not None
            records, done = resume_output(
                self.out, records, id_fields=options.id_fields, presets=options.presets, add=add, digests=digests
            )
        total = count_records(self.preds) if isinstance(self.preds, str | Path) else None  # None: counted as it comes
        writer = OutputWriter(self.out, append=self.resume, digests=digests) if self.out else None
        if writer is not None:
            records = digests.track(records)
        try:
            self._score(records, summary, add, writer, _left(total, done), progress)
        finally:  # interrupted too: every line in `out` is whole, and the count says how many
            if writer is not None:
                writer.close()
                self.kept = done + writer.written
        self._finish(summary, results)
        return summary

    def _score(
        self,
        records: Iterator[Any],
        summary: Summary,
        add: Callable[[RecordResult], None],
        writer: OutputWriter | None,
        total: int | None,
        progress: bool,
    ) -> None:
        engine = self.engine
        # Programs finished, in any order, beside records written in input order (a local pool only: Ray's
        # run on the actors).
        programs = (lambda: engine.sandbox.completed) if isinstance(engine, LocalEngine) else None
        with engine, Progress(total, enabled=progress, programs=programs) as bar:
            summary.started = time.perf_counter()  # the engine is ready: its start-up is not throughput
            for result in engine.results(records, self.options, self.golds):
                add(result)
                bar.advance()
                if writer is not None:
                    writer.write(result)
            summary.finish()  # nor is its shutdown (a local Ray instance takes a second or two)

    def _settings(self) -> dict[str, Any]:
        config = self.engine.config
        return {
            "policy": config.policy,
            "backend": config.backend,
            "isolation": str(config.tier),
            "workers": config.worker_count,
            "timeout_s": config.timeout,
            "wall_timeout_s": config.limits.wall_limit_s,
            "mode": self.options.mode,
        }

    def _finish(self, summary: Summary, results: list[RecordResult]) -> None:
        engine, benchmark = self.engine, self.options.benchmark
        summary.settings.update(engine.settings, cache_hits=engine.cache_hits)
        if benchmark is not None:
            summary.settings["benchmark"] = benchmark.name
            summary.metrics = benchmark.metrics(results)
        inputs = {"preds": self.preds} if isinstance(self.preds, str | Path) else {}
        summary.run = run_record(
            inputs={**inputs, **({"gold": self.gold} if self.gold else {})},
            check_options=self.options,
            sandbox_config=engine.config,
            command=self.command,
        )


def run_check(
    preds: Records,
    options: CheckOptions | None = None,
    *,
    gold: str | Path | None = None,
    sandbox: SandboxConfig | Mapping[str, Any] | None = None,
    out: str | Path | None = None,
    resume: bool = False,
    engine: str = ENGINES[0],
    cache: bool = True,
    ray_address: str | None = None,
    ray_actors: int | None = None,
    max_line_bytes: int = MAX_LINE_BYTES,
    progress: bool = False,
) -> Summary:
    """`potrun check` as a call: score `preds` (a file, or the records as mappings) under `options`,
    joined on `gold`'s ids when given, on `engine` ("local", or "ray" with `ray_address`/`ray_actors`)
    with a sandbox of `sandbox` (SandboxConfig, or its keywords); write a JSON line per record to `out`
    (with `resume`: continue the run that wrote it, its records not run again); return the Summary.

    An interrupt (KeyboardInterrupt) or a sandbox that cannot start again (SandboxUnavailable) leaves
    `out` with whole lines only: the same call with `resume=True` continues it."""
    run = CheckRun(
        preds,
        options,
        gold=gold,
        sandbox=sandbox,
        out=out,
        resume=resume,
        engine=engine,
        cache=cache,
        ray_address=ray_address,
        ray_actors=ray_actors,
        max_line_bytes=max_line_bytes,
    )
    return run.run(progress=progress)


def _items(preds: Records, max_line_bytes: int) -> Iterator[Record | BadRecord]:
    if isinstance(preds, str | Path):
        return read_records(preds, max_line_bytes=max_line_bytes)
    return (given_record(item, number) for number, item in enumerate(preds, start=1))


def _sandbox_config(sandbox: SandboxConfig | Mapping[str, Any] | None) -> SandboxConfig:
    """The engine's SandboxConfig (plain data: Ray ships it to its nodes)."""
    if isinstance(sandbox, SandboxConfig):
        return sandbox
    return SandboxConfig.from_options(dict(sandbox or {}), "run_check's sandbox")


def _left(total: int | None, done: int) -> int | None:
    return None if total is None else total - done


__all__ = ["CheckRun", "Records", "run_check"]
