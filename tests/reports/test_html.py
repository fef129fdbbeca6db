"""`potrun report`: the HTML of a real PoT GSM8K run opened in headless Chromium (it renders, a
screenshot is taken, the charts are in the DOM, the headline is the summary's), the markdown variant,
and a hostile value that must stay text."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from paths import SHARED

from potrun.cli import main

GSM8K = SHARED / "pot" / "gsm8k_fewshot_codex.jsonl"
SLICE = 300  # records of the GSM8K file: enough for every chart, quick on a shared machine
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

pytest.importorskip("matplotlib", reason="the report extra (matplotlib) draws the HTML report's charts")


def chromium_or_skip() -> str:
    if CHROMIUM is None:
        if os.environ.get("POTRUN_REQUIRE_CHROMIUM") == "1":
            pytest.fail("POTRUN_REQUIRE_CHROMIUM=1 but chromium is not installed (.ci/run installs it)")
        pytest.skip("chromium is not installed (apt-get install chromium; .ci/run does it)")
    return CHROMIUM


def headless(chromium: str, profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Chromium headless with a profile of its own (root needs --no-sandbox), console messages on stderr."""
    command = [chromium, "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={profile}"]
    command += ["--enable-logging=stderr", "--v=0", "--hide-scrollbars", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)


@pytest.fixture(scope="module")
def gsm8k_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """`potrun check` on the first SLICE records of the PoT GSM8K generations: its --out and summary."""
    if not GSM8K.exists():
        pytest.skip(f"the shared data is missing: {GSM8K}")
    root = tmp_path_factory.mktemp("gsm8k")
    preds = root / "gsm8k.jsonl"
    preds.write_text("".join(GSM8K.read_text(encoding="utf-8").splitlines(keepends=True)[:SLICE]), encoding="utf-8")
    out, summary = root / "results.jsonl", root / "summary.json"
    args = ["check", str(preds), "--compare", "pot,default", "--out", str(out), "--summary-json", str(summary)]
    assert main([*args, "--quiet", "--workers", "2"]) == 0
    return out, summary


def test_html_report_renders_in_chromium_with_its_charts_and_the_summarys_headline(
    gsm8k_run: tuple[Path, Path], tmp_path: Path
) -> None:
    chromium = chromium_or_skip()
    out, summary_path = gsm8k_run
    report = tmp_path / "report.html"
    assert main(["report", str(out), "--summary", str(summary_path), "--html", str(report)]) == 0
    summary = json.loads(summary_path.read_text())

    shot = tmp_path / "report.png"
    shown = headless(
        chromium, tmp_path / "profile-shot", f"--screenshot={shot}", "--window-size=1200,2400", report.as_uri()
    )
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000
    dumped = headless(chromium, tmp_path / "profile-dom", "--dump-dom", report.as_uri())
    assert dumped.returncode == 0, dumped.stderr[-2000:]
    for stderr in (shown.stderr, dumped.stderr):  # no script error, no blocked fetch (the CSP would log it)
        assert "CONSOLE" not in stderr and "Refused to" not in stderr, stderr[-2000:]
    dom = dumped.stdout

    charts = re.findall(r'<figure class="chart"><svg\b', dom)
    # presets, statuses, error types, wall and CPU histograms: each an SVG the browser parsed
    assert len(charts) == 5 + (0 if summary["error_type_counts"] else -1)
    assert dom.count("<rect") + dom.count("<path") > 50  # bars and axes drawn, not empty figures
    headline = re.search(r'<span id="headline-accuracy">([^<]*)</span>', dom)
    assert headline is not None and headline.group(1) == f"{summary['accuracy']:.4f}"
    low, high = summary["accuracy_ci95"]
    assert f"95% CI [{low:.4f}, {high:.4f}]" in dom
    for table in ("presets", "status", "slowest", "failures", "run"):
        assert f'<h2 id="{table}">' in dom
    assert summary["run"]["inputs"]["preds"]["sha256"] in dom
    assert "<script" not in dom and " src=" not in dom and 'href="http' not in dom  # nothing fetched at view time


def test_markdown_report_has_the_tables_and_no_chart(gsm8k_run: tuple[Path, Path], tmp_path: Path) -> None:
    out, summary_path = gsm8k_run
    markdown = tmp_path / "report.md"
    assert main(["report", str(out), "--summary", str(summary_path), "--markdown", str(markdown)]) == 0
    text = markdown.read_text()
    summary = json.loads(summary_path.read_text())
    assert f"**Accuracy {summary['accuracy']:.4f}**" in text
    assert "## Accuracy by comparator preset" in text and "| pot | " in text and "| default | " in text
    assert f"| ok | {summary['status_counts']['ok']} |" in text
    assert "<svg" not in text


def test_without_a_summary_the_report_is_rebuilt_from_the_results(gsm8k_run: tuple[Path, Path], tmp_path: Path) -> None:
    out, summary_path = gsm8k_run
    markdown = tmp_path / "report.md"
    assert main(["report", str(out), "--markdown", str(markdown)]) == 0
    text = markdown.read_text()
    summary = json.loads(summary_path.read_text())
    assert f"**Accuracy {summary['accuracy']:.4f}**" in text  # the deciding verdicts are in --out
    assert "give the run's --summary-json" in text  # the run record only the run knew


def test_breakdown_chart_and_a_hostile_value_that_stays_text(tmp_path: Path) -> None:
    records = [
        {"id": 1, "source": "finance", "output": "ans = 5", "answer": 5},
        {"id": 2, "source": "finance", "output": "ans = '<img src=x onerror=alert(1)>|**x**'", "answer": 5},
        {"id": 3, "source": "<b>science</b>", "output": "ans = 5", "answer": 5},
    ]
    preds = tmp_path / "preds.jsonl"
    preds.write_text("".join(json.dumps(r) + "\n" for r in records))
    out, summary = tmp_path / "out.jsonl", tmp_path / "summary.json"
    args = ["check", str(preds), "--by", "source", "--out", str(out), "--summary-json", str(summary), "--quiet"]
    assert main([*args, "--workers", "1"]) == 0
    html_path, markdown = tmp_path / "r.html", tmp_path / "r.md"
    assert main(["report", str(out), "--summary", str(summary), "--html", str(html_path)]) == 0
    assert main(["report", str(out), "--summary", str(summary), "--markdown", str(markdown)]) == 0
    page = html_path.read_text()
    assert "<img" not in page and "<b>science" not in page
    assert "&lt;img src=x onerror=alert(1)&gt;" in page and "&lt;b&gt;science&lt;/b&gt;" in page
    assert page.count("<svg") == 5  # presets, source, statuses, the two histograms (no error type)
    assert "Accuracy by source" in page
    text = markdown.read_text()
    assert "\\<img src=x onerror=alert(1)\\>\\|\\*\\*x\\*\\*" in text
    assert re.search(r"(?<!\\)[<>]", text) is None  # no raw markup: every angle bracket escaped
    assert "| finance | 0.5000 | 2 | 1 |" in text


def test_report_needs_one_format_and_a_readable_results_file(tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["report", str(tmp_path / "results.jsonl")])
    assert exited.value.code == 2
    assert main(["report", str(tmp_path / "missing.jsonl"), "--markdown", str(tmp_path / "r.md")]) == 2
