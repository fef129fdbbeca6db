"""parse_number: every written form, table-driven; scaled(); numbers in prose; linear time."""

from __future__ import annotations

import math
import time

import pytest

from potrun.extractors.numbers import ParsedNumber, find_numbers, last_number, parse_number

N = ParsedNumber

# text -> (value, unit, scale, percent); scale_factor follows from scale.
PARSE_TABLE: list[tuple[str, tuple[int | float, str | None, str | None, bool]]] = [
    # plain, signs, ints stay ints
    ("42", (42, None, None, False)),
    ("-42", (-42, None, None, False)),
    ("+7", (7, None, None, False)),
    ("3.14", (3.14, None, None, False)),
    (".4", (0.4, None, None, False)),
    ("5.", (5, None, None, False)),  # a trailing full stop is punctuation
    ("−1234", (-1234, None, None, False)),  # U+2212
    ("1000.0", (1000.0, None, None, False)),
    # thousands separators
    ("1,234,567.8", (1234567.8, None, None, False)),
    ("7,425,000", (7425000, None, None, False)),
    ("1 000", (1000, None, None, False)),
    ("12 345 678", (12345678, None, None, False)),
    ("1\u202f000", (1000, None, None, False)),
    ("1{,}234", (1234, None, None, False)),
    ("10,\\!000", (10000, None, None, False)),
    ("10\\,000", (10000, None, None, False)),
    # decimal comma (documented decision: a comma not followed by exactly 3 digits)
    ("2,50", (2.5, None, None, False)),
    ("1,22", (1.22, None, None, False)),
    ("1000,99", (1000.99, None, None, False)),
    ("0,111", (0.111, None, None, False)),
    # accounting negatives, with the comma every peer gets wrong
    ("(1,234)", (-1234, None, None, False)),
    ("(1,234.5)", (-1234.5, None, None, False)),
    ("(134.12)", (-134.12, None, None, False)),
    ("$(1,234)", (-1234, "$", None, False)),
    ("($1,234)", (-1234, "$", None, False)),
    ("(12.5%)", (-12.5, None, None, True)),
    ("(1,234) thousand", (-1234, None, "thousand", False)),
    ("(-5)", (-5, None, None, False)),  # an explicit sign wins over the parentheses
    # percent
    ("12.5%", (12.5, None, None, True)),
    ("20\\%", (20, None, None, True)),
    ("100 percent", (100, None, None, True)),
    ("12.5 per cent", (12.5, None, None, True)),
    ("3 pct", (3, None, None, True)),
    ("2 percentage points", (2, None, None, True)),
    # scale words and abbreviations
    ("3.5 million", (3.5, None, "million", False)),
    ("-2.3 thousand", (-2.3, None, "thousand", False)),
    ("205 billion", (205, None, "billion", False)),
    ("1.2 Trillion", (1.2, None, "trillion", False)),
    ("4 thousands", (4, None, "thousand", False)),
    ("5k", (5, None, "thousand", False)),
    ("5 mn", (5, None, "million", False)),
    ("7MM", (7, None, "million", False)),
    ("3 bn", (3, None, "billion", False)),
    ("2 tn", (2, None, "trillion", False)),
    ("$5m", (5, "$", "million", False)),
    ("€3B", (3, "€", "billion", False)),
    ("$1.2T", (1.2, "$", "trillion", False)),
    ("$300K", (300, "$", "thousand", False)),
    ("3 lakh", (3, None, "lakh", False)),
    # single letters without a currency are units, not scales
    ("5 m", (5, "m", None, False)),
    ("300 K", (300, "K", None, False)),
    ("4kHz", (4, "kHz", None, False)),
    # currency symbols and codes, before or after
    ("$124", (124, "$", None, False)),
    ("\\$1,234", (1234, "$", None, False)),
    ("$3.5 million", (3.5, "$", "million", False)),
    ("-$5", (-5, "$", None, False)),
    ("$-5", (-5, "$", None, False)),
    ("1,000.99€", (1000.99, "€", None, False)),
    ("2,74 $", (2.74, "$", None, False)),
    ("£12", (12, "£", None, False)),
    ("¥500", (500, "¥", None, False)),
    ("₹2 crore", (2, "₹", "crore", False)),
    ("USD 5 bn", (5, "USD", "billion", False)),
    ("RMB 12.5 million", (12.5, "RMB", "million", False)),
    ("5 EUR", (5, "EUR", None, False)),
    ("US$3", (3, "US$", None, False)),
    # fractions
    ("3/4", (0.75, None, None, False)),
    ("\\frac{3}{4}", (0.75, None, None, False)),
    ("\\dfrac{1}{8}", (0.125, None, None, False)),
    ("\\tfrac12", (0.5, None, None, False)),
    ("-\\frac{10}{9}", (-10 / 9, None, None, False)),
    ("\\frac{-1}{4}", (-0.25, None, None, False)),
    # scientific notation
    ("1.5e6", (1.5e6, None, None, False)),
    ("2E-3", (2e-3, None, None, False)),
    ("1.5 \\times 10^{6}", (1.5e6, None, None, False)),
    ("1.5 × 10^6", (1.5e6, None, None, False)),
    ("3 x 10^6", (3_000_000, None, None, False)),  # int mantissa, positive power: int
    ("3.57 * 10^(-29)", (3.57e-29, None, None, False)),
    ("2 \\cdot 10^{-3}", (0.002, None, None, False)),
    ("10^{6}", (1_000_000, None, None, False)),
    # trailing units, wrappers, approximations
    ("42 dollars", (42, "dollars", None, False)),
    ("330 ms", (330, "ms", None, False)),
    ("5\\text{ cm}", (5, "cm", None, False)),
    ("30^\\circ", (30, "°", None, False)),
    ("9.8 m/s^2", (9.8, "m/s^2", None, False)),
    ("$42$", (42, None, None, False)),
    ("$$ 9 $$", (9, None, None, False)),
    ("\\( 9 \\)", (9, None, None, False)),
    ("\\boxed{16}", (16, None, None, False)),
    ("$\\boxed{\\$16,\\!386.20}$", (16386.2, "$", None, False)),
    ("**42**", (42, None, None, False)),
    ("approximately 3.2", (3.2, None, None, False)),
    ("≈ 7", (7, None, None, False)),
    ("$29.00.", (29.0, "$", None, False)),
]

NOT_NUMBERS = [
    "",
    "   ",
    "-",
    "abc",
    "AZYUK2A",
    "x^y - 2e(x)",
    "3 and 4",
    "3,5,7",
    "1,234,56",
    "1,234,5",
    "5-6",
    "2x",
    "2\\pi",
    "\\sqrt{2}",
    "3.02xmath.pow(10, 16) V",
    "1e999",
    "1/0",
    "(1,2)",
    "(0,1)",
    "x = 5",
    "5 + 3",
    "2^10",
    "e5",
    "$",
    "()",
    "1" * 5000,
]


@pytest.mark.parametrize("text,expected", PARSE_TABLE, ids=[t for t, _ in PARSE_TABLE])
def test_parse_number(text: str, expected: tuple[int | float, str | None, str | None, bool]) -> None:
    value, unit, scale, percent = expected
    parsed = parse_number(text)
    assert parsed is not None, text
    assert type(parsed.value) is type(value), (text, parsed)  # ints stay ints
    assert parsed.value == pytest.approx(value, rel=1e-12), (text, parsed)
    assert (parsed.unit, parsed.scale, parsed.percent) == (unit, scale, percent), (text, parsed)


@pytest.mark.parametrize("text", NOT_NUMBERS)
def test_not_a_number(text: str) -> None:
    assert parse_number(text) is None


@pytest.mark.parametrize(
    "parsed,scaled",
    [
        (N(3.5, scale="million", scale_factor=1e6), 3_500_000.0),
        (N(1.1, scale="million", scale_factor=1e6), 1_100_000.0),  # decimal, not 1100000.0000000002
        (N(12.5, percent=True), 0.125),
        (N(18.3, percent=True), 0.183),
        (N(-1210, scale="million", scale_factor=1e6), -1_210_000_000),
        (N(42), 42),
        (N(5, scale="thousand", scale_factor=1e3, percent=True), 50.0),
    ],
)
def test_scaled(parsed: ParsedNumber, scaled: int | float) -> None:
    assert parsed.scaled() == scaled
    assert type(parsed.scaled()) is type(scaled)


def test_scaled_int_when_written_as_int() -> None:
    parsed = parse_number("-1,210 million")
    assert parsed is not None and parsed.scaled() == -1_210_000_000 and isinstance(parsed.scaled(), int)


def test_scale_factor_matches_scale() -> None:
    for text in ("5 thousand", "5 million", "5 billion", "5 trillion", "5 lakh", "5 crore"):
        parsed = parse_number(text)
        assert parsed is not None
        assert (
            parsed.scale_factor
            == {"thousand": 1e3, "million": 1e6, "billion": 1e9, "trillion": 1e12, "lakh": 1e5, "crore": 1e7}[
                parsed.scale
            ]
        )
    assert parse_number("5").scale_factor == 1.0  # type: ignore[union-attr]


def test_parsed_number_is_frozen_and_hashable() -> None:
    parsed = parse_number("12.5%")
    assert parsed is not None
    with pytest.raises(AttributeError):
        parsed.value = 1  # type: ignore[misc]
    assert hash(parsed) == hash(N(12.5, percent=True))


def test_non_string_input() -> None:
    assert parse_number(None) is None  # type: ignore[arg-type]
    assert parse_number(12) is None  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "text,expected",
    [
        ("the number is not 10 which is 1,000.99€", [10, 1000.99]),
        ("AZYUK2A has no number but x2 neither", []),
        ("fell to (1,234) thousand, then (134.12), not (3)", [-1234, -134.12, 3]),
        ("P(A) = 2/3 and \\frac{1}{2}", [2 / 3, 0.5]),
        ("revenue of 3.5 million and 12.5%", [3.5, 12.5]),
        ("from 10-5 and -7", [10, 5, -7]),
    ],
)
def test_find_numbers(text: str, expected: list[float]) -> None:
    assert [n.value for _, _, n in find_numbers(text)] == pytest.approx(expected)


@pytest.mark.parametrize(
    "text,expected",
    [
        ("Therefore, the probability is 2/3.", 2 / 3),
        ("total $1,234.50.", 1234.5),
        ("Revenue fell to (1,234) thousand.", -1234),
        ("no numbers here", None),
        ("x" * 5000 + " 17 " + "y" * 5000, 17),  # found past the first windows
        ("1e-5", 1e-5),
    ],
)
def test_last_number(text: str, expected: float | None) -> None:
    found = last_number(text)
    if expected is None:
        assert found is None
    else:
        assert found is not None and found[2].value == pytest.approx(expected)


def test_last_number_scale_word() -> None:
    found = last_number("profit of 3.5 million dollars")
    assert found is not None and found[2].scale == "million"


@pytest.mark.parametrize(
    "text",
    [
        "(" * 1_000_000,
        "1," * 500_000,
        "1 " * 500_000,
        "\\frac{1}{" * 110_000,
        "$" * 1_000_000,
        "9" * 1_000_000,
        "1e" * 500_000,
        "(1,234" * 160_000,
    ],
)
def test_linear_on_1mb(text: str) -> None:
    start = time.perf_counter()
    parse_number(text)
    list(find_numbers(text[:200_000]))
    last_number(text)
    assert time.perf_counter() - start < 30.0  # a hang guard (super-linear would take hours), not a benchmark


def test_huge_digit_strings_do_not_raise() -> None:
    assert parse_number("9" * 4500) is None  # over int()'s digit limit: refused, not raised
    assert math.isfinite(parse_number("9" * 300).value)  # type: ignore[union-attr]
