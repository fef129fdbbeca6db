"""Hostile answer texts, generated from a seed, through every preset and mode, every extractor and number
reader: run by tests/security/test_answer_text_fuzz.py in a subprocess under RLIMIT_AS and RLIMIT_CPU.

    python tests/security/fuzz_answer_texts.py SEED COUNT [--report]

Each case is timed by the thread's own CPU time (`resource.getrusage(RUSAGE_THREAD)`: load on other
processes does not count); a case over CASE_CPU_CEILING_S seconds, one judged correct, or one that
raised out of a preset is printed as `FAIL ...` and the exit status is 1. The ceiling is far above what
any bounded case needs (milliseconds) and far below what one unbounded operation costs (10**(10**9)
takes hours): only an unbounded computation can pass it, whatever the machine's load.
"""

from __future__ import annotations

import random
import resource
import sys
import unicodedata
from collections.abc import Callable, Iterator
from typing import Any

CASE_CPU_CEILING_S = 5.0
MATH_CPU_CEILING_S = 30.0  # math-verify's preset: its parse and verify timeouts (signal-based) bound it
MATH_EVERY = 10
GOLD = 37  # no hostile text below means 37 (nor 0, which DocMath reads an unevaluable text as)

# Digits of every script Python's int() and str.isdigit() know (category Nd), and other numerals.
SCRIPT_DIGITS = [chr(c) for c in range(0x110000) if unicodedata.category(chr(c)) == "Nd"]
OTHER_NUMERALS = "²³¹¼½¾⅓Ⅻⅻ①⑳〇一二三四五六七八九十百千万亿壹贰叁零∞"


def _nested(rng: random.Random) -> str:
    depth = rng.choice([50, 500, 5000, 50000])
    opening, closing = rng.choice(
        [("(", ")"), ("[", "]"), ("{", "}"), ("\\frac{", "}{1}"), ("\\boxed{", "}"), ("-", ""), ("~", ""),
         ("\\sqrt{", "}"), ("abs(", ")"), ("((", ",))"), ("\\left(", "\\right)")]
    )  # fmt: skip
    return opening * depth + str(rng.randint(1, 9)) + closing * depth


def _tower(rng: random.Random) -> str:
    op = rng.choice(["**", "^", "^{", "**(", " ** "])
    height = rng.randint(3, 40)
    base = str(rng.choice([2, 9, 10, 99, 12345]))
    if op == "^{":
        return base + ("^{" + base) * height + "}" * height
    if op == "**(":
        return base + ("**(" + base) * height + ")" * height
    return op.join([base] * height)


def _huge_operation(rng: random.Random) -> str:
    n = rng.choice(["10**9", "10**12", "999999999", "2**62", "-10**9", "10**100", "1e308"])
    return rng.choice(
        [
            f"round(5, -{n})", f"round(5, {n})", f"round(1.5, -{n})", f"'%0{n}e' % 1", f"'%.{n}f' % 1",
            "'%0999999999e' % 1", "'%.999999999f' % 1", "'%*d' % (999999999, 1)", "'%.*f' % (999999999, 1)",
            f"'a' * {n}", f"[1] * {n}", "[[1] * 9999] * 9999", "((1,) * 9999) * 9999", f"1 << {n}",
            "1 << (1 << 40)", f"math.factorial({n})", f"factorial({n})", f"comb({n}, {n} // 2)",
            f"math.comb({n}, 5)", f"{n}!", "100000!", f"\\binom{{{n}}}{{50000}}", f"10^{{{n}}}",
            "10^{10^{10}}", f"int('9' * {n})", f"str(10 ** {n})", f"pow(10, {n})", f"math.pow(10, {n})",
            f"math.exp({n})", "sum([[1] * 9999] * 9999, [])", "max([[1] * 9999] * 9999)",
            "[1] * 9999 + [1] * 9999", f"'{{:0{n}}}'.format(1)", f"f'{{1:0{n}}}'", f"format(1, '0{n}')",
            "(10 ** 4000) * (10 ** 4000)", "9 ** 9 ** 9", "(-1) ** (10 ** 4000)", f"2 ** -{n}",
            f"1.0000001 ** {n}", f"(1+1j) ** {n}", f"\\sqrt{{10^{{{n}}}}}", f"e^{{{n}}}", f"{n}% of {n}",
            f"\\frac{{10^{{{n}}}}}{{3}}", f"{n} \\times 10^{{{n}}}", f"1e{n}", f"0x{'f' * 5000}",
            f"0x{'f' * 5000} ** 2", f"divmod(10 ** {n}, 7)", f"abs(-10 ** {n})", f"min('a' * {n})",
        ]
    )  # fmt: skip


def _long_number(rng: random.Random) -> str:
    digits = rng.choice([5000, 20000, 100000])
    kind = rng.randint(0, 7)
    if kind == 0:
        return "9" * digits
    if kind == 1:
        return "1." + "0" * digits + "1"
    if kind == 2:
        return "1," + ",".join(["000"] * (digits // 4))
    if kind == 3:
        return "0x" + "f" * digits
    if kind == 4:
        return "1e" + "9" * min(digits, 5000)
    if kind == 5:
        return rng.choice(SCRIPT_DIGITS) * digits
    if kind == 6:
        return "".join(rng.choice(SCRIPT_DIGITS) for _ in range(digits))
    return "-" + "0" * digits + "7"


def _backtracking_bait(rng: random.Random) -> str:
    n = rng.choice([1000, 10000, 50000])
    return rng.choice(
        [
            "1," * n + "x", " " * n + "x", "1 " * n + "x", "$" * n, "answer is " * n, "\\boxed{" * n,
            "1." * n, "1.1" * n + "e", "(" * n, "((1,2)" * n, "#### " * n, "Answer: " * n, "final answer is " * n,
            "=" * n + "1", "10^" * n, "\\frac" * n, "-" * n + "1", "1e" * n, "%" * n, "million " * n,
            "答案是" * n, "0" * n + "." + "0" * n, "a" * n + "!", "[" * n + "1", "'" * n, "\"" * n,
            "\\text{" * n, "**" * n, "\\left(" * n, "1/2/" * n, "1 x " * n, "1 × " * n, "10,000 " * n,
        ]
    )  # fmt: skip


def _numerals(rng: random.Random) -> str:
    script = rng.choice(SCRIPT_DIGITS)
    start = ord(script) - unicodedata.digit(script)
    digits = "".join(chr(start + rng.randint(0, 9)) for _ in range(rng.randint(1, 30)))
    return rng.choice(
        [
            digits, f"{digits}.{digits}", f"{digits}%", f"${digits} million", f"\\boxed{{{digits}}}",
            "".join(rng.choice(OTHER_NUMERALS) for _ in range(rng.randint(1, 30))), f"{digits}e{digits}",
            f"{digits} ** {digits}", f"round(5, -{digits})",
        ]
    )  # fmt: skip


GENERATORS: list[Callable[[random.Random], str]] = [
    _nested,
    _tower,
    _huge_operation,
    _long_number,
    _backtracking_bait,
    _numerals,
]
WRAPPERS = [
    "{}",
    "The answer is {}.",
    "\\boxed{{{}}}",
    "#### {}",
    "Final Answer: ${}$",
    "答案是{}",
    "x = {}",
    "{} dollars",
]


def hostile_texts(seed: int, count: int) -> Iterator[str]:
    rng = random.Random(seed)
    for _ in range(count):
        text = rng.choice(GENERATORS)(rng)
        yield rng.choice(WRAPPERS).format(text)


def _calls() -> list[tuple[str, Callable[[str], Any]]]:
    """Every reader of answer text in potrun's own process, with a gold none of the texts means."""
    from potrun.comparators import PRESETS, compare, read_answer
    from potrun.comparators.safe_eval import EvalFailed, safe_eval
    from potrun.extractors import extract_answer, find_numbers, last_number, parse_number

    def evaluated(text: str) -> Any:
        try:
            return safe_eval(text)
        except EvalFailed:
            return None

    calls: list[tuple[str, Callable[[str], Any]]] = [
        ("extract_answer", extract_answer),
        ("parse_number", parse_number),
        ("last_number", last_number),
        ("find_numbers", lambda text: list(find_numbers(text))),
        ("safe_eval", evaluated),
    ]
    for name, preset in PRESETS.items():
        if name == "math" and not _has_math_verify():
            continue  # math-verify: an optional extra (its own signal timeouts: this runs in the main thread)
        calls.append((f"read_answer:{name}", lambda text, name=name: read_answer(text, preset=name)))
        modes = [{}] if preset.mode_option is None else [{preset.mode_option: True}, {preset.mode_option: False}]
        for options in modes:
            label = f"compare:{name}:{options}"
            calls.append((label, lambda text, name=name, options=options: compare(text, GOLD, preset=name, **options)))
            calls.append(
                (label + ":extracted", lambda text, name=name, options=options: _compare_extracted(text, name, options))
            )
    return calls


def _has_math_verify() -> bool:
    try:
        import math_verify  # noqa: F401
    except ImportError:
        return False
    return True


def _compare_extracted(text: str, preset: str, options: dict[str, Any]) -> Any:
    from potrun.comparators import compare
    from potrun.extractors import extract_answer

    found = extract_answer(text)
    return compare(found.text if found.text is not None else "", GOLD, preset=preset, **options)


class _NoPrograms:
    """A sandbox for records in chain-of-thought mode, which run nothing: every request is None."""

    def request(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a chain-of-thought record runs no program")

    def run_requests(self, requests: Any) -> Iterator[None]:
        for request in requests:
            assert request is None
            yield None

    def companion(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("no checker here")


def hostile_records(seed: int, count: int) -> Iterator[dict[str, Any]]:
    """Records that multiply the reading: many samples of hostile text, many golds, many checklist
    items; each record's reading is bounded as a whole (one budget a record, not one a comparison)."""
    rng = random.Random(seed)
    texts = list(hostile_texts(seed, 40))
    for _ in range(count):
        samples = [rng.choice(texts) for _ in range(rng.choice([16, 64, 256]))]
        golds: Any = rng.choice([GOLD, [GOLD] * rng.choice([100, 10000]), [str(GOLD + k) for k in range(5000)]])
        record: dict[str, Any] = {"output": samples, "gold": golds}
        if rng.random() < 0.5:
            record["checklist"] = [GOLD + k for k in range(rng.choice([10, 1000, 5000]))]
        yield record


def check_hostile_records(seed: int, count: int) -> int:
    """Each generated record through the pipeline with every preset (but math-verify's, which its own
    timeouts bound): its own thread CPU under the ceiling, never correct. Failures printed, counted."""
    from potrun.check.pipeline import CheckOptions, check_records
    from potrun.check.records import Record
    from potrun.comparators import PRESETS

    presets = tuple(name for name in PRESETS if name != "math")
    options = CheckOptions(code_fields=("output",), gold_fields=("gold",), id_fields=(), mode="cot", presets=presets)
    failures = 0
    for number, data in enumerate(hostile_records(seed, count)):
        start = _thread_cpu()
        (result,) = check_records([Record(number + 1, data)], _NoPrograms(), options)  # type: ignore[arg-type]
        spent = _thread_cpu() - start
        described = f"{len(data['output'])} samples, gold {str(data['gold'])[:40]}"
        if spent > CASE_CPU_CEILING_S:
            print(f"FAIL {spent:.1f}s of CPU for one record ({described})", flush=True)
            failures += 1
        if result.correct or any((result.verdicts or {}).values()):
            print(f"FAIL a hostile record judged correct ({described}): {result.verdicts}", flush=True)
            failures += 1
    return failures


def _thread_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_THREAD)
    return usage.ru_utime + usage.ru_stime


def main(seed: int, count: int, report: bool) -> int:
    failures = 0
    calls = _calls()
    worst = (0.0, "", "")
    for number, text in enumerate(hostile_texts(seed, count)):
        for name, call in calls:
            if ":math:" in name + ":" and number % MATH_EVERY:
                continue  # math-verify takes up to its own timeouts per text: a sample of the texts
            start = _thread_cpu()
            try:
                outcome = call(text)
            except Exception as exc:  # a preset must answer any data with a verdict
                if name.startswith("compare"):
                    print(f"FAIL raised {name} {type(exc).__name__}: {str(exc)[:100]} on {text[:80]!r}", flush=True)
                    failures += 1
                continue
            spent = _thread_cpu() - start
            worst = max(worst, (spent, name, text[:60]))
            if spent > (MATH_CPU_CEILING_S if ":math:" in name + ":" else CASE_CPU_CEILING_S):
                print(f"FAIL {spent:.1f}s of CPU in {name} on {text[:80]!r}", flush=True)
                failures += 1
            if name.startswith("compare") and getattr(outcome, "correct", False):
                print(f"FAIL judged correct by {name}: {text[:80]!r}", flush=True)
                failures += 1
            if report and spent > 0.05:
                print(f"slow {spent:.3f}s {name} {text[:80]!r}", flush=True)
    failures += check_hostile_records(seed, max(2, count // 10))
    import potrun

    print(f"worst case {worst[0]:.3f}s of CPU: {worst[1]} on {worst[2]!r} ({potrun.__file__})", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]), int(sys.argv[2]), "--report" in sys.argv))
