"""The service's bounded queue: how many programs may be accepted and not yet finished.

Back-pressure is an immediate 429 (with `Retry-After`), never an unbounded wait: a request that would
take the programs in flight past the limit is refused whole, before any of it runs, so a refused
request has cost nothing and can be sent again (SandboxFusion's client retries a non-200 answer with
backoff). A request is admitted whole or not at all, so that a batch never half runs; one larger than
the whole queue can never be admitted (413). Below the limit, admitted programs wait in the sandbox
pool's own queue, in order, for a worker.
"""

from __future__ import annotations

import threading


class QueueFull(Exception):
    """The queue holds too many programs to admit this request now (429)."""


class TooLarge(Exception):
    """The request holds more programs than the queue ever admits (413)."""


class Admission:
    """Counts the programs in flight against `limit`; safe from any thread."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.depth = 0  # programs admitted and not yet finished
        self.refused = 0  # requests answered 429
        self._lock = threading.Lock()

    def admit(self, programs: int) -> None:
        """Take room for `programs`, or raise QueueFull / TooLarge."""
        if programs > self.limit:
            raise TooLarge(f"{programs} programs in one request; at most {self.limit}")
        with self._lock:
            if self.depth + programs > self.limit:
                self.refused += 1
                raise QueueFull(f"{self.depth} programs in flight; the limit is {self.limit}")
            self.depth += programs

    def release(self, programs: int) -> None:
        with self._lock:
            self.depth -= programs
