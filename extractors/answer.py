"""Final-answer extraction from chain-of-thought output.

Precedence (the first rule that finds an answer names `how`):

0. The text after the last `</think>` (the whole text when that part is empty), cut at a leaked
   chat-template token (`<|im_start|>`, `<|endoftext|>`, ...).
1. "whole": a short text that is itself the answer ("2.3 million", "(134.12)", "(B)", "[2, 3]").
2. "boxed" / "final_answer": the last balanced `\\boxed{…}` / `\\fbox{…}` (nested braces, escaped
   `\\{ \\}` ignored) and the last "final answer is" / "Final Answer:"; whichever comes later in the
   text wins (a reasoning model that revises itself is judged on what it said last). A box inside the
   final-answer sentence is used as that sentence's answer.
2b. Chinese markers, the last of them: 最终答案 ("final_answer"), 答案是 / 答案为 ("answer_is"), 答案：
   ("answer_colon"), 故选 / 应选 / 因此选 / 所以选 ("chosen": "因此选BD"). "答案可能是" (a hedge) is none.
3. "answer_is": the last "answer is" ("The answer is 42", "the answer is [2, 3, 4]").
4. "hashes": the last "#### 42" (GSM8K's format; the last, not the first: lm-eval #3438).
5. "answer_colon": the last "Answer:".
6. "literal": a Python literal after "next state:" / "final state:" (FineReason), parsed with
   ast.literal_eval, at most MAX_LITERAL_CHARS characters.
7. "choice": an option letter that opens the text ("A. Because ...", "\\mathrm{(D)}...").
8. "last_number": the rightmost number in the text, confident=False.
9. "none".

A marker's answer span is a `$…$`, `\\(…\\)`, `\\[…\\]` or `\\boxed{}` that starts it, or else the text up
to the end of the sentence. The span's value is, in order: a number (ParsedNumber), an option letter
("(B)", "B", "**B**"; several for a multi-select answer: "BD", "B、D", "B项" -> "BD"), a Python
literal (tuples and lists become tuples), the last number in the span; else None with the text kept
(an expression potrun does not evaluate). A span ends at a sentence's end, Chinese punctuation
(。，；！？) included.

Everything is linear in the length of the text: markers are found with rfind/one regex pass, brace
matching is one pass, literals are size-bounded.
"""

from __future__ import annotations

import ast
import re
import unicodedata
from collections import deque
from dataclasses import dataclass
from enum import StrEnum

from potrun.budget import charge

from .chat import SPECIAL_TOKENS
from .numbers import ParsedNumber, last_number, parse_number

__all__ = [
    "MAX_LITERAL_CHARS",
    "NO",
    "YES",
    "AnswerHow",
    "ExtractedAnswer",
    "extract_answer",
    "option_letters",
    "stated_value",
]


class AnswerHow(StrEnum):
    """Which rule found a chain-of-thought answer (`ExtractedAnswer.how`; the output's `extraction`)."""

    WHOLE = "whole"
    BOXED = "boxed"
    FINAL_ANSWER = "final_answer"
    ANSWER_IS = "answer_is"
    HASHES = "hashes"
    ANSWER_COLON = "answer_colon"
    LITERAL = "literal"
    CHOICE = "choice"
    CHOSEN = "chosen"
    LAST_NUMBER = "last_number"
    NONE = "none"


# The markers' named groups that name their rule (any other marker: CHOSEN).
_MARKER_HOWS = {how.value: how for how in (AnswerHow.FINAL_ANSWER, AnswerHow.ANSWER_IS, AnswerHow.ANSWER_COLON)}

MAX_LITERAL_CHARS = 20_000
_MAX_WHOLE_CHARS = 200
# Truth words (after NFKC and casefold): a whole output that is one of them is its answer, and a gold
# that is one is a truth value (`potrun.comparators.golds`).
YES = frozenset({"yes", "true", "是", "是的", "对"})
NO = frozenset({"no", "false", "否", "不是", "不对"})
_MAX_SPAN_CHARS = 300

Literal = int | float | str | bool | None | tuple["Literal", ...]
AnswerValue = ParsedNumber | str | tuple[Literal, ...] | None


@dataclass(frozen=True, slots=True)
class ExtractedAnswer:
    """The answer text a rule found, its value, the rule, and whether a marker backed it.

    value: a ParsedNumber; an option letter (str); a tuple for a list/tuple/set literal (hashable,
    nested lists become tuples); or None when the text is not a number, letter or literal.
    """

    text: str | None
    value: AnswerValue
    how: AnswerHow
    confident: bool


_NONE = ExtractedAnswer(None, None, AnswerHow.NONE, False)
# A chat template's tokens: the answer ends at the first one past its start (every family's, so that
# no template leaves text after its end of turn to be read as the answer).
_TEMPLATE_TOKENS = ("<|im_start|>", *SPECIAL_TOKENS)
assert all(token.startswith("<") for token in _TEMPLATE_TOKENS)  # (`_visible_part` relies on it)
_BOX_COMMANDS = ("\\boxed", "\\fbox")
_BRACE = re.compile(r"(?<!\\)[{}]")
_BOX_TOKEN = re.compile(r"\\(?:boxed|fbox)\s*\{|(?<!\\)[{}]")
# Markers: (a literal key that rfind looks for in the lower-cased text, the pattern matched there).
_FINAL_ANSWER = ("final", re.compile(r"final\s+answer(?:\s+is\b|\s*:)\s*:?"))
_ANSWER_IS = ("answer", re.compile(r"answer\s+is\b\s*:?"))
_ANSWER_COLON = ("answer", re.compile(r"answer\s*:"))
_STATE = ("state", re.compile(r"state\s*:"))
_STATE_PREFIX = re.compile(r"(?:next|final|new)\s+$")
_SENTENCE_END = re.compile(r"\.(?=\s|$)|[\n。，；！？]|\s+I hope\b|<\|")
# Chinese answer markers; each group names the rule it stands for. 答案 must be followed by a colon or
# a copula: "答案可能是" hedges and is no marker.
_ZH_MARKER = re.compile(
    r"(?P<final_answer>最终答案)\s*(?:应该是|应为|是|为)?\s*[:：]?"
    r"|(?P<answer_is>答案)\s*(?:应该是|应为|应是|是|为)\s*[:：]?"
    r"|(?P<answer_colon>答案)\s*[:：]"
    r"|(?P<chosen>(?:故|所以|因此|因而|应|则|即|答案)选(?:择)?)\s*[:：]?"
)
_OPTION_LETTER = re.compile(r"[A-E]")
_OPTIONS = re.compile(
    r"(?:选项)?\s*\(?(?P<one>[a-e])\)?\.?\s*"  # one letter may be lower case: "(b)"
    r"|(?:选项)?\s*\(?(?P<many>[A-E](?:\s*(?:[、,，&/和与及]|and)?\s*[A-E])*)\)?\.?\s*(?:项|选项)?"
)
_LETTER = re.compile(r"\(?([A-Z])\)?\.?")
_LEADING_OPTION = re.compile(
    r"\s*(?:\\(?:mathrm|text|textbf)\s*\{\s*)?(?:\*\*)?\(([A-Z])\\?\)"  # "(D)", "\mathrm{(D)\}"
    r"|\s*(?:\*\*)?([A-E])(?:\*\*)?[.):](?:\s|$)"  # "A. Because ..."
)
_LOOSE_LETTER = re.compile(r"\(?([A-E])\)?(?=[\s.,:;]|$)")
_WRAPPERS = re.compile(r"^(?:\*\*|\\textbf\{|\\text\{|\\mathrm\{|\\mathbf\{)(.*?)(?:\*\*|\})$")
_LITERAL_OPEN = {"[": "]", "(": ")", "{": "}"}
_LATEX_COMMAND = re.compile(r"\\[A-Za-z]+")
_WORD = re.compile(r"[A-Za-z]{2,}")
_NAME = re.compile(r"[A-Za-z]\w*|\\?[A-Za-z]+(?:_\{?\w+\}?)?")


# ---------------------------------------------------------------- entry point


def extract_answer(text: str) -> ExtractedAnswer:
    """The final answer of a chain-of-thought output; see the module docstring for the precedence."""
    if not text or text.isspace():
        return _NONE
    charge(len(text))  # every rule is linear in the text: the record's budget, where one is open
    body = _visible_part(text)
    whole = _whole(body)
    if whole is not None:
        return whole
    lower = _lower(body)
    for rule in (_strong_marker, _chinese_marker, _answer_is, _hashes, _answer_colon, _state_literal, _leading_choice):
        found = rule(body, lower)
        if found is not None and found.text is not None:  # a marker with nothing after it marks nothing
            return found
    return _fallback(body)


def _visible_part(text: str) -> str:
    """Drop <think> and anything after a leaked chat-template token."""
    close = text.rfind("</think>")
    if close >= 0 and text[close + 8 :].strip():
        text = text[close + 8 :]
    if "<" not in text:  # every template token starts with it: most answers have none to look for
        return text
    for token in _TEMPLATE_TOKENS:
        cut = text.find(token)
        if cut >= 0 and text[:cut].strip():  # a leading template token is not the end of the answer
            text = text[:cut]
    return text


# ---------------------------------------------------------------- rules


def _whole(body: str) -> ExtractedAnswer | None:
    stripped = body.strip()
    if len(stripped) > _MAX_WHOLE_CHARS or "\n" in stripped:
        return None
    number = parse_number(stripped)
    if number is not None and (number.unit is None or len(number.unit.split()) <= 2):
        return ExtractedAnswer(stripped, number, AnswerHow.WHOLE, True)
    letter = _LETTER.fullmatch(_unwrap(stripped))
    if letter is not None:
        return ExtractedAnswer(stripped, letter.group(1), AnswerHow.WHOLE, True)
    if unicodedata.normalize("NFKC", stripped.rstrip(".!。！")).strip().casefold() in YES | NO:
        return ExtractedAnswer(stripped, None, AnswerHow.WHOLE, True)  # "Yes", "No."
    cleaned = stripped.replace("\\left", "").replace("\\right", "").strip("$ ")
    if cleaned[:1] in _LITERAL_OPEN or ("," in cleaned and cleaned[:1].isdigit()):
        literal = _literal(cleaned) or _number_tuple(cleaned)
        if literal is not None:
            return ExtractedAnswer(stripped, literal, AnswerHow.WHOLE, True)
    return None


def _strong_marker(body: str, lower: str) -> ExtractedAnswer | None:
    """The later of the last box and the last "final answer is"."""
    box_at = max(body.rfind(c) for c in _BOX_COMMANDS)
    final = _last_match(_FINAL_ANSWER, lower)
    if final is not None and final.start() > box_at:
        return _from_span(_span_after(body, final.end()), AnswerHow.FINAL_ANSWER)
    if box_at < 0:
        return None
    content = _last_box(body)
    if content is None:
        return None if final is None else _from_span(_span_after(body, final.end()), AnswerHow.FINAL_ANSWER)
    return _from_span(content, AnswerHow.BOXED)


def _chinese_marker(body: str, lower: str) -> ExtractedAnswer | None:
    """The last Chinese answer marker (one regex pass), named after the English rule it stands for."""
    last = deque(_ZH_MARKER.finditer(body), maxlen=1)
    if not last:
        return None
    how = {
        "final_answer": AnswerHow.FINAL_ANSWER,
        "answer_is": AnswerHow.ANSWER_IS,
        "answer_colon": AnswerHow.ANSWER_COLON,
    }
    marker = last[0]
    return _from_span(_span_after(body, marker.end()), how.get(marker.lastgroup or "", AnswerHow.CHOSEN))


def _answer_is(body: str, lower: str) -> ExtractedAnswer | None:
    m = _last_match(_ANSWER_IS, lower)
    return None if m is None else _from_span(_span_after(body, m.end()), AnswerHow.ANSWER_IS)


def _hashes(body: str, lower: str) -> ExtractedAnswer | None:
    at = body.rfind("####")
    if at < 0:
        return None
    return _from_span(_span_after(body, at + 4), AnswerHow.HASHES)


def _answer_colon(body: str, lower: str) -> ExtractedAnswer | None:
    m = _last_match(_ANSWER_COLON, lower)
    return None if m is None else _from_span(_span_after(body, m.end()), AnswerHow.ANSWER_COLON)


def _state_literal(body: str, lower: str) -> ExtractedAnswer | None:
    m = _last_match(_STATE, lower)
    if m is None or not _STATE_PREFIX.search(lower, max(0, m.start() - 16), m.start()):
        return None
    start = m.end() + len(body[m.end() : m.end() + 64]) - len(body[m.end() : m.end() + 64].lstrip())
    end = _literal_end(body, start)
    if end < 0:
        return None
    value = _literal(body[start:end])
    return None if value is None else ExtractedAnswer(body[start:end], value, AnswerHow.LITERAL, True)


def _leading_choice(body: str, lower: str) -> ExtractedAnswer | None:
    m = _LEADING_OPTION.match(body)
    if m is None:
        return None
    return ExtractedAnswer(m.group(0).strip(), m.group(1) or m.group(2), AnswerHow.CHOICE, True)


def _fallback(body: str) -> ExtractedAnswer:
    """The last number, or the tuple in the last `$…$` when that number sits inside it."""
    found = last_number(body)
    if found is None:
        return _NONE
    start, end, number = found
    close = body.rfind("$")
    open_ = body.rfind("$", 0, close) if close > 0 else -1
    if 0 <= open_ < start and end <= close:
        inner = body[open_ + 1 : close].strip()
        pair = _number_tuple(inner.replace("\\left", "").replace("\\right", "").strip())
        if pair is not None:
            return ExtractedAnswer(inner, pair, AnswerHow.LAST_NUMBER, False)
    return ExtractedAnswer(body[start:end], number, AnswerHow.LAST_NUMBER, False)


def _last_match(marker: tuple[str, re.Pattern[str]], lower: str) -> re.Match[str] | None:
    """The last match of a marker, case-insensitive, that starts a word: rfind on the key, then a
    match there; linear because each candidate position is tried once."""
    key, pattern = marker
    at = len(lower)
    while True:
        at = lower.rfind(key, 0, at)
        if at < 0:
            return None
        if at == 0 or not lower[at - 1].isalnum():
            m = pattern.match(lower, at)
            if m is not None:
                return m
        if at == 0:
            return None


_ASCII_LOWER = {c: c + 32 for c in range(ord("A"), ord("Z") + 1)}


def _lower(text: str) -> str:
    """A lower-cased copy with the same length, so positions carry over to the original."""
    lower = text.lower()
    return lower if len(lower) == len(text) else text.translate(_ASCII_LOWER)


# ---------------------------------------------------------------- spans and their values


def _span_after(text: str, pos: int) -> str:
    """The answer that starts at pos: a math span or box that opens there, else the sentence."""
    limit = min(len(text), pos + _MAX_SPAN_CHARS)
    while pos < limit and text[pos] in " \t*:=：":
        pos += 1
    if text.startswith(("\n", "\r\n"), pos):  # "The answer is:\n72": one line break, not a paragraph
        pos += 1 if text[pos] == "\n" else 2
        while pos < limit and text[pos] in " \t*":
            pos += 1
    for opener, closer in (("$$", "$$"), ("\\[", "\\]"), ("\\(", "\\)"), ("$", "$")):
        if text.startswith(opener, pos):
            end = text.find(closer, pos + len(opener), limit)
            inner = text[pos + len(opener) : end] if end >= 0 else ""
            if inner.strip() and (opener != "$" or "\n" not in inner):
                return inner
            break  # "$29.00." is a price, not math
    if text.startswith(_BOX_COMMANDS, pos):
        box = _box_content(text, pos)
        if box is not None:
            return box
    m = _SENTENCE_END.search(text, pos, limit)
    return text[pos : m.start() if m else limit]


def _from_span(span: str, how: AnswerHow) -> ExtractedAnswer:
    span = span.strip().rstrip(".,;。，；").strip().strip("*").strip()  # markdown bold around the answer
    if not span:
        return ExtractedAnswer(None, None, how, False)
    inner = _last_box(span) if "\\boxed" in span or "\\fbox" in span else None
    if inner is not None:
        span = inner.strip()
    return ExtractedAnswer(span, _span_value(span), how, True)


def _span_value(span: str) -> AnswerValue:
    stated = stated_value(span)
    if stated is not None:
        return stated
    if _WORD.search(_LATEX_COMMAND.sub(" ", span)):  # a sentence: its last number
        found = last_number(span)
        if found is not None:
            return found[2]
    loose = _LOOSE_LETTER.match(_unwrap(span))
    return loose.group(1) if loose else None


def stated_value(span: str) -> AnswerValue:
    """What an answer span states, read strictly, else None: a number; the right side of "N = 14916";
    a choice letter ("B", "(B) 25 apples"); a literal list or tuple ("[72, 73]", "(7, 6)"); option
    letters ("B、D"). The extractor's value adds two loose readings (a sentence's last number, a
    letter before punctuation); the default comparator reads answer texts with this one, so that
    what the extractor reads is what it compares, and a hedge ("72 or 73") reads as nothing."""
    number = parse_number(span)
    if number is not None:
        return number
    rhs = _assignment_rhs(span)
    if rhs is not None:
        return rhs
    unwrapped = _unwrap(span)
    letter = _LETTER.fullmatch(unwrapped)
    if letter is not None:
        return letter.group(1)
    if unwrapped.startswith("(") and _LETTER.match(unwrapped) and unwrapped[2:3] == ")":
        return unwrapped[1]  # "(B) 25 apples"
    cleaned = span.replace("\\left", "").replace("\\right", "").strip()
    if cleaned[:1] in _LITERAL_OPEN:
        literal = _literal(cleaned) or _number_tuple(cleaned)
        if literal is not None:
            return literal
    return option_letters(unwrapped)  # "BD", "B、D", "B项"


def option_letters(text: str) -> str | None:
    """The option letters a text names, as one upper-case text in alphabetical order, or None.

    "B", "(b)", "B.", "B项", "选项B" -> "B"; a multi-select answer "BD", "B、D", "B, D", "B和D",
    "B and D", "D and B" -> "BD". Several letters are upper case and each named once; written
    together ("BD") they must be in order, since "BAD" and "DEAD" are words."""
    m = _OPTIONS.fullmatch(text.strip())
    if m is None:
        return None
    if m.group("one"):
        return m.group("one").upper()
    many = m.group("many")
    letters = _OPTION_LETTER.findall(many)
    if len(set(letters)) < len(letters):
        return None
    apart = len(many) > len(letters)  # a separator or a space between them
    return "".join(sorted(letters)) if apart or letters == sorted(letters) else None


def _assignment_rhs(span: str) -> ParsedNumber | None:
    """ "N = 14916" or "120 \\times 120 = 14400": the number after the last "=", when the left side
    is one name or has no letters; an equation such as "x-2y+z-1=0" has no single value."""
    at = span.rfind("=")
    if at <= 0 or span[at - 1] in "<>!=":
        return None
    left = _LATEX_COMMAND.sub(" ", span[:at]).strip().strip("$")
    if not (_NAME.fullmatch(left) or not any(c.isalpha() for c in left)):
        return None
    return parse_number(span[at + 1 :])


def _number_tuple(span: str) -> tuple[Literal, ...] | None:
    """ "(7, 6)", "\\left( \\frac{1}{5}, \\frac{1}{6} \\right)": a tuple of numbers (values as written)."""
    if span[:1] not in "([" or span[-1:] not in ")]" or len(span) > _MAX_SPAN_CHARS:
        return None
    items, depth, start = [], 0, 1
    for i, c in enumerate(span[1:-1], 1):
        if c in "({[":
            depth += 1
        elif c in ")}]":
            depth -= 1
        elif c == "," and depth == 0:
            items.append(span[start:i])
            start = i + 1
    items.append(span[start:-1])
    if len(items) < 2:
        return None
    numbers = [parse_number(item) for item in items]
    if any(n is None for n in numbers):
        return None
    return tuple(n.value for n in numbers if n is not None)


def _unwrap(span: str) -> str:
    m = _WRAPPERS.match(span)
    return m.group(1).strip() if m else span


# ---------------------------------------------------------------- boxes


def _box_content(text: str, pos: int) -> str | None:
    """Content of the box command at pos, braces balanced; None when it never closes."""
    brace = text.find("{", pos)
    head = text[pos:brace] if brace >= 0 else ""
    if brace < 0 or head.rstrip() not in _BOX_COMMANDS:
        return _unbraced_box(text, pos)
    depth = 0
    for m in _BRACE.finditer(text, brace):
        depth += 1 if m.group() == "{" else -1
        if depth == 0:
            return text[brace + 1 : m.start()]
    return None


def _unbraced_box(text: str, pos: int) -> str | None:
    """`\\boxed 5$`: the token after the command."""
    rest = text[pos : pos + 64].split(None, 1)
    if len(rest) < 2 or rest[0] not in _BOX_COMMANDS:
        return None
    token = rest[1].split(None, 1)[0] if rest[1] else ""
    return token.split("$", 1)[0] or None


def _last_box(text: str) -> str | None:
    """Content of the last balanced box; one linear pass when the last box is cut off."""
    at = max(text.rfind(c) for c in _BOX_COMMANDS)
    if at < 0:
        return None
    content = _box_content(text, at)
    if content is not None:
        return content
    stack: list[int] = []  # content start of an open box, or -1 for a plain brace
    best: tuple[int, int] | None = None
    for m in _BOX_TOKEN.finditer(text):
        token = m.group()
        if token == "}":
            if stack:
                start = stack.pop()
                if start >= 0 and (best is None or start > best[0]):
                    best = (start, m.start())
        else:
            stack.append(m.end() if token != "{" else -1)
    return text[best[0] : best[1]] if best else None


# ---------------------------------------------------------------- literals


def _literal_end(text: str, start: int) -> int:
    """End of the bracketed literal at start (quotes respected), or -1; scans MAX_LITERAL_CHARS."""
    if text[start : start + 1] not in _LITERAL_OPEN:
        return -1
    depth, quote = 0, ""
    limit = min(len(text), start + MAX_LITERAL_CHARS)
    for i in range(start, limit):
        c = text[i]
        if quote:
            if c == quote and text[i - 1] != "\\":
                quote = ""
        elif c in "'\"":
            quote = c
        elif c in "[({":
            depth += 1
        elif c in "])}":
            depth -= 1
            if depth == 0:
                return i + 1
    return -1


def _literal(text: str) -> tuple[Literal, ...] | None:
    """A list/tuple/set literal as a tuple of plain values, or None (ast.literal_eval, size-bounded)."""
    if len(text) > MAX_LITERAL_CHARS:
        return None
    try:
        value = ast.literal_eval(text.strip())
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
    if isinstance(value, (list, tuple, set, frozenset)):
        plain = _plain(value)
        assert isinstance(plain, tuple)  # a container's plain form is a tuple
        return plain
    return None


def _plain(value: object) -> Literal:
    if isinstance(value, (list, tuple)):
        return tuple(_plain(v) for v in value)
    if isinstance(value, (set, frozenset)):
        return tuple(sorted((_plain(v) for v in value), key=repr))
    if isinstance(value, dict):
        return tuple((_plain(k), _plain(v)) for k, v in value.items())
    if isinstance(value, (int, float, str, bool)) or value is None:
        return value
    return repr(value)  # complex, bytes, Ellipsis: kept as text
