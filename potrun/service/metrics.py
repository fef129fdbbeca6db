"""What `GET /metrics` reports, in Prometheus' text format (version 0.0.4).

    potrun_programs_total{status="ok"} 1234      finished programs, by status
    potrun_programs_per_second 987.5             over the last RATE_WINDOW_S full seconds
    potrun_queue_depth 12                        programs admitted and not yet finished
    potrun_queue_limit 4096
    potrun_requests_total{route="/run_code"} 1234
    potrun_requests_refused_total 0              answered 429 (back-pressure)

Counts are kept per process: behind a balancer, each replica reports its own (as Prometheus expects).
Under `potrun serve --workers N` the N processes share one port, and a scrape reaches any one of them:
there they are counted in prometheus_client's multiprocess mode (MULTIPROCESS_ENV, a folder `serve`
makes), and every scrape reports the whole service: counters summed over every process that ran,
gauges (`potrun_queue_depth`, `potrun_queue_limit`, `potrun_programs_per_second`) over the live ones,
each process refreshing its own every REFRESH_S.
"""

from __future__ import annotations

import os
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from potrun.types import Status

RATE_WINDOW_S = 10
MULTIPROCESS_ENV = "PROMETHEUS_MULTIPROC_DIR"  # prometheus_client's: where each process writes its values
REFRESH_S = 1.0  # how often a process of a multiprocess service refreshes its gauges

# The queue's state of a process: (depth, limit, refused so far)
QueueState = Callable[[], tuple[int, int, int]]


class Metrics:
    """Counters of one service process; safe from any thread."""

    def __init__(self, queue: QueueState | None = None) -> None:
        self.statuses: Counter[str] = Counter({status.value: 0 for status in Status})
        self.requests: Counter[str] = Counter()
        self._per_second: Counter[int] = Counter()  # finished programs by whole second
        self._lock = threading.Lock()
        # several processes behind one port (MULTIPROCESS_ENV set): counted where every process sees them
        self._shared = _Shared(self, queue) if os.environ.get(MULTIPROCESS_ENV) and queue is not None else None

    def count_request(self, route: str) -> None:
        with self._lock:
            self.requests[route] += 1
        if self._shared is not None:
            self._shared.requests.labels(route=route).inc()

    def count_program(self, status: str) -> None:
        second = int(time.monotonic())
        if self._shared is not None:
            self._shared.programs.labels(status=status).inc()
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
        """The Prometheus text of these counters and the queue's state (of every process of the
        service, in multiprocess mode)."""
        if self._shared is not None:
            return self._shared.render()
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


class _Shared:
    """The metrics of one process of a multiprocess service, in prometheus_client's multiprocess mode:
    counters counted as they happen, gauges refreshed every REFRESH_S by a daemon thread (so a process
    that is not scraped still reports its queue and its rate), all read back by whichever process a
    scrape reaches."""

    def __init__(self, metrics: Metrics, queue: QueueState) -> None:
        # imported here: prometheus_client reads MULTIPROCESS_ENV when it is first imported
        from prometheus_client import Counter as PromCounter
        from prometheus_client import Gauge

        self.metrics, self.queue = metrics, queue
        self.programs = PromCounter("potrun_programs", "finished programs, by status", ["status"])
        for status in Status:
            self.programs.labels(status=status.value)  # every status shown, at 0 until it happens
        self.requests = PromCounter("potrun_requests", "requests, by route", ["route"])
        self.refused = PromCounter("potrun_requests_refused", "requests answered 429 (back-pressure)")
        self.rate = Gauge("potrun_programs_per_second", "finished programs per second", multiprocess_mode="livesum")
        self.depth = Gauge("potrun_queue_depth", "programs admitted, not finished", multiprocess_mode="livesum")
        self.limit = Gauge("potrun_queue_limit", "programs the service admits at once", multiprocess_mode="livesum")
        self._refused_seen = 0
        self._refresh_lock = threading.Lock()
        self.refresh()
        threading.Thread(target=self._refresh_forever, name="potrun-metrics", daemon=True).start()

    def refresh(self) -> None:
        """This process's gauges and refusals, as they are now."""
        depth, limit, refused = self.queue()
        with self._refresh_lock:
            self.depth.set(depth)
            self.limit.set(limit)
            self.rate.set(self.metrics.programs_per_second())
            if refused > self._refused_seen:
                self.refused.inc(refused - self._refused_seen)
                self._refused_seen = refused

    def _refresh_forever(self) -> None:
        while True:
            time.sleep(REFRESH_S)
            self.refresh()

    def render(self) -> str:
        from prometheus_client import CollectorRegistry, generate_latest, multiprocess

        self.refresh()
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
        text: Any = generate_latest(registry)
        return str(text.decode("utf-8"))
