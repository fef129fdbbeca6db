"""Issue 37, item 6 (inputs): HF datasets' `save_to_disk` folders and `.arrow` files, and `*` in field
paths for several choices.

`datasets` is not installed here: the folder is laid out as `Dataset.save_to_disk` writes it (its
state.json's `_data_files` list, dataset_info.json, data-0000N-of-0000M.arrow in Arrow's IPC *stream*
format, as datasets' ArrowWriter writes them), with pyarrow."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

pa = pytest.importorskip("pyarrow")
import pyarrow.ipc  # noqa: E402

from potrun import InputError, read_records  # noqa: E402
from potrun.check.records import Record, field_value  # noqa: E402
from potrun.cli import main  # noqa: E402

ROWS = [{"id": i, "output": f"ans = {i} * 2", "answer": str(2 * i if i % 3 else 2 * i + 1)} for i in range(1, 31)]


def write_stream(path: Path, rows: list[dict[str, Any]]) -> None:
    table = pa.Table.from_pylist(rows)
    with pa.OSFile(str(path), "wb") as sink, pyarrow.ipc.new_stream(sink, table.schema) as writer:
        for batch in table.to_batches(max_chunksize=7):
            writer.write_batch(batch)


def save_to_disk(folder: Path, rows: list[dict[str, Any]], shards: int = 2) -> Path:
    folder.mkdir()
    names = [f"data-{n:05d}-of-{shards:05d}.arrow" for n in range(shards)]
    size = -(-len(rows) // shards)
    for n, name in enumerate(names):
        write_stream(folder / name, rows[n * size : (n + 1) * size])
    state = {"_data_files": [{"filename": name} for name in names], "_fingerprint": "0", "_split": "test"}
    (folder / "state.json").write_text(json.dumps(state))
    (folder / "dataset_info.json").write_text(json.dumps({"features": {}}))
    return folder


def test_a_save_to_disk_folder_is_read_row_by_row_in_order(tmp_path: Path) -> None:
    folder = save_to_disk(tmp_path / "gsm8k_test", ROWS, shards=3)
    items = list(read_records(folder))
    assert all(isinstance(item, Record) for item in items)
    assert [item.data for item in items] == ROWS  # type: ignore[union-attr]
    assert [item.line for item in items] == list(range(1, len(ROWS) + 1))


@pytest.mark.parametrize("kind", ["stream", "file"])
def test_an_arrow_file_in_either_ipc_format(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "data.arrow"
    if kind == "stream":
        write_stream(path, ROWS)
    else:
        table = pa.Table.from_pylist(ROWS)
        with pa.OSFile(str(path), "wb") as sink, pyarrow.ipc.new_file(sink, table.schema) as writer:
            writer.write_table(table)
    assert [item.data for item in read_records(path)] == ROWS  # type: ignore[union-attr]


def test_check_scores_a_save_to_disk_folder(tmp_path: Path) -> None:
    folder = save_to_disk(tmp_path / "ds", ROWS)
    summary = tmp_path / "summary.json"
    code = main(
        ["check", str(folder), "--quiet", "--workers", "1", "--summary-json", str(summary), "--out", "/dev/null"]
    )
    data = json.loads(summary.read_text())
    assert code == 0 and data["total"] == 30 and data["graded"] == 30
    assert data["correct"] == 20  # every third gold is off by one


def test_folders_that_are_not_one_say_what_they_are(tmp_path: Path) -> None:
    (tmp_path / "plain").mkdir()
    with pytest.raises(InputError, match=r"state\.json"):
        read_records(tmp_path / "plain")
    whole = tmp_path / "dict"
    whole.mkdir()
    (whole / "dataset_dict.json").write_text(json.dumps({"splits": ["train", "test"]}))
    save_to_disk(whole / "test", ROWS)
    with pytest.raises(InputError, match=r"DatasetDict.*dict/test"):
        read_records(whole)
    hostile = save_to_disk(tmp_path / "hostile", ROWS)
    (hostile / "state.json").write_text(json.dumps({"_data_files": [{"filename": "../../etc/passwd"}]}))
    with pytest.raises(InputError, match=r"not an \.arrow file"):
        read_records(hostile)
    (tmp_path / "notarrow.arrow").write_text('{"id": 1}\n')
    with pytest.raises(InputError, match="as Arrow"):
        read_records(tmp_path / "notarrow.arrow")


def test_a_truncated_shard_ends_in_one_bad_record(tmp_path: Path) -> None:
    folder = save_to_disk(tmp_path / "ds", ROWS, shards=1)
    shard = folder / "data-00000-of-00001.arrow"
    shard.write_bytes(shard.read_bytes()[: shard.stat().st_size // 2])
    items = list(read_records(folder))
    assert items and not isinstance(items[-1], Record)
    assert all(isinstance(item, Record) for item in items[:-1])


# -------------------------------------------------------------------------------- wildcards


@pytest.mark.parametrize("seed", range(5))
def test_a_wildcard_step_takes_every_choice(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(50):
        choices = [
            {"index": i, "message": {"role": "assistant", "content": f"ans = {rng.randint(0, 9)}"}}
            for i in range(rng.randint(1, 5))
        ]
        if rng.random() < 0.2:
            choices.append({"index": 99, "finish_reason": "length"})  # no message: left out
        record = {"response": {"choices": choices}}
        expected = [c["message"]["content"] for c in choices if "message" in c]
        assert field_value(record, "response.choices.*.message.content") == expected
        assert field_value(record, "response.choices.*.message.content.0", None) is None
    assert field_value({"a": {"*": 1}}, "a.*") == 1  # a literal key "*" is that key
    assert field_value({"a": {"x": {"v": 1}, "y": {"v": 2}}}, "a.*.v") == [1, 2]


def test_check_with_several_vllm_choices_scores_each(tmp_path: Path) -> None:
    """vLLM's n=3 response: the choices are the samples (pass@1 over them is the headline)."""
    records = [
        {"id": 1, "response": {"choices": [{"message": {"content": f"ans = {v}"}} for v in (4, 5, 4)]}, "answer": 4},
        {"id": 2, "response": {"choices": [{"message": {"content": f"ans = {v}"}} for v in (1, 2, 3)]}, "answer": 3},
    ]
    preds = tmp_path / "vllm.jsonl"
    preds.write_text("".join(json.dumps(r) + "\n" for r in records))
    out, summary = tmp_path / "out.jsonl", tmp_path / "s.json"
    args = ["check", str(preds), "--code-field", "response.choices.*.message.content", "--k", "1,3"]
    assert main([*args, "--quiet", "--workers", "1", "--out", str(out), "--summary-json", str(summary)]) == 0
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [line["samples"]["n"] for line in lines] == [3, 3]
    data = json.loads(summary.read_text())
    assert data["accuracy"] == pytest.approx((2 / 3 + 1 / 3) / 2, abs=1e-6)
    assert data["samples"]["pass@k"]["3"] == 1.0


def test_lm_eval_log_samples_with_repeats(tmp_path: Path) -> None:
    """lm-eval's --log_samples line (its evaluator writes doc_id, doc, target, arguments, resps,
    filtered_resps, ...): with repeats, `resps` holds one list per repeat; `resps.*.0` takes each."""
    target = "Natalia sold 48/2 = 24 clips in May.\n#### 72"
    line = {
        "doc_id": 0,
        "doc": {"question": "How many clips?", "answer": target},
        "target": target,
        "arguments": [["Question: How many clips?\nAnswer:", {"until": ["Question:"]}]],
        "resps": [["```python\nans = 48 + 24\n```"], ["```python\nans = 48 - 24\n```"]],
        "filtered_resps": ["```python\nans = 48 + 24\n```"],
        "exact_match": 1.0,
    }
    preds = tmp_path / "samples_gsm8k.jsonl"
    preds.write_text(json.dumps(line) + "\n")
    out, summary = tmp_path / "out.jsonl", tmp_path / "s.json"
    args = ["check", str(preds), "--code-field", "resps.*.0", "--gold-field", "target", "--id-field", "doc_id"]
    assert main([*args, "--quiet", "--workers", "1", "--out", str(out), "--summary-json", str(summary)]) == 0
    result = json.loads(out.read_text())
    assert result["samples"]["n"] == 2 and result["correct"] is True
    assert json.loads(summary.read_text())["accuracy"] == 0.5
