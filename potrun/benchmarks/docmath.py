"""DocMath-Eval (yale-nlp/DocMath-Eval, commit a175c0c): `evaluation.py` and `utils/evaluation_utils.py`.

The prompt type comes from the file's folder, as `run_llm.py` names it: `.../raw_pot_outputs/MODEL.json`
or `.../raw_cot_outputs/MODEL.json`.

PoT (`evaluate_pot_pred_file`): the program is what `process_single_pot_output` builds from the first
output; the gold is the value of the record's `python_solution`. Both run the way evaluation.py runs
them: `exec` into a namespace holding only a silent `print`, then `namespace["solution"]()`, the
prediction under a 3 s limit. Inside the sandbox the prediction's value goes through `float()`, as
`get_acc(..., cot=False)` does under DocMath's pinned numpy and pandas (a string "29.31%" fails, a
one-element numpy array or pandas Series passes), and the
gold's type name is sent with it, since get_acc asserts it. A record is executed when `solution()`
returned; it is correct when get_acc says so.

CoT (`evaluate_cot_pred_file`): the official extractor is GPT-3.5 ("a numeric value or None"); the
stand-in the benchmark's cases were scored with returns the final number the output states: the
first number of its final answer statement ("the answer is 7.51. If ... it would be 8.04" gives 7.51),
or "None" when no answer is stated. Then `get_acc(pred, float(ground_truth))`, and "none" in the
answer is not executed.

`strict`: the PoT program is potrun's own extraction (`extract_program`: a later corrected block, a
`py` fence, a `<think>` scratch block, an unclosed fence around a complete program), judged the same
way; the metrics count the records whose verdict differs from the official one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any

from potrun.benchmarks import base
from potrun.check.pipeline import Plan, Program, RecordResult
from potrun.check.records import Record
from potrun.comparators import compare
from potrun.comparators.docmath import GOLD_TYPES
from potrun.comparators.nonfinite import paid_for_nonfinite
from potrun.extractors import extract_answer, extract_program, find_numbers
from potrun.types import BadRecord, ExecResult, Status, UsageError

__all__ = [
    "SANDBOX",
    "DocMathRun",
    "for_file",
    "gold_type_program",
    "official_program",
    "stated_number",
    "unreadable_gold",
]

# evaluation.py exec()s the programs with no restriction at all: the sandbox is the isolation.
SANDBOX: dict[str, Any] = {"policy": "trusted"}
PREDICTION_TIMEOUT_S = 3.0  # evaluate_pot_pred_file(timeout_duration=3): signal.alarm around the prediction
PROMPT_FOLDERS = {"raw_pot_outputs": "pot", "raw_cot_outputs": "cot"}
FLOAT_FAILED = "float() raises "  # the prefix of the value a prediction gets when float() rejects it

# evaluation.py's way of running a program, as one program for the sandbox: the model's (or the
# annotator's) text is a string literal here, so nothing it holds can escape the exec.
_RUN_AS_OFFICIAL = """
def solution():
    namespace = {{"print": lambda *args, **kwargs: None}}
    exec({source!r}, namespace)
    value = namespace["solution"]()
{finish}
"""
# float() as under DocMath's pinned numpy 2.0.1 and pandas 2.2.2 (requirements.txt), which still took
# a one-element array or Series (deprecated: numpy 2.4 and pandas 3 refuse them).
_FLOAT_IT = f"""    import sys

    numpy, pandas = sys.modules.get("numpy"), sys.modules.get("pandas")
    if pandas is not None and isinstance(value, pandas.Series) and len(value) == 1:
        value = value.iloc[0]
    if numpy is not None and isinstance(value, numpy.ndarray) and value.size == 1:
        value = value.reshape(())
    try:
        return float(value)
    except Exception as error:
        return {FLOAT_FAILED!r} + type(error).__name__
"""
_NAME_IT = f"""    name = type(value).__name__
    return [name, value if name in {GOLD_TYPES!r} else None]
"""


def for_file(path: str, strict: bool = False) -> DocMathRun:
    """The rules for one DocMath output file: PoT or CoT from its folder's name (run_llm.py's layout)."""
    folders = [PROMPT_FOLDERS[part] for part in PurePath(path).parts if part in PROMPT_FOLDERS]
    if not folders:
        raise UsageError(
            f"{path}: DocMath-Eval's prompt type is read from the folder run_llm.py writes: "
            f"put the file in a folder named {' or '.join(PROMPT_FOLDERS)}"
        )
    return DocMathRun(prompt_type=folders[-1], strict=strict)


def official_program(output: str) -> str:
    """`process_single_pot_output`: the program evaluation.py runs for a model output.

    Its regexes `python(.*?)` and `(.*?)` between fences take the first match; str.find finds the
    same span in linear time. Without a fence pair the text before a lone fence (or all of it) is a
    body continuing the prompt: `def solution():` is put before it, with four spaces of indentation
    when the output does not start with them."""
    if not output or "argparse" in output:
        return ""
    block = _first_between(output, "```python")
    if block is None:
        block = _first_between(output, "```")
    if block is not None:
        program = block.strip("\n")
    elif "def solution():" in output:
        program = output.strip()
    else:
        body = output.split("```", 1)[0]
        program = ("def solution():\n" if output[:4] == "    " and len(output) > 4 else "def solution():\n    ") + body
    return program.strip("`").strip()


def gold_type_program(source: str) -> str:
    """A program whose answer is [the type name of `source`'s `solution()` value, the value when get_acc
    reads that type, else None], run the way evaluation.py runs a gold."""
    return _RUN_AS_OFFICIAL.format(source=source, finish=_NAME_IT)


def unreadable_gold(run: ExecResult) -> str | None:
    """Why evaluation.py cannot score against the gold `gold_type_program` ran, or None when it can."""
    if run.status != Status.OK or not isinstance(run.value, list):
        return f"evaluation.py's namespace['solution']() fails ({run.error_type or run.status}): its run stops"
    name = run.value[0]
    if name not in GOLD_TYPES:
        return (
            f"solution() returns a {name}: get_acc asserts int, float, float64 or bool, "
            "and scores 0 for every prediction against this gold"
        )
    return None


def _first_between(text: str, opener: str) -> str | None:
    start = text.find(opener)
    if start < 0:
        return None
    end = text.find("```", start + len(opener))
    return text[start + len(opener) : end] if end >= 0 else None


def stated_number(output: str) -> str:
    """The CoT stand-in for GPT-3.5: the first number of the final answer the output states, as
    plain digits, or "None" when it states no answer (only a last number in passing)."""
    answer = extract_answer(output)
    if not answer.confident or answer.text is None:
        return "None"
    first = next(find_numbers(answer.text), None)
    return "None" if first is None else repr(first[2].value)


@dataclass(frozen=True)
class DocMathRun:
    """DocMath-Eval's rules for one file (frozen: Ray pickles it)."""

    prompt_type: str
    strict: bool = False
    name: str = "docmath"

    def plan(self, item: Record | BadRecord) -> Plan:
        unreadable = base.unreadable(item)
        if unreadable is not None:
            return unreadable
        assert isinstance(item, Record)
        data, line = item.data, item.line
        record_id = data.get("question_id")
        output = _first_output(data.get("output"))
        if output is None:
            return base.bad_record(line, "field 'output' is missing or not a string (or a list of strings)", record_id)
        fields = {"source": data.get("source")}
        if self.prompt_type == "cot":
            gold = _number(data.get("ground_truth"))
            if gold is None:
                return base.bad_record(line, "field 'ground_truth' is missing or not a number", record_id)
            strict = self.strict
            return base.judged_without_programs(lambda: _judge_cot(line, record_id, output, gold, fields, strict))
        gold_program = data.get("python_solution")
        if not isinstance(gold_program, str):
            return base.bad_record(line, "field 'python_solution' is missing or not a string", record_id)
        official = official_program(output)
        mine = extract_program(output) if self.strict else None
        sources = [official] + ([mine.source] if mine is not None and mine.source not in (None, official) else [])
        programs = (
            Program(gold_type_program(gold_program), "solution"),
            *(
                Program(_RUN_AS_OFFICIAL.format(source=s, finish=_FLOAT_IT), "solution", PREDICTION_TIMEOUT_S)
                for s in sources
            ),
        )
        extraction = "official" if mine is None else mine.how
        runs_mine = mine is not None and mine.source is not None

        def judge(results: list[ExecResult]) -> RecordResult:
            gold_run, official_run = results[0], results[1]
            run = results[-1] if runs_mine else official_run
            if mine is not None and not runs_mine:  # potrun found no program: nothing ran
                run = ExecResult(Status.NO_ANSWER, error="no program in the output")
            correct, executed = _judge_pot(run, gold_run, strict=self.strict)
            extra = {"executed": executed}
            if mine is not None:
                extra["official_correct"] = _judge_pot(official_run, gold_run)[0]
            return base.verdict(
                line,
                record_id,
                correct=correct,
                outcome=run,
                gold=_gold_value(gold_run),
                mode="pot",
                extraction=extraction,
                fields={**fields, **extra},
            )

        return Plan(programs, judge)

    def metrics(self, results: Sequence[RecordResult]) -> dict[str, Any]:
        """evaluation.py's `get_result`: accuracy and execution rate in percent, rounded to 2 places."""
        judged = [r for r in results if r.fields is not None and "executed" in r.fields]
        if not judged:
            return {"prompt_type": self.prompt_type, "records": 0}
        metrics: dict[str, Any] = {
            "prompt_type": self.prompt_type,
            "records": len(judged),
            "accuracy": _percent(sum(bool(r.correct) for r in judged), len(judged)),
            "execution_rate": _percent(sum(bool(r.fields["executed"]) for r in judged), len(judged)),  # type: ignore[index]
        }
        if self.strict:
            metrics["differs_from_official"] = sum(
                r.fields.get("official_correct", r.correct) != r.correct  # type: ignore[union-attr]
                for r in judged
            )
        return metrics


def _first_output(output: Any) -> str | None:
    """evaluation.py reads `output[0]` of a list, or the string itself."""
    if isinstance(output, list) and output:
        output = output[0]
    return output if isinstance(output, str) else None


def _number(value: Any) -> float | None:
    """`float(ground_truth)` (the CoT evaluator's gold), None when float() refuses it."""
    if isinstance(value, (bool, int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def _percent(count: int, total: int) -> float:
    return round(count / total * 100, 2)


def _gold_value(gold_run: ExecResult) -> Any:
    """The gold's value (null when it did not run or its type is not one get_acc reads)."""
    value = gold_run.value
    return value[1] if gold_run.status == Status.OK and isinstance(value, list) and len(value) == 2 else None


def _judge_pot(run: ExecResult, gold_run: ExecResult, *, strict: bool = False) -> tuple[bool, bool]:
    """(acc, executed) as evaluate_pot_pred_file sets them: executed when `solution()` returned;
    correct when the gold's type is one get_acc reads, float() took the value and get_acc agrees (and,
    `strict`, the value is finite or exactly the gold's NaN or infinity: the official code takes NaN)."""
    executed = run.status == Status.OK and run.value_type in ("float", "str")
    if not executed or unreadable_gold(gold_run) is not None:
        return False, executed
    if run.value_type == "str":  # float() refused the value: get_acc scores 0
        return False, executed
    gold = gold_run.value[1]  # type: ignore[index]
    if strict and paid_for_nonfinite(run.value, gold):
        return False, executed
    return compare(run.value, gold, preset="docmath", cot=False).correct, executed


def _judge_cot(
    line: int, record_id: Any, output: str, gold: float, fields: dict[str, Any], strict: bool = False
) -> RecordResult:
    """evaluate_cot_pred_file on the stand-in's answer: "none" in it is not executed, else get_acc
    (`strict`: an answer that reads as NaN or an infinity is wrong unless the gold is exactly that)."""
    answer = stated_number(output)
    executed = "none" not in answer.lower()
    correct = executed and compare(answer, gold, preset="docmath", cot=True).correct
    correct = correct and not (strict and paid_for_nonfinite(answer, gold))
    return base.verdict(
        line,
        record_id,
        correct=correct,
        gold=gold,
        mode="cot",
        extraction="stated_number",
        answer_text=answer,
        fields={**fields, "executed": executed},
    )
