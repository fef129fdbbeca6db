"""DocPuzzle (Zhuang et al., arXiv 2502.17807): `potrun check FILE --benchmark docpuzzle`.

No official code was released. The paper (§3.2, Appendix A) judges with GPT-4o (three prompts, a
majority vote) on two criteria, and these rules apply them to the response's text:

1. the answer matches the standard answer within the checklist's margin: the final answer is read
   after the last `</think>` (`potrun.extractors.extract_answer`, Chinese markers included: 答案：B,
   最终答案, 故选; without a marker, a last paragraph that hedges between two answers, "答案可能是是，
   也可能是否", gives none) and compared by potrun's default rules (a range, a number, a letter or letters, 是/否,
   a text); a number written in another scale than the standard answer's ("RMB 5.7 billion" for
   57亿元) is compared multiplied out, and a yes/no answer by its first word ("Yes, it was met");
2. the checklist is satisfied: every mandatory intermediate value appears among the numbers of the
   whole response, its reasoning included (the paper reads R1's reasoning), as written or converted
   from the unit the item is stated in (亿元 against "RMB 2.225 billion"), a negative number by its
   magnitude too ("投资收益-3亿元" for "投资亏损3亿元").

The record's `gold` and `checklist_items` are used where present (a potrun user's hand conversion;
an item's unit is the one its name ends with, "新能源汽车电池规模(亿元)"); else the `answer` text and
the free-text `checklist` are parsed (`potrun.check.scoring.parse_checklist`): the answer's range, the
required values, and the requirements that hold no number, which are reported in `fields`
(`checklist_unparsed`), never silently dropped, and cannot fail a record.

Where a judge model reads meaning, these rules read text, with two leniencies a judge grants: a text
answer that names the standard one ("天津市" for 天津), or romanizes it ("Tianjin": pinyin, by the pypinyin
extra). `--strict` takes potrun's default rules alone (exact text); the metrics then give the
benchmark's accuracy beside potrun's and count the records whose verdict differs.

Metrics: accuracy (both criteria, the paper's), answer accuracy (without the checklist), the
checklist's pass rate, and each by language, domain and model.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from potrun.benchmarks.base import bad_record, judged_without_programs, verdict
from potrun.check.pipeline import Plan, RecordResult
from potrun.check.process_golds import observed_in_text
from potrun.check.records import Record
from potrun.check.scoring import ChecklistItem, check_checklist, parse_checklist
from potrun.comparators import compare
from potrun.comparators.golds import Text, UnreadableGold, norm_text, read_gold
from potrun.extractors import AnswerHow, ExtractedAnswer, extract_answer, parse_number
from potrun.types import BadRecord, InputError, UsageError

SANDBOX: dict[str, Any] = {}  # nothing runs: responses are judged on their text

_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
_UNIT_IN_NAME = re.compile(r"[(（]([^()（）]+)[)）]\s*$")  # "新能源汽车电池规模(亿元)" -> 亿元
_LATIN = re.compile(r"[^a-z0-9]+")
_BREAKDOWNS = ("lang", "domain", "model")
_TRUTH_FIRST = re.compile(r"\s*(yes|no|true|false|是的|是|不是|否)\b", re.I)
# a last paragraph that names two answers ("答案可能是是，也可能是否") gives none
# Beside the standard answer, another one listed ("天津、北京", "Tianjin or Beijing") or a negation
# ("不是天津", "not Tianjin"). 和/及/与 are left out: they are inside names (和平区).
_LISTS_OR_NEGATES = re.compile(r"[、,，;；/|]|或|不|没|非|未|否|\b(?:or|and|not|no|never|nor|neither|except)\b|n't\b")
# After a first word yes (no), the words that take it back ("Yes... actually no, it was not met").
_TAKES_BACK = {
    True: re.compile(r"\b(?:no|not|false)\b|n't\b|不|否|没", re.I),
    False: re.compile(r"\b(?:yes|true)\b|是的|对", re.I),
}
_HEDGE = re.compile(r"可能是.{0,60}?也可能是|可能是.{0,30}?还是|\beither\b.{0,60}?\bor\b|could be .{0,60}? or ", re.I)


def for_file(path: str, strict: bool = False) -> DocPuzzleRun:
    """DocPuzzle's rules for `path` (every file the same: the records say everything)."""
    return DocPuzzleRun(strict=strict)


def _romanized(text: str) -> str:
    """Pinyin without tones, syllables joined: 天津 -> "tianjin"."""
    from pypinyin import lazy_pinyin  # imported here: only DocPuzzle's romanized answers need it

    return "".join(lazy_pinyin(text))


@dataclass(frozen=True)
class DocPuzzleRun:
    """The judge's two criteria for each record, and DocPuzzle's metrics."""

    strict: bool = False
    name: str = "docpuzzle"

    def plan(self, item: Record | BadRecord) -> Plan:
        """A bad record's plan (unreadable, or a field missing), else the judge of its text: nothing runs."""
        if not isinstance(item, Record):
            return bad_record(item.line, item.message)
        problem = _missing_field(item.data)
        if problem is not None:
            return bad_record(item.line, problem, item.data.get("id"))
        return judged_without_programs(lambda: self.judge(item.line, item.data))

    def judge(self, line: int, data: Mapping[str, Any]) -> RecordResult:
        response: str = data["response"]
        answer = extract_answer(response)
        items, unparsed = _checklist(data)
        gold = _gold(data)
        answer_ok = _judge_answer(answer, gold, data, lenient=not self.strict)
        checklist = check_checklist(_observed(response), items)
        correct = answer_ok and checklist.passed
        fields: dict[str, Any] = {key: data.get(key) for key in _BREAKDOWNS}
        fields |= {
            "answer_correct": answer_ok,
            "checklist_passed": checklist.passed,
            "checklist_missing": [item.describe() for item in checklist.missing],
            "checklist_unparsed": list(unparsed),
        }
        if self.strict:  # the benchmark's own verdict, beside potrun's
            fields["official_correct"] = _judge_answer(answer, gold, data, lenient=True) and checklist.passed
        return verdict(
            line,
            data.get("id"),
            correct=correct,
            gold=gold,
            mode="cot",
            extraction=answer.how,
            answer_text=answer.text,
            fields=fields,
        )

    def metrics(self, results: Sequence[RecordResult]) -> dict[str, Any]:
        judged = [r for r in results if r.correct is not None and r.fields is not None]
        metrics: dict[str, Any] = _rates(judged)
        for key in _BREAKDOWNS:
            groups: dict[str, list[RecordResult]] = defaultdict(list)
            for r in judged:
                assert r.fields is not None
                groups[str(r.fields.get(key))].append(r)
            metrics[f"by_{key}"] = {name: _rates(group) for name, group in sorted(groups.items())}
        metrics["records_with_unparsed_checklist"] = _count(judged, "checklist_unparsed")
        if self.strict:
            official = [bool(r.fields and r.fields["official_correct"]) for r in judged]
            metrics["official_accuracy"] = sum(official) / len(judged) if judged else None
            metrics["differs_from_official"] = sum(r.correct is not o for r, o in zip(judged, official, strict=True))
        return metrics


def _count(results: Sequence[RecordResult], field: str) -> int:
    """How many results have a non-empty `field`."""
    return sum(1 for r in results if r.fields and r.fields.get(field))


def _rates(results: Sequence[RecordResult]) -> dict[str, Any]:
    n = len(results)

    def rate(flag: Callable[[RecordResult], bool]) -> float | None:
        return sum(1 for r in results if flag(r)) / n if n else None

    return {
        "records": n,
        "accuracy": rate(lambda r: bool(r.correct)),
        "answer_accuracy": rate(lambda r: bool(r.fields and r.fields["answer_correct"])),
        "checklist_pass_rate": rate(lambda r: bool(r.fields and r.fields["checklist_passed"])),
    }


def _observed(response: str) -> tuple[float, ...]:
    """The numbers of the whole response, and the magnitude of each negative one: "投资收益-3亿元"
    states the loss of 3亿元 a checklist asks for."""
    numbers = observed_in_text(response)
    return numbers + tuple(-x for x in numbers if x < 0)


def _missing_field(data: Mapping[str, Any]) -> str | None:
    if not isinstance(data.get("response"), str):
        return "no response: the field 'response' (the model's text) is missing or not a string"
    if data.get("gold") is None and not isinstance(data.get("answer"), str):
        return "no standard answer: neither 'gold' nor 'answer' is given"
    if data.get("checklist_items") is None and not isinstance(data.get("checklist"), str):
        return "no checklist: neither 'checklist_items' nor 'checklist' is given"
    items = data.get("checklist_items")
    if items is not None and not isinstance(items, list):
        return "the field 'checklist_items' is not a list"
    return None


# ------------------------------------------------------------------ the standard answer and checklist


def _gold(data: Mapping[str, Any]) -> Any:
    """The record's `gold`, else the checklist's range for the answer, else the `answer` text's answer."""
    if data.get("gold") is not None:
        return data["gold"]
    if isinstance(data.get("checklist"), str):
        rng = parse_checklist(data["checklist"]).answer_range
        if rng is not None:
            return {"min": _bound(rng.low), "max": _bound(rng.high)}
    return _standard_answer_text(data)


def _bound(b: Any) -> float | None:
    return None if b is None else float(b.value)


def _standard_answer_text(data: Mapping[str, Any]) -> str:
    """What the `answer` text answers ("答案为A。" -> "A", "比例约为2.38%。" -> "2.38%", "天津" -> itself)."""
    text = str(data.get("answer", ""))
    found = extract_answer(text)
    return found.text if found.text is not None else text.strip().rstrip("。.")


def _checklist(data: Mapping[str, Any]) -> tuple[list[ChecklistItem], tuple[str, ...]]:
    """The required values (from `checklist_items`, else parsed) and what the free text holds unparsed."""
    given = data.get("checklist_items")
    if given is not None:
        return [_item(spec) for spec in given], ()
    parsed = parse_checklist(data["checklist"])
    return list(parsed.items), parsed.unparsed


def _item(spec: Any) -> ChecklistItem:
    """A hand-written item; a dict's unit is the one its name ends with when it gives none."""
    if isinstance(spec, Mapping) and "unit" not in spec:
        m = _UNIT_IN_NAME.search(str(spec.get("name", "")))
        if m is not None:
            spec = {**spec, "unit": m.group(1)}
    try:
        return ChecklistItem.from_spec(spec)
    except UsageError as e:  # (from_spec says what was wrong with it, cut short)
        raise InputError(f"checklist_items: {e}") from None


# ------------------------------------------------------------------ the answer criterion


def _judge_answer(answer: ExtractedAnswer, gold: Any, data: Mapping[str, Any], *, lenient: bool) -> bool:
    """Whether the response's answer matches the standard answer (module docstring, criterion 1);
    not `lenient`: potrun's default rules alone."""
    if not answer.confident and _HEDGE.search(_last_paragraph(data["response"])):
        return False
    text = answer.text
    if text is not None and compare(text, gold).correct:
        return True
    if not lenient:
        return False
    if text is not None and _in_another_scale(text, data):
        return True
    form = _gold_form(gold)
    if isinstance(form, bool):  # "Yes, it was met": the answer's first word
        first = _TRUTH_FIRST.match(text or "")
        if first is None or not compare(first.group(1), gold).correct:
            return False
        return not _TAKES_BACK[form].search((text or "")[first.end() :])  # "Yes... actually no"

    if isinstance(form, Text):
        # an answer without a marker is read from the last number; a judge reads the last paragraph
        said = text if answer.how not in (AnswerHow.LAST_NUMBER, AnswerHow.NONE) else _last_paragraph(data["response"])
        return said is not None and _names(said, gold)
    return False


def _gold_form(gold: Any) -> object:
    try:
        return read_gold(gold)
    except UnreadableGold:
        return None


def _in_another_scale(text: str, data: Mapping[str, Any]) -> bool:
    """ "RMB 5.7 billion" for a standard answer of 57亿元: both multiplied out."""
    value, standard = parse_number(text), parse_number(_standard_answer_text(data))
    if value is None or standard is None or value.scale_factor == standard.scale_factor:
        return False
    return compare(text, _standard_answer_text(data), scale=True).correct


def _last_paragraph(response: str) -> str:
    visible = response.rsplit("</think>", 1)[-1]
    paragraphs = [p for p in visible.split("\n") if p.strip()]
    return paragraphs[-1] if paragraphs else ""


def _names(said: str, gold: str) -> bool:
    """The answer names the standard text answer, and only it: contains it, or its pinyin when the
    answer is written in Latin letters ("Tianjin" for 天津), and what else it says neither lists
    another answer beside it nor negates it ("天津、北京", "not Tianjin": a hedge no judge grants)."""
    rest = _rest_after_name(said, gold)
    return rest is not None and not _LISTS_OR_NEGATES.search(rest)


def _rest_after_name(said: str, gold: str) -> str | None:
    """The answer's text without the standard answer (or its pinyin) in it, or None when it has none."""
    norm_said, norm_gold = norm_text(said), norm_text(gold)
    if norm_gold and norm_gold in norm_said:
        return norm_said.replace(norm_gold, " ", 1)
    if not _CJK.search(gold) or _CJK.search(said):
        return None
    letters = _LATIN.sub("", _romanized(gold).lower())
    if not letters:
        return None
    spelled = re.compile(r"[^a-z0-9]*".join(map(re.escape, letters)))  # "Tian jin", "tian-jin"
    lower = said.lower()
    found = spelled.search(lower)
    return None if found is None else lower[: found.start()] + " " + lower[found.end() :]
