"""The floor under per-sample calls from threads, in this interpreter on this machine: no potrun at all.

    python bench/handoff_floor.py [--threads 32] [--work-us 250] [--calls 20000] [--work-in server|caller]

Callers hand one item each to a server thread and wait for its answer (one SimpleQueue each way, the
fewest hand-offs a shared sandbox could cost a per-sample caller); the server spends `--work-us` of
GIL-holding CPU per item, as the parent spends on one completion of a batched reward call (~250 us
here: extraction, the cache key, comparison). `--work-in caller`: each caller spends it itself before
its round trip, and the server only answers (potrun's shape: a reward call extracts and compares on
its own thread, the dispatcher only carries requests and answers). Prints the calls/s against the
server alone doing the same work (the batched figure), for callers looping over their share and for
ThreadPoolExecutor tasks, and what the hand-offs alone cost (`--work-us 0`). bench/threaded_rewards.py
is the same measurement through potrun; the distance between the two is what potrun's own hand-offs
(the dispatcher, the worker processes) add.
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from queue import Empty, SimpleQueue


def spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def serve(inbox: SimpleQueue[SimpleQueue[int] | None], work_s: float) -> None:
    """Answer every reply queue handed over, after `work_s` of CPU for each, until given None."""
    while True:
        batch = [inbox.get()]
        while True:
            try:
                batch.append(inbox.get_nowait())
            except Empty:
                break
        for reply in batch:
            if reply is None:
                return
            spin(work_s)
            reply.put(1)


def call(inbox: SimpleQueue[SimpleQueue[int] | None], own_work_s: float = 0.0) -> int:
    spin(own_work_s)
    reply: SimpleQueue[int] = SimpleQueue()
    inbox.put(reply)
    return reply.get()


def per_call_s(threads: int, calls: int, work_s: float, harness: str, work_in: str = "server") -> float:
    inbox: SimpleQueue[SimpleQueue[int] | None] = SimpleQueue()
    server_s, caller_s = (work_s, 0.0) if work_in == "server" else (0.0, work_s)
    server = threading.Thread(target=serve, args=(inbox, server_s))
    server.start()
    start = time.perf_counter()
    if harness == "executor":
        with ThreadPoolExecutor(threads) as pool:
            for future in [pool.submit(call, inbox, caller_s) for _ in range(calls)]:
                future.result()
    else:
        callers = [
            threading.Thread(target=lambda: [call(inbox, caller_s) for _ in range(calls // threads)])
            for _ in range(threads)
        ]
        for caller in callers:
            caller.start()
        for caller in callers:
            caller.join()
    elapsed = time.perf_counter() - start
    inbox.put(None)
    server.join()
    return elapsed / (calls if harness == "executor" else calls // threads * threads)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=32)
    parser.add_argument("--work-us", type=float, default=250.0)
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--work-in", choices=("server", "caller"), default="server")
    args = parser.parse_args()
    work_s = args.work_us / 1e6
    figures: dict[str, float] = {}
    for harness in ("loop", "executor"):
        bare = per_call_s(args.threads, args.calls, 0.0, harness)
        loaded = per_call_s(args.threads, args.calls, work_s, harness, args.work_in)
        figures[f"{harness}_handoff_us"] = round(bare * 1e6, 1)
        figures[f"{harness}_ratio_to_batched"] = round(work_s / loaded, 3) if work_s else 0.0
    print(json.dumps({"threads": args.threads, "work_us": args.work_us, "work_in": args.work_in, **figures}))


if __name__ == "__main__":
    main()
