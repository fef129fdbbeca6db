"""`potrun serve` under a trainer's load, against SandboxFusion's published rate on the same programs.

    python bench/serve_vs_sandboxfusion.py [FILE] [--programs 1000] [--concurrency 32] [--processes 1]

FILE: the PoT GSM8K generations (../shared/data/pot/gsm8k_fewshot_codex.jsonl); the first `--programs`
quick ones are used (a probe run through the Python API leaves out those that run past 0.1 s, as
`potrun bench` does: line 856 alone takes 3-7 s of CPU). The script starts `potrun serve` on a free
loopback port (trusted policy, SandboxFusion's default), then:

1. `/run_code`: `--concurrency` connections, each sending one program after another (keep-alive), until
   every program ran `--rounds` times; programs/s, and every answer checked (status Success);
2. under that load, one more connection sends a quick program (`print(1)`) again and again: its p50 and
   p99 latency;
3. `/v1/score`: the programs' completions and golds in batches of `--batch`, against the same scoring
   through the Python API (`potrun.rewards.score_completions`, its shared sandbox of the same workers:
   a dedup cache over a warm pool, as the service's); the ratio. (Both caches start empty: the service
   is restarted before this step.)

The load generator is a plain asyncio HTTP/1.1 client (no HTTP library: it shares the 2 cores with the
service). SandboxFusion's server is not pip-installable with its runners here, so its rate is the one
the issue measured on this machine: ~62 programs/s at 32 concurrent requests without isolation.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

DEFAULT_FILE = Path(__file__).resolve().parents[1].parent / "shared/data/pot/gsm8k_fewshot_codex.jsonl"
SANDBOXFUSION_RATE = 62.0  # programs/s, the measurement (32 concurrent requests, no isolation)
TARGET_RATIO = 20.0


def quick_programs(path: Path, count: int) -> tuple[list[str], list[float]]:
    from potrun import Sandbox

    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    programs, golds = [r["generated"][0] for r in records], [r["answer"] for r in records]
    with Sandbox(policy="trusted", workers=2, timeout=2) as box:
        probe = list(box.run_many(programs))
    kept = [k for k, r in enumerate(probe) if r.wall_s < 0.1 and r.status != "timeout"][:count]
    return [programs[k] for k in kept], [golds[k] for k in kept]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_service(port: int, processes: int, workers: int) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "potrun", "serve", "--port", str(port), "--workers", str(processes)]
    service = subprocess.Popen([*command, "--sandbox-workers", str(workers)])
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                s.sendall(b"GET /health HTTP/1.1\r\nhost: x\r\n\r\n")
                if b"200 OK" in s.recv(4096):
                    return service
        except OSError:
            time.sleep(0.2)
    raise SystemExit("the service did not start")


def stop_service(service: subprocess.Popen[bytes]) -> None:
    service.send_signal(signal.SIGTERM)
    service.wait(30)


class Connection:
    """One keep-alive HTTP/1.1 connection: POST a JSON body, read the answer's body."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(cls, port: int) -> Connection:
        return cls(*await asyncio.open_connection("127.0.0.1", port))

    async def post(self, path: str, body: bytes) -> bytes:
        head = f"POST {path} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
        self.writer.write(f"{head}content-length: {len(body)}\r\n\r\n".encode() + body)
        headers = await self.reader.readuntil(b"\r\n\r\n")
        if b"transfer-encoding: chunked" in headers.lower():
            return await self._chunked()
        length = int(headers.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
        return await self.reader.readexactly(length)

    async def _chunked(self) -> bytes:
        parts = []
        while True:
            size = int((await self.reader.readline()).strip(), 16)
            parts.append(await self.reader.readexactly(size + 2))
            if size == 0:
                return b"".join(part[:-2] for part in parts)

    def close(self) -> None:
        self.writer.close()


def run_code_body(code: str) -> bytes:
    return json.dumps({"code": code, "language": "python", "run_timeout": 10}).encode()


async def run_code_load(port: int, programs: list[str], concurrency: int, rounds: int) -> dict[str, float]:
    bodies = [run_code_body(code) for code in programs] * rounds
    position, failed, done = 0, 0, False
    latencies: list[float] = []

    async def client() -> None:
        nonlocal position, failed
        connection = await Connection.open(port)
        while position < len(bodies):
            body, position = bodies[position], position + 1
            answer = await connection.post("/run_code", body)
            failed += b'"status":"Success"' not in answer
        connection.close()

    async def probe() -> None:
        connection = await Connection.open(port)
        body = run_code_body("print(1)")
        while not done:
            start = time.perf_counter()
            await connection.post("/run_code", body)
            latencies.append(time.perf_counter() - start)
            await asyncio.sleep(0.01)
        connection.close()

    started = time.perf_counter()
    prober = asyncio.create_task(probe())
    await asyncio.gather(*(client() for _ in range(concurrency)))
    elapsed = time.perf_counter() - started
    done = True
    await prober
    latencies.sort()
    return {
        "programs": len(bodies),
        "programs_per_s": len(bodies) / elapsed,
        "not_success": failed,
        "probe_requests": len(latencies),
        "p50_ms": 1000 * statistics.median(latencies),
        "p99_ms": 1000 * latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))],
    }


async def score_load(port: int, completions: list[str], golds: list[float], batch: int) -> tuple[float, list[float]]:
    connection = await Connection.open(port)
    await connection.post("/v1/score", json.dumps({"completions": ["ans = 1"] * 50, "golds": [1] * 50}).encode())
    rewards: list[float] = []
    started = time.perf_counter()
    for k in range(0, len(completions), batch):
        body = json.dumps({"completions": completions[k : k + batch], "golds": golds[k : k + batch]}).encode()
        answer = await connection.post("/v1/score", body)
        rewards += [json.loads(line)["reward"] for line in answer.splitlines() if line.strip()]
    elapsed = time.perf_counter() - started
    connection.close()
    return len(completions) / elapsed, rewards


def score_api(completions: list[str], golds: list[float], batch: int, workers: int) -> tuple[float, list[float]]:
    """The same batches through `potrun.rewards.score_completions` and its shared sandbox (a dedup cache
    over a warm pool, as the service's), made fresh here."""
    from potrun import rewards

    rewards.configure(policy="trusted", workers=workers)
    try:
        rewards.score_completions(["ans = 1"] * 50, [1] * 50)  # start and warm the pool up
        started = time.perf_counter()
        scored = []
        for k in range(0, len(completions), batch):
            scored += rewards.score_completions(completions[k : k + batch], golds[k : k + batch])
        return len(completions) / (time.perf_counter() - started), scored
    finally:
        rewards.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("file", nargs="?", type=Path, default=DEFAULT_FILE)
    parser.add_argument("--programs", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3, help="times each program is sent to /run_code")
    parser.add_argument("--processes", type=int, default=1, help="potrun serve --workers")
    parser.add_argument("--sandbox-workers", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--batch", type=int, default=250)
    args = parser.parse_args()
    programs, golds = quick_programs(args.file, args.programs)

    port = free_port()
    service = start_service(port, args.processes, args.sandbox_workers)
    try:
        asyncio.run(run_code_load(port, programs[:50], args.concurrency, 1))  # warm up
        load = asyncio.run(run_code_load(port, programs, args.concurrency, args.rounds))
    finally:
        stop_service(service)
    service = start_service(port, args.processes, args.sandbox_workers)  # a fresh dedup cache
    try:
        served_rate, served = asyncio.run(score_load(port, programs, golds, args.batch))
    finally:
        stop_service(service)
    api_rate, direct = score_api(programs, golds, args.batch, args.sandbox_workers)
    report = {
        "run_code": load,
        "run_code_vs_sandboxfusion": load["programs_per_s"] / SANDBOXFUSION_RATE,
        "run_code_target_met": load["programs_per_s"] >= TARGET_RATIO * SANDBOXFUSION_RATE,
        "score_service_per_s": served_rate,
        "score_api_per_s": api_rate,
        "score_ratio": served_rate / api_rate,
        "score_rewards_equal": served == direct,
        "concurrency": args.concurrency,
        "processes": args.processes,
        "sandbox_workers": args.sandbox_workers,
    }
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
