"""The progress of a run as its records are written: a bar on a terminal, a line every few seconds
otherwise."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any, TextIO


class Progress:
    """A rich progress bar on a terminal; a plain line every few seconds otherwise.

    It counts records as they are written (`advance`, in input order) and, when `programs` is given
    (a callable such as `lambda: sandbox.completed`), the programs finished in any order: read when the
    bar redraws (a few times a second, from rich's refresh thread), so that it moves while the record
    due next waits for a slow program."""

    def __init__(
        self,
        total: int | None,
        stream: TextIO | None = None,
        enabled: bool = True,
        programs: Callable[[], int] | None = None,
    ) -> None:
        self.total = total
        self.programs = programs
        self.stream = stream if stream is not None else sys.stderr  # read at call time: tests replace it
        self.enabled = enabled
        self.tty = enabled and self.stream.isatty()
        self.count = 0
        self.started = time.perf_counter()
        self.last_line = self.started
        self._bar: Any = None
        self._task: Any = None

    def __enter__(self) -> Progress:
        if self.tty:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn, TimeRemainingColumn
            from rich.progress import Progress as Bar

            programs = [_programs_column(self.programs)] if self.programs is not None else []
            self._bar = Bar(
                TextColumn("scoring"),
                BarColumn(bar_width=24),
                MofNCompleteColumn(),
                TextColumn("records"),
                *programs,
                TextColumn("{task.fields[rate]:.0f}/s"),
                TimeElapsedColumn(),
                TimeRemainingColumn(),
                console=Console(file=self.stream),
                transient=True,
            )
            self._bar.start()
            self._task = self._bar.add_task("scoring", total=self.total, rate=0.0)
        return self

    def advance(self) -> None:
        self.count += 1
        now = time.perf_counter()
        if self._bar is not None:
            if self.count % 64 == 0 or now - self.last_line > 0.2:
                self._bar.update(self._task, completed=self.count, rate=self.count / max(now - self.started, 1e-9))
                self.last_line = now
        elif self.enabled and now - self.last_line >= 5.0:
            of = f"/{self.total}" if self.total else ""
            ran = f", {self.programs()} programs done" if self.programs is not None else ""
            print(f"potrun: {self.count}{of} records{ran}, {self.count / (now - self.started):.0f}/s", file=self.stream)
            self.last_line = now

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()


def _programs_column(programs: Callable[[], int]) -> Any:
    """A rich column with the programs finished so far, read at each redraw."""
    from rich.progress import ProgressColumn
    from rich.text import Text

    class ProgramsColumn(ProgressColumn):
        def render(self, task: Any) -> Text:
            return Text(f"{programs()} programs done", no_wrap=True)

    return ProgramsColumn()
