"""Throughput of extract_program and extract_answer on realistic 1-3 KB model outputs (one core).

The outputs are the real PoT programs of ../shared/data/pot wrapped the way chat models answer:
prose before and after, a fence of varying style, sometimes a <think> section with scratch code,
an ```output block, a `print(ans)` block, a final "The answer is ..." or a \\boxed{} answer.

    python bench/extract_speed.py [--repeat N]

Prints outputs/s for each extractor and the adversarial timings (1 MB inputs). No assertion: the
target (>= 20,000 outputs/s per extractor) is read, not tested.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path

from potrun.extractors import extract_answer, extract_program

POT_DIR = Path(__file__).resolve().parents[2] / "shared" / "data" / "pot"

PROSE = (
    "Let's break the problem down step by step. First we identify the quantities given in the question, "
    "then we translate each relationship into a variable assignment, and finally we combine them to get "
    "the requested value. We need to be careful with units and with the order of operations, because "
    "the question mixes rates (per day, per week) with totals. "
)
FENCES = (("```python", "```"), ("```py", "```"), ("```", "```"), ("~~~python", "~~~"), ("```Python", "```"))


def load_programs() -> list[str]:
    programs = []
    for path in sorted(POT_DIR.glob("*.jsonl")):
        with path.open() as f:
            for line in f:
                generated = json.loads(line).get("generated")
                if generated:
                    programs.append(generated[0])
    if not programs:
        raise SystemExit(f"no programs under {POT_DIR}")
    return programs


def wrap(program: str, rng: random.Random) -> str:
    """One realistic output around a program: 1-3 KB."""
    opener, closer = rng.choice(FENCES)
    parts = [PROSE * rng.randint(1, 4)]
    if rng.random() < 0.3:
        parts.insert(0, "<think>\n" + PROSE + "\n```python\nx = 2 + 3\nprint(x)\n```\n</think>\n")
    parts.append(f"\n{opener}\n{program}\n{closer}\n")
    if rng.random() < 0.4:
        parts.append("```output\n42.0\n```\n")
    if rng.random() < 0.2:
        parts.append("To print it:\n```python\nprint(ans)\n```\n")
    parts.append(PROSE * rng.randint(0, 2))
    answer = rng.choice(
        (
            "The answer is 42.",
            "So the final answer is $\\boxed{42}$.",
            "#### 42",
            "Answer: (B)",
            "Therefore it costs $1,234.50 in total.",
        )
    )
    parts.append(answer)
    return "".join(parts)


def rate(func, texts: list[str], repeat: int) -> float:
    start = time.perf_counter()
    for _ in range(repeat):
        for text in texts:
            func(text)
    return repeat * len(texts) / (time.perf_counter() - start)


def adversarial() -> dict[str, float]:
    mb = 1_000_000
    inputs = {
        "nested braces": "\\boxed{" * (mb // 7),
        "repeated fences": "```python\n" * (mb // 10),
        "open parens": "(" * mb,
        "digits and commas": "1," * (mb // 2),
        "fence on one line": "``` " * (mb // 4),
        "answer is": "the answer is " * (mb // 14),
        "code lines": "x = (1 +\n" * (mb // 9),
    }
    timings = {}
    for name, text in inputs.items():
        start = time.perf_counter()
        extract_program(text)
        extract_answer(text)
        timings[name] = time.perf_counter() - start
    return timings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    rng = random.Random(0)
    texts = [wrap(p, rng) for p in load_programs()]
    sizes = sorted(len(t) for t in texts)
    print(f"{len(texts)} outputs, median {sizes[len(sizes) // 2]} chars, p90 {sizes[len(sizes) * 9 // 10]} chars")
    for func in (extract_program, extract_answer):
        rate(func, texts[:200], 1)  # warm up
        print(f"{func.__name__:16s} {rate(func, texts, args.repeat):10,.0f} outputs/s")
    for name, seconds in adversarial().items():
        print(f"adversarial 1 MB {name:20s} {seconds * 1000:8.1f} ms")


if __name__ == "__main__":
    main()
