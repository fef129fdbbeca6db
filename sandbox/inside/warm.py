"""A warm runner's life (`runner`'s warm tier), forked from the worker: run the pure programs that come,
answer the others with NEEDS_FORK. Moved out of the worker (#40)."""

from __future__ import annotations

import os
import time
from collections import deque
from typing import Any

from potrun.policies.pure import guard_addresses, on_unproven
from potrun.sandbox.inside.answers import NEEDS_FORK, READ_SIZE, RECYCLE, RESUME, AnswerPipe
from potrun.sandbox.inside.runner import Runner
from potrun.sandbox.kernel import memcg
from potrun.sandbox.wire.protocol import FrameReader, dumps, request_message

# When a warm runner measures its own footprint (`memcg.Footprint`): after a program of this wall time or
# more (filling memcg.WARM_MARGIN_BYTES takes longer: page faults and zeroing), and every this many.
FOOTPRINT_AFTER_S = 0.0005
FOOTPRINT_EVERY = 64


def serve_warm(requests: int, results: int) -> None:
    """A warm runner's life: run the pure programs that come, answer the others with NEEDS_FORK, until
    told to stop or replaced."""
    answers = AnswerPipe(results)
    runner: Runner | None = None

    def send(message: dict[str, Any], recycle: bool) -> None:
        answers.send(dumps(message), RECYCLE if recycle else 0, runner.cpu_used)  # type: ignore[union-attr]

    code = 0
    try:
        memcg.tune_malloc()
        runner = Runner(None, send=send)

        def stop_unproven(reason: str) -> None:  # the program reached what its proof did not cover
            runner.stop_for_fork()
            answers.send(b"", NEEDS_FORK | RECYCLE, time.process_time())
            os._exit(0)

        on_unproven(stop_unproven)
        guard_addresses()  # (where it cannot, the warm tier is closed: `warm_tier_refusal`, and potrun forks)
        footprint = memcg.Footprint()
        checked = 0
        reader = FrameReader()
        queue: deque[bytes] = deque()
        paused = False  # after NEEDS_FORK, until the worker's RESUME: the fork runs alone
        while True:
            if paused or not queue:
                data = os.read(requests, READ_SIZE)
                if not data:
                    return
                for body in reader.feed(data):
                    if body == RESUME:
                        paused = False
                    else:
                        queue.append(body)
                continue
            request = request_message(queue.popleft())
            result, recycle = runner.run(request)
            # What the program left (a heap glibc keeps, fragments) must not decide a later one's verdict:
            # looked at after a program that took long enough to have touched the margin's worth of memory
            # (zeroing 24 MB takes longer), and every FOOTPRINT_EVERY programs for slow growth: the look
            # costs a fraction of a quick GSM8K program. The worker looks again before each fork (the cgroup).
            checked += 1
            if not recycle and (runner.last_wall_s > FOOTPRINT_AFTER_S or checked % FOOTPRINT_EVERY == 0):
                recycle = footprint.over_margin()
            if result is None:  # for a fork; after a memory verdict, this runner is replaced too
                answers.send(b"", NEEDS_FORK | (RECYCLE if recycle else 0), time.process_time())
                if recycle:
                    return
                paused = True
                continue
            send(result, recycle)
            if recycle:
                return
    except BaseException:
        code = 70
    finally:
        os._exit(code)
