"""What `GET /metrics` reports, in Prometheus' text format (version 0.0.4).

    potrun_programs_total{status="ok"} 1234      finished programs, by status
    potrun_programs_per_second 987.5             over the last RATE_WINDOW_S full seconds
    potrun_queue_depth 12                        programs admitted and not yet finished
    potrun_queue_limit 4096
    potrun_requests_total{route="/run_code"} 1234
    potrun_requests_refused_total 0              answered 429 (back-pressure)

Counts are kept per process: behind a balancer, each replica reports its own (as Prometheus expects).
"""

from __future__ import annotations

import threading
import time
from collections import Counter

from potrun.types import Status

RATE_WINDOW_S = 10


class Metrics:
    """Counters of one service process; safe from any thread."""

    def __init__(self) -> None:
        self.statuses: Counter[str] = Counter({status.value: 0 for status in Status})
        self.requests: Counter[str] = Counter()
        self._per_second: Counter[int] = Counter()  # finished programs by whole second
        self._lock = threading.Lock()

    def count_request(self, route: str) -> None:
        with self._lock:
            self.requests[route] += 1

    def count_program(self, status: str) -> None:
        second = int(time.monotonic())
        with self._lock:
            self.statuses[status] += 1
            self._per_second[second] += 1
            if len(self._per_second) > 2 * RATE_WINDOW_S:  # forget old seconds, rarely
                for old in [s for s in self._per_second if s < second - RATE_WINDOW_S]:
                    del self._per_second[old]

    def programs_per_second(self) -> float:
        """Finished programs per second over the last RATE_WINDOW_S full seconds."""
        now = int(time.monotonic())
        with self._lock:
            done = sum(count for second, count in self._per_second.items() if now - RATE_WINDOW_S <= second < now)
        return done / RATE_WINDOW_S

    def render(self, queue_depth: int, queue_limit: int, refused: int) -> str:
        """The Prometheus text of these counters and the queue's state."""
        lines = ["# TYPE potrun_programs_total counter"]
        with self._lock:
            lines += [f'potrun_programs_total{{status="{status}"}} {count}' for status, count in self.statuses.items()]
            lines.append("# TYPE potrun_requests_total counter")
            lines += [f'potrun_requests_total{{route="{route}"}} {count}' for route, count in self.requests.items()]
        lines += [
            "# TYPE potrun_programs_per_second gauge",
            f"potrun_programs_per_second {self.programs_per_second()}",
            "# TYPE potrun_queue_depth gauge",
            f"potrun_queue_depth {queue_depth}",
            "# TYPE potrun_queue_limit gauge",
            f"potrun_queue_limit {queue_limit}",
            "# TYPE potrun_requests_refused_total counter",
            f"potrun_requests_refused_total {refused}",
        ]
        return "\n".join(lines) + "\n"
