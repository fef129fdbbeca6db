"""`potrun check FILE --benchmark longdocurl` against LongDocURL's official scores.

Two files per case set, as the contract runs them (shared/data/benchmarks/README.md): the records with
`pred` (the score must be the official one) and the same records without `pred` and `concise_answer`
(potrun extracts the answer from `detailed_response`; `correct` must be official == 1). The case sets:
the public sample and tests/data/benchmarks/longdocurl_extra.jsonl, whose `official` scores were
computed by running the official code (each line's `note` says how).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from paths import SHARED, TEST_DATA

from potrun.benchmarks.longdocurl import DATASET_SIZE, extract_concise_answer
from potrun.cli import EXIT_OK, main
from potrun.comparators.longdocurl import FAIL_TO_EXTRACT, eval_concise_answer, longdocurl_score, record_score

SAMPLE = SHARED / "benchmarks" / "longdocurl" / "sample.jsonl"
EXTRA = TEST_DATA / "benchmarks" / "longdocurl_extra.jsonl"
CASE_SETS = {"sample": SAMPLE, "extra": EXTRA}

# Left out of the measure without pred, as the contract leaves them out: the stand-in extractor's own
# output decides their verdict, not the response (a tuple from eval("1,204"), "five" kept as a word, a
# unit or scale word kept, "Unanswerable" for "Not answerable", ...). Either verdict passes.
NOT_GATED_WITHOUT_PRED = {
    "fail_to_extract",
    "int_commas_in_concise",
    "float_commas",
    "int_word",
    "int_with_unit",
    "int_scale_word",
    "float_percentage_points",
    "float_negative",
    "list_as_plain_string",
    "list_as_set",
    "none_synonym",
    "list_as_dicts",  # (extra) the extractor's choice of dicts for "Oslo, 700k", not the response, decides
}


def _cases(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _check(tmp_path: Path, records: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    preds = tmp_path / "evaluation_results" / "results_mixed-models.jsonl"  # the official results file's name
    preds.parent.mkdir()
    preds.write_text("".join(json.dumps(record) + "\n" for record in records))
    out, summary = tmp_path / "out.jsonl", tmp_path / "summary.json"
    code = main(
        ["check", str(preds), "--benchmark", "longdocurl", "--out", str(out), "--summary-json", str(summary), "--quiet"]
    )
    assert code == EXIT_OK
    return [json.loads(line) for line in out.read_text().splitlines()], json.loads(summary.read_text())


def _without_pred(record: dict[str, Any]) -> dict[str, Any]:
    return {name: value for name, value in record.items() if name not in ("pred", "concise_answer")}


@pytest.mark.parametrize("case_set", CASE_SETS)
def test_with_pred_the_score_is_the_official_score(case_set: str, tmp_path: Path) -> None:
    cases = [case for case in _cases(CASE_SETS[case_set]) if "pred" in case["record"]]
    lines, _ = _check(tmp_path, [case["record"] for case in cases])
    assert len(lines) == len(cases)
    for case, line in zip(cases, lines, strict=True):
        assert line["score"] == pytest.approx(case["official"], abs=1e-6), (case["kind"], line)
        assert line["correct"] is (case["official"] == 1), case["kind"]


@pytest.mark.parametrize("case_set", CASE_SETS)
def test_without_pred_the_extracted_answer_gets_the_official_verdict(case_set: str, tmp_path: Path) -> None:
    cases = [case for case in _cases(CASE_SETS[case_set]) if case["kind"] not in NOT_GATED_WITHOUT_PRED]
    lines, _ = _check(tmp_path, [_without_pred(case["record"]) for case in cases])
    assert all(line["extraction"] not in ("pred", "concise_answer") for line in lines)
    disagree = [
        (case["kind"], line["answer_text"])
        for case, line in zip(cases, lines, strict=True)
        if line["correct"] is not (case["official"] == 1)
    ]
    assert disagree == []


def test_the_metrics_are_the_official_means(tmp_path: Path) -> None:
    cases = _cases(SAMPLE)
    _, summary = _check(tmp_path, [case["record"] for case in cases])
    metrics, official = summary["metrics"], [case["official"] for case in cases]
    assert metrics["records"] == len(cases)
    assert metrics["mean_score"] == pytest.approx(sum(official) / len(official))  # calculate_metrics.py "Avg. acc"
    assert metrics["rectified_mean_score"] == pytest.approx(sum(official) / DATASET_SIZE)
    assert metrics["f1"] == pytest.approx(0.6290684624017958)  # utils_score_v3.calculate_acc_and_f1, run on it
    for group, field in (("by_answer_format", "answer_format"), ("by_task", "task_tag")):
        for value, cell in metrics[group].items():
            scores = [case["official"] for case in cases if case["record"][field] == value]
            assert cell == {"records": len(scores), "mean_score": pytest.approx(sum(scores) / len(scores))}
    assert metrics["by_evidence_pages"] == {"Single_Page": {"records": 36, "mean_score": metrics["mean_score"]}}
    assert set(metrics["fine_grained"]) == {"Understanding", "Reasoning", "Locating"}


def test_records_missing_a_field_are_bad_records_naming_it(tmp_path: Path) -> None:
    good = _cases(SAMPLE)[1]["record"]
    records = [
        {name: value for name, value in good.items() if name != "answer_format"},
        {name: value for name, value in good.items() if name != "answer"},
        {name: value for name, value in _without_pred(good).items() if name != "detailed_response"},
        good,
    ]
    lines, summary = _check(tmp_path, records)
    assert [line["status"] for line in lines] == ["bad_record", "bad_record", "bad_record", "ok"]
    assert "'answer_format'" in lines[0]["error"] and "'answer'" in lines[1]["error"]
    assert "'detailed_response'" in lines[2]["error"]
    assert summary["bad_record"] == 3 and summary["metrics"]["records"] == 1


def test_a_concise_answer_without_pred_goes_through_the_pipelines_eval(tmp_path: Path) -> None:
    record = _without_pred(_cases(SAMPLE)[5]["record"])  # gold "1,204", Integer
    lines, _ = _check(tmp_path, [record | {"concise_answer": "1,204"}, record | {"concise_answer": "1204"}])
    assert [line["extraction"] for line in lines] == ["concise_answer", "concise_answer"]
    assert lines[0]["value"] == [1, 204] and lines[0]["score"] == 0.0  # eval made a tuple, as in the pipeline
    assert lines[1]["value"] == 1204 and lines[1]["score"] == 1.0


def test_the_pipelines_eval_step() -> None:
    assert eval_concise_answer("1,204") == (1, 204)
    assert sorted(eval_concise_answer("{'b', 'a'}")) == ["a", "b"] and isinstance(eval_concise_answer("{1}"), list)
    assert eval_concise_answer("8:30 a.m.") == "8:30 a.m."
    assert record_score(FAIL_TO_EXTRACT, FAIL_TO_EXTRACT, "String") == 0.0  # even where it would match


Q = "What is it?"
FIGURES = "How many figures appear between pages 20 and 30?"
CRITERIA = "How many criteria are there?"
EXTRACTIONS = [  # (response, question, answer_format, the concise answer)
    ("Chapter 3 contains 7 tables, from Table 3.1 to Table 3.7.", "How many tables are in Chapter 3?", "Integer", "7"),
    ("The trial enrolled 1,204 patients across 15 sites.", "How many patients were enrolled?", "Integer", "1204"),
    ("The trial enrolled 1,204 patients across 15 sites.", "How many sites took part?", "Integer", "15"),
    ("Between pages 20 and 30 there are 4 figures (Figures 2.1-2.4).", FIGURES, "Integer", "4"),
    ("There are five criteria:\n1. Flavor - 30 points\n2. Texture - 25 points", CRITERIA, "Integer", "5"),
    ("According to the table on page 31, the value is 18.75%.", Q, "Float", "18.75%"),
    ("It is 0.0082 as a fraction.", Q, "Float", "0.0082"),
    ("The value is approximately 616.07.", Q, "Float", "616.07"),
    ('The answer is "8:30 a.m.".', Q, "String", "8:30 a.m."),
    ("It is 8:30 A.M..", Q, "String", "8:30 A.M."),
    ("It is 8:30 a.m.", Q, "String", "8:30 a.m."),
    ("The relevant item is Industrial Sensors (see page 12).", Q, "String", "Industrial Sensors (see page 12)"),
    ("The document does not say; possibly the Annual Overview.", Q, "String", "Annual Overview"),
    ("The items are: United States; China; Germany.", Q, "List", "['United States', 'China', 'Germany']"),
    ("The items are: 2015, 2018, 2020.", Q, "List", "['2015', '2018', '2020']"),
    ("The regions are:\n- North\n- South", Q, "List", "['North', 'South']"),
    ("The document does not contain this information.", Q, "None", "Not answerable"),
    ("This cannot be answered from the document.", Q, "Integer", "Not answerable"),
    ("The image is too small to read.", Q, "None", "Fail to answer"),
    ("It is 12.5%.", Q, "None", "12.5%"),
]


@pytest.mark.parametrize(("response", "question", "answer_format", "concise"), EXTRACTIONS)
def test_extraction_gives_what_the_prompt_asks_gpt4o_for(
    response: str, question: str, answer_format: str, concise: str
) -> None:
    assert extract_concise_answer(response, question, answer_format)[1] == concise


def test_extraction_names_the_rule_that_read_the_response() -> None:
    hows = [extract_concise_answer(response, question, fmt)[0] for response, question, fmt, _ in EXTRACTIONS]
    assert hows == ["number"] * 8 + ["text"] * 5 + ["list"] * 3 + ["not_answerable"] * 2 + ["fail_to_answer", "text"]


def test_strict_reads_split_numbers_and_unit_words_as_potrun_does(tmp_path: Path) -> None:
    """The official rstrip("m") makes the gold "Belgium" "belgiu"; eval split "1,204" into (1, 204)."""
    kinds = {"str_paren_suffix", "int_commas_in_concise", "float_commas", "str_unit_suffix_quirk", "int_correct"}
    cases = [case for path in CASE_SETS.values() for case in _cases(path) if case["kind"] in kinds]
    preds = tmp_path / "results.jsonl"
    preds.write_text("".join(json.dumps(case["record"]) + "\n" for case in cases))
    out, summary = tmp_path / "out.jsonl", tmp_path / "summary.json"
    argv = [
        "check",
        str(preds),
        "--benchmark",
        "longdocurl",
        "--strict",
        "--out",
        str(out),
        "--summary-json",
        str(summary),
    ]
    assert main([*argv, "--quiet"]) == EXIT_OK
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [line["fields"]["official_score"] for line in lines] == pytest.approx([case["official"] for case in cases])
    differ = [case["kind"] for case, line in zip(cases, lines, strict=True) if line["score"] != case["official"]]
    assert sorted(differ) == ["float_commas", "int_commas_in_concise", "str_paren_suffix", "str_unit_suffix_quirk"]
    assert all(line["score"] == 1.0 for line in lines if line["score"] != line["fields"]["official_score"])
    metrics = json.loads(summary.read_text())["metrics"]
    assert metrics["differs_from_official"] == {"scores": 4, "verdicts": 4}
    assert metrics["official_mean_score"] == pytest.approx(sum(case["official"] for case in cases) / len(cases))


def test_strict_scores_unit_words_as_words() -> None:
    assert longdocurl_score("Belgium (page 2)", "Belgium", "String") < 1.0  # official: the gold is "belgiu"
    assert longdocurl_score("Belgium (page 2)", "Belgium", "String", strict=True) == 1.0
    assert longdocurl_score("5 kg", 5, "Integer", strict=True) == 1.0
    assert longdocurl_score("5kg", 5, "Integer", strict=True) == 1.0
    assert longdocurl_score("Film", "film", "String", strict=True) == 1.0
