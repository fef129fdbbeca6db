"""LongDocURL (dengc2023/LongDocURL, commit 3807c0e): one line of a results file is one record.

The official pipeline (`eval/api_models/eval_api_models.py`, `eval_per_record`) has GPT-4o extract a
concise answer from the model's `detailed_response` with `eval/prompt_for_answer_extraction.md`, sets
`pred = eval(concise_answer)` (a set made a list; the text where eval raises, "Fail to extract" where
GPT-4o's reply has no tags) and scores it with `utils/utils_score_v3.eval_score(answer, pred,
answer_format)`, the record's own format; `utils/calculate_metrics.py` averages those scores.

A record is scored from, in order:
1. its `pred` (the pipeline's output, as JSON stores it: a tuple is a list), as calculate_metrics.py does;
2. its `concise_answer`, through the pipeline's eval;
3. its `detailed_response`: potrun extracts the concise answer the prompt asks GPT-4o for (an
   Integer, Float, String or List; "Not answerable" when the response says the documents do not
   answer; "Fail to answer" when it only says it cannot read them), then the pipeline's eval.

`score` is the official continuous score (ANLS for text and lists), `correct` full credit. The metrics
are the official ones: the mean score ("Avg. acc"), the mean over the full benchmark's 2,325 questions
("Rectified Avg. acc"), `calculate_acc_and_f1`'s F1, and `calculate_metrics_fine_grained.py`'s
breakdowns (task, element type, evidence pages, cross-element, fine-grained), each a mean over the
file's records in the group (the official script divides by the full benchmark's group sizes), plus
the mean per answer format.

`--strict` scores with potrun's reading where the official code misreads the answer: a unit word is
stripped only as a word, after the parentheses (the official character-set rstrip makes the gold
"Belgium" "belgiu", so "Belgium (see page 12)" loses credit), and a number that eval() split at its
thousands commas ("1,204" -> (1, 204)) is joined again; the metrics then add the official mean and
how many records' scores and verdicts differ from the official ones.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from potrun.benchmarks.base import bad_record, judged_without_programs, unreadable, verdict
from potrun.check.pipeline import Plan, RecordResult
from potrun.check.records import Record
from potrun.comparators.longdocurl import eval_concise_answer, record_score
from potrun.extractors.numbers import find_numbers
from potrun.types import BadRecord, ExecResult, Status, Value

__all__ = ["SANDBOX", "LongDocURLRun", "extract_concise_answer", "for_file"]

SANDBOX: dict[str, Any] = {}  # nothing runs: every record is judged on its text
DATASET_SIZE = 2325  # calculate_metrics.py's rectified score divides by the whole benchmark's size
NOT_ANSWERABLE = "Not answerable"
FAIL_TO_ANSWER = "Fail to answer"
ELEMENT_TYPES = ("Text", "Layout", "Figure", "Table")  # the evidence sources the fine-grained script counts
LOCATING_KINDS = {  # calculate_metrics_fine_grained.py: Locating questions by question_type
    "topic2title": "Cross_Title",
    "summary2title": "Para_Title",
    "summary2tab": "Cross_Table",
    "extract_fig2tab": "Figure_Table",
}


@dataclass(frozen=True)
class LongDocURLRun:
    """The rules for one LongDocURL results file (the path says nothing: every record names its format)."""

    name: str = "longdocurl"
    strict: bool = False

    def plan(self, item: Record | BadRecord) -> Plan:
        bad = unreadable(item)
        if bad is not None:
            return bad
        assert isinstance(item, Record)
        return _plan_record(item, self.strict)

    def metrics(self, results: Sequence[RecordResult]) -> dict[str, Any]:
        scored = [r for r in results if r.score is not None and r.fields is not None]
        scores = [r.score or 0.0 for r in scored]
        return {
            "records": len(scored),
            "mean_score": _mean(scores),
            "rectified_mean_score": sum(scores) / DATASET_SIZE,
            "full_credit": _mean([float(r.correct is True) for r in scored]),
            "f1": _f1(scored),
            "by_answer_format": _group_means(((r.fields["answer_format"],), r.score) for r in scored if r.fields),
            **_fine_grained(scored),
            **(_differences(scored) if self.strict else {}),
        }


def for_file(path: str, strict: bool = False) -> LongDocURLRun:
    """The rules for a LongDocURL results file: the same for every file."""
    return LongDocURLRun(strict=strict)


def _plan_record(item: Record, strict: bool) -> Plan:
    """A readable record's plan: judged on its pred, concise answer or response; a missing field, a bad_record."""
    data = item.data
    record_id = data.get("question_id", item.line)
    for name in ("answer", "answer_format"):
        if name not in data:
            return bad_record(item.line, f"no field {name!r}", record_id)
    if not isinstance(data["answer_format"], str):
        return bad_record(item.line, "field 'answer_format' must be a string", record_id)
    prediction = _prediction(data)
    if prediction is None:
        return bad_record(item.line, "no field 'pred', 'concise_answer' or 'detailed_response' (text)", record_id)
    return judged_without_programs(lambda: _judge(item.line, record_id, data, prediction, strict=strict))


@dataclass(frozen=True, slots=True)
class _Prediction:
    pred: Any  # what eval_score is given
    how: str  # where it came from: pred, concise_answer, or the extraction rule that read the response
    text: str | None  # the concise answer text, when potrun or the record had one


def _prediction(data: Mapping[str, Any]) -> _Prediction | None:
    if "pred" in data:
        return _Prediction(data["pred"], "pred", None)
    if isinstance(data.get("concise_answer"), str):
        return _Prediction(eval_concise_answer(data["concise_answer"]), "concise_answer", data["concise_answer"])
    response = data.get("detailed_response")
    if not isinstance(response, str):
        return None
    question = data.get("question")
    how, text = extract_concise_answer(response, question if isinstance(question, str) else "", data["answer_format"])
    return _Prediction(eval_concise_answer(text), how, text)


def _judge(
    line: int, record_id: Any, data: Mapping[str, Any], prediction: _Prediction, *, strict: bool
) -> RecordResult:
    answer, answer_format = data["answer"], data["answer_format"]
    score = official = record_score(prediction.pred, answer, answer_format)
    fields = _fields(data)
    if strict:
        score = record_score(_number_eval_split(prediction.pred, answer_format), answer, answer_format, strict=True)
        fields["official_score"] = official
    return verdict(
        line,
        record_id,
        correct=score == 1.0,
        score=score,
        outcome=ExecResult(Status.OK, value=_plain(prediction.pred), value_type=type(prediction.pred).__name__),
        gold=data["answer"],
        mode="cot",
        extraction=prediction.how,
        answer_text=prediction.text,
        fields=fields,
    )


def _number_eval_split(pred: Any, answer_format: str) -> Any:
    """--strict: the number eval() split at its thousands commas ("1,204" -> (1, 204), stored as [1, 204]),
    joined again for an Integer or Float answer; any other pred as it is."""
    if answer_format not in ("Integer", "Float") or not isinstance(pred, (list, tuple)) or len(pred) < 2:
        return pred
    *groups, last = pred
    is_group = all(type(g) is int and 0 <= g <= 999 for g in groups) and groups[0] > 0
    if not is_group or type(last) not in (int, float) or not 0 <= last < 1000:
        return pred
    whole, _, fraction = repr(last).partition(".")
    text = (
        str(groups[0]) + "".join(f"{g:03d}" for g in groups[1:]) + whole.zfill(3) + ("." + fraction if fraction else "")
    )
    return float(text) if fraction else int(text)


def _plain(value: Any) -> Value:
    """The pred as a result value: plain data as it is, a tuple as the list JSON makes it, anything else
    (a dict from eval) as its text."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    return repr(value)


def _fields(data: Mapping[str, Any]) -> dict[str, Any]:
    """What the official breakdowns group by (calculate_metrics_fine_grained.py), and the answer format."""
    return {
        "answer_format": data["answer_format"],
        "task_tag": data.get("task_tag"),
        "question_type": _text_or_none(data.get("question_type")),
        "evidence_sources": [s for s in _as_list(data.get("evidence_sources")) if isinstance(s, str)],
        "evidence_pages": len(_as_list(data.get("evidence_pages"))),
    }


def _text_or_none(value: Any) -> str | None:
    """A field the breakdowns look up (a list there ended the whole run in `metrics`: unhashable)."""
    return value if isinstance(value, str) else None


def _as_list(value: Any) -> list[Any]:
    """A list field, also as the dataset sometimes stores it: its text ("[12, 13]"), which show_results evals."""
    if isinstance(value, str):
        value = eval_concise_answer(value)
    return value if isinstance(value, list) else []


# ---------------------------------------------------------------- metrics


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _differences(results: Sequence[RecordResult]) -> dict[str, Any]:
    """--strict: how many records potrun's rules score otherwise than the official code, and its mean."""
    official = [r.fields["official_score"] for r in results if r.fields is not None]
    return {
        "official_mean_score": _mean(official),
        "differs_from_official": {
            "scores": sum(r.score != o for r, o in zip(results, official, strict=True)),
            "verdicts": sum(r.correct is not (o == 1.0) for r, o in zip(results, official, strict=True)),
        },
    }


def _f1(results: Sequence[RecordResult]) -> float:
    """utils_score_v3.calculate_acc_and_f1: recall is the mean score of the answerable questions,
    precision their total over the records whose pred is not "Not answerable"."""
    answerable = [r.score or 0.0 for r in results if r.gold != NOT_ANSWERABLE]
    answered = [r for r in results if r.value != NOT_ANSWERABLE]
    if not answerable or not answered:
        return 0.0  # the official code's ZeroDivisionError, caught
    recall, precision = sum(answerable) / len(answerable), sum(answerable) / len(answered)
    return 2 * recall * precision / (recall + precision) if recall + precision > 0 else 0.0


def _group_means(keyed: Iterable[tuple[tuple[str, ...], float | None]]) -> dict[str, Any]:
    """Nested groups from (key path, score) pairs: each leaf {"records": n, "mean_score": mean}."""
    scores: dict[tuple[str, ...], list[float]] = defaultdict(list)
    for path, score in keyed:
        scores[path].append(score or 0.0)
    tree: dict[str, Any] = {}
    for path, values in sorted(scores.items()):
        node = tree
        for step in path[:-1]:
            node = node.setdefault(step, {})
        node[path[-1]] = {"records": len(values), "mean_score": sum(values) / len(values)}
    return tree


def _fine_grained(results: Sequence[RecordResult]) -> dict[str, Any]:
    """calculate_metrics_fine_grained.py's five breakdowns, as means over this file's records."""
    keyed: list[tuple[tuple[str, ...], float | None]] = []
    for r in results:
        assert r.fields is not None
        task, pages, sources = str(r.fields["task_tag"]), r.fields["evidence_pages"], r.fields["evidence_sources"]
        page_kind = "Multi_Page" if pages > 1 else "Single_Page" if pages == 1 else None
        elements = [s for s in sources if s in ELEMENT_TYPES]
        keyed.append((("by_task", task), r.score))
        keyed += [(("by_element_type", s), r.score) for s in elements]
        if page_kind is not None:
            keyed.append((("by_evidence_pages", page_kind), r.score))
        if len(sources) > 1:
            keyed.append((("by_element_count", "Cross_Element"), r.score))
        if task in ("Understanding", "Reasoning") and page_kind is not None:
            keyed += [(("fine_grained", task, page_kind, s), r.score) for s in elements]
        elif task == "Locating" and r.fields["question_type"] in LOCATING_KINDS:
            keyed.append((("fine_grained", task, "Cross_Element", LOCATING_KINDS[r.fields["question_type"]]), r.score))
    return _group_means(keyed)


# ---------------------------------------------------------------- extraction (GPT-4o's step)

HOW_NOT_ANSWERABLE = "not_answerable"
HOW_FAIL_TO_ANSWER = "fail_to_answer"
HOW_NUMBER = "number"
HOW_LIST = "list"
HOW_TEXT = "text"

# "If the analysis only tells you that it can not read/understand the images or documents"
_UNREADABLE = re.compile(
    r"\b(?:too (?:small|blurry|blurred|faint|low[- ]resolution)"
    r"|(?:can ?not|can't|unable to|could not|couldn't|not able to) (?:read|see|view|open|access|make out|decipher|load)"
    r"|illegible|not legible|unreadable|blurry)\b",
    re.IGNORECASE,
)
# "If you find the analysis the question can not be answered from the given documents"
_NOT_ANSWERABLE = re.compile(
    r"\b(?:not answerable|unanswerable|(?:can ?not|can't|could not|couldn't) be (?:answered|determined|found)"
    r"|(?:does|do|did) not (?:contain|mention|provide|specify|include|say|state|show|indicate|give|list|have)"
    r"|(?:doesn't|don't|didn't) (?:contain|mention|provide|specify|include|say|state|show|indicate|give|list|have)"
    r"|(?:can ?not|can't|could not|couldn't|unable to) (?:find|locate|determine)"
    r"|no (?:information|mention|data|details)|there (?:is|are) no"
    r"|not (?:mentioned|provided|specified|stated|available|given|included|found|shown|listed))\b",
    re.IGNORECASE,
)
# A hedged guess ("does not say; possibly the Annual Overview") is an answer: the extractor takes it.
_GUESS = re.compile(r"\b(?:possibly|perhaps|probably|maybe)\b[,:]?\s+(?:the\s+)?", re.IGNORECASE)
_ANSWER_MARKER = re.compile(
    r"\b(?:is|are|was|were)\b(?:\s+(?:approximately|about|around|roughly|as follows))?\s*:?\s+", re.IGNORECASE
)
_QUOTED = re.compile(r"\s*[\"“]([^\"”\n]+)[\"”]")  # a quoted answer: the quotes open its span
_ABBREVIATION_CUT = re.compile(r"\b(?:[A-Za-z]\.)+[A-Za-z]$")  # "8:30 a.m" lost its own period
_REFERENCE = re.compile(
    r"\b(?:pages?|pp?\.|tables?|figures?|figs?\.|chapters?|sections?|appendix|appendices|slides?|images?|steps?"
    r"|lines?|no\.|items?)\s*$",
    re.IGNORECASE,
)
_REFERENCE_REACH = 16  # the reference word stands right before its number
_HOW_MANY = re.compile(r"\bhow many\s+([A-Za-z]+)", re.IGNORECASE)
_WORD = re.compile(r"[A-Za-z]+")
_BULLET = re.compile(r"^[ \t]*(?:[-*•]|\d+[.)])[ \t]+(.+?)\s*$", re.MULTILINE)
_NUMBER_WORDS = {  # what GPT-4o writes as digits ("There are five judging criteria" -> 5, the repo's own record)
    "zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
    "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15, "sixteen": 16,
    "seventeen": 17, "eighteen": 18, "nineteen": 19, "twenty": 20, "thirty": 30, "forty": 40, "fifty": 50,
    "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90,
}  # fmt: skip
_NUMBER_WORD = re.compile(r"\b(" + "|".join(_NUMBER_WORDS) + r")\b", re.IGNORECASE)


def extract_concise_answer(response: str, question: str, answer_format: str) -> tuple[str, str]:
    """What the extraction prompt asks GPT-4o for, as (how, concise answer text): the text the
    pipeline then evals. `answer_format` (the record's) says what kind of answer to look for, as the
    question tells GPT-4o; the response decides whether there is one."""
    guess = _GUESS.search(response)
    if guess is not None:
        return _answer_in(response[guess.end() :], question, answer_format)
    if _UNREADABLE.search(response):
        return HOW_FAIL_TO_ANSWER, FAIL_TO_ANSWER
    if _NOT_ANSWERABLE.search(response):
        return HOW_NOT_ANSWERABLE, NOT_ANSWERABLE
    return _answer_in(response, question, answer_format)


def _answer_in(text: str, question: str, answer_format: str) -> tuple[str, str]:
    if answer_format in ("Integer", "Float"):
        number = _number(text, question, integer=answer_format == "Integer")
        if number is not None:
            return HOW_NUMBER, number
    if answer_format == "List":
        return HOW_LIST, repr(_items(text))
    return HOW_TEXT, _span(text)


def _span(text: str) -> str:
    """The answer phrase: a quoted answer, else the text after the first "is"/"are", else the whole
    response, without its sentence's final period (an abbreviation's own period is kept)."""
    marker = _ANSWER_MARKER.search(text)
    rest = text[marker.end() :] if marker is not None else text
    quoted = _QUOTED.match(rest)
    if quoted is not None:
        return quoted.group(1).strip()
    span = rest.strip().split("\n", 1)[0].strip().strip("*").strip()
    return _without_final_period(span)


def _without_final_period(span: str) -> str:
    if not span.endswith("."):
        return span
    cut = span[:-1].rstrip()
    return span if _ABBREVIATION_CUT.search(cut) else cut


def _items(text: str) -> list[str]:
    """A list answer: bulleted or numbered lines, else the items after "are"/":" split on semicolons
    (or commas when there are none)."""
    bullets = _BULLET.findall(text)
    if len(bullets) > 1:
        return [_without_final_period(item) for item in bullets]
    span = _without_final_period(text[_items_start(text) :].strip().split("\n", 1)[0].strip())
    parts = span.split(";") if ";" in span else re.split(r",\s*(?:and\s+)?", span)
    return [part.strip().strip("\"'").strip() for part in parts if part.strip()]


def _items_start(text: str) -> int:
    """Where the items begin: after the first ":" or "is"/"are", whichever comes first."""
    colon, marker = text.find(":"), _ANSWER_MARKER.search(text)
    starts = ([colon + 1] if colon >= 0 else []) + ([marker.end()] if marker is not None else [])
    return min(starts, default=0)


def _number(text: str, question: str, *, integer: bool) -> str | None:
    """The number that answers: not a page, table or figure reference, a list's enumerator, a
    parenthesised note or a number the question itself states; the one before the noun a "how
    many" question counts ("five criteria" too), else the first after "is"/"are", else the first;
    an Integer written as a word only where no digits answer."""
    found = [
        _Candidate(start, end, parsed.value, parsed.percent)
        for start, end, parsed in find_numbers(text)
        if not _is_reference(text, start, end)
    ]
    stated = {parsed.value for _, _, parsed in find_numbers(question)}
    digits = [c for c in found if c.value not in stated] or found
    words = [_Candidate(m.start(), m.end(), _NUMBER_WORDS[m.group(1).lower()]) for m in _NUMBER_WORD.finditer(text)]
    counted = _HOW_MANY.search(question)
    if counted is not None:
        for candidate in sorted(digits + (words if integer else []), key=lambda c: c.start):
            if _counts(text, candidate.end, counted.group(1)):
                return _written(candidate, integer)
    candidates = digits or (words if integer else [])
    if not candidates:
        return None
    marker = _ANSWER_MARKER.search(text)
    after = [c for c in candidates if marker is not None and c.start >= marker.end()]
    return _written((after or candidates)[0], integer)


@dataclass(frozen=True, slots=True)
class _Candidate:
    start: int
    end: int
    value: int | float
    percent: bool = False


def _written(candidate: _Candidate, integer: bool) -> str:
    """The number as GPT-4o writes a concise answer: no thousands commas, an Integer as digits, % kept."""
    value = candidate.value
    text = str(int(value)) if integer and float(value).is_integer() else repr(value)
    return text + ("%" if candidate.percent else "")


def _is_reference(text: str, start: int, end: int) -> bool:
    before = text[:start]
    if _REFERENCE.search(before[-_REFERENCE_REACH:]) or before.count("(") > before.count(")"):
        return True
    opens_line = not before[before.rfind("\n") + 1 :].strip()
    return opens_line and text[end : end + 1] in (".", ")") and text[end + 1 : end + 2] in " \t"  # "1. Flavor"


def _counts(text: str, end: int, noun: str) -> bool:
    """Whether the word after a number is the noun a "how many" question counts ("7 tables")."""
    word = _WORD.match(text[end:].lstrip())
    if word is None:
        return False
    a, b = word.group(0).lower().rstrip("s"), noun.lower().rstrip("s")
    return bool(a) and bool(b) and (a.startswith(b) or b.startswith(a))
