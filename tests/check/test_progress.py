"""The progress of `potrun check`: records written (in input order) and programs finished (in any
order, `Sandbox.completed`), so that the bar moves while the record due next waits for a slow program."""

from __future__ import annotations

import io
import threading

from potrun.reports.table import Progress
from potrun.sandbox.api import Sandbox


def test_completed_counts_results_as_they_arrive_not_in_order() -> None:
    fast = ["ans = 1"] * 20
    with Sandbox(workers=2, timeout=1) as box:
        assert box.completed == 0
        results = box.run_many(["while True:\n    pass\n", *fast])
        first = next(results)  # due first, finished at its 1 s timeout: the other worker's are done by then
        assert first.status.value == "timeout"
        assert box.completed > 1  # results not yet delivered (they come after the first) are counted
        assert [r.value for r in results] == [1] * 20
        assert box.completed == 21
        box.run("ans = 2")
        assert box.completed == 22


def test_completed_survives_a_restart() -> None:
    box = Sandbox(workers=1)
    with box:
        box.run("ans = 1")
    with box:
        box.run("ans = 1")
        assert box.completed == 2


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_bar_shows_programs_finished_while_no_record_is_written() -> None:
    stream, finished, draws = _Terminal(), [0], [0]
    drawn = threading.Event()

    def programs() -> int:
        if finished[0] >= 7:
            draws[0] += 1
            if draws[0] >= 2:  # the first redraw with 7 has been written
                drawn.set()
        return finished[0]

    with Progress(10, stream=stream, programs=programs):
        finished[0] = 7  # the records wait; programs finish behind them
        assert drawn.wait(timeout=30)  # rich's refresh thread redrew the bar
    assert "7 programs done" in stream.getvalue()
    assert "0/10" in stream.getvalue()


def test_plain_lines_name_both_counts() -> None:
    stream = io.StringIO()
    with Progress(3, stream=stream, programs=lambda: 5) as progress:
        progress.last_line -= 10  # as if the last line were 10 s old
        progress.advance()
    assert "1/3 records, 5 programs done" in stream.getvalue()
