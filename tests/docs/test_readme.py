"""Every code block and command in README.md and docs/*.md is run here, or named in `ELSEWHERE` with the reason.

The README and each page of docs/ are read into items: each fenced Python block, each command line of an
indented block, each command in inline code (a span that starts with potrun, python, pip, bash, ray or
docker), and the indented blocks that are not commands (an output example, the layout). `test_every_item_is_accounted_for`
fails when the docs gain an item that no table here names, or lose one that a table names (an item
written on two pages is one item).

Python blocks run in a fresh interpreter with a temporary working directory holding a copy of
examples/ (and ../shared beside it, as in a checkout), and print what their comments say. Commands run
as `python -m potrun ...` in that directory.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from paths import REPO

README = REPO / "README.md"
DOCS = [README, *sorted((REPO / "docs").glob("*.md"))]  # the README, then the pages of the mkdocs site
SHARED = REPO.parent / "shared"
COMMAND_WORDS = ("potrun", "python", "pip", "bash", "ray", "docker")


@dataclass(frozen=True)
class Item:
    kind: str  # python, command, text
    line: int
    text: str
    path: Path = README


def docs_items(paths: list[Path]) -> list[Item]:
    """The items of every page, in order, each once (a command written twice, on one page or two, is one item)."""
    items = [item for path in paths for item in page_items(path)]
    seen: set[tuple[str, str]] = set()
    return [item for item in items if (item.kind, item.text) not in seen and not seen.add((item.kind, item.text))]


def page_items(path: Path) -> list[Item]:
    """One page's items, in order, each with the page it is on."""
    return [Item(item.kind, item.line, item.text, path) for item in readme_items(path.read_text(encoding="utf-8"))]


def readme_items(text: str) -> list[Item]:
    """A page's items, in order, each once (a command written twice is one item)."""
    lines = text.split("\n")
    items: list[Item] = []
    prose: list[str] = []
    i = 0
    while i < len(lines):
        fence = re.match(r"^(```|~~~)(\w*)\s*$", lines[i])
        if fence:
            end = next(j for j in range(i + 1, len(lines)) if lines[j].strip() == fence.group(1))
            items.append(Item(fence.group(2) or "text", i + 1, "\n".join(lines[i + 1 : end]) + "\n"))
            prose.extend([""] * (end + 1 - i))
            i = end + 1
            continue
        if re.match(r"^ {4,}\S", lines[i]) and (i == 0 or not lines[i - 1].strip()):
            end = i
            while end < len(lines) and re.match(r"^ {4,}\S", lines[end]):
                end += 1
            items.extend(_block_items(lines[i:end], i + 1))
            prose.extend([""] * (end - i))
            i = end
            continue
        prose.append(lines[i])
        i += 1
    items.extend(_inline_items("\n".join(prose)))
    seen: set[tuple[str, str]] = set()
    return [item for item in items if (item.kind, item.text) not in seen and not seen.add((item.kind, item.text))]


def _block_items(block: list[str], first_line: int) -> list[Item]:
    """An indented block: one item per command line; a block of no commands is one text item."""
    commands = []
    for n, line in enumerate(block, first_line):
        command = line.split("  #")[0].strip()
        if not command or command.startswith("#"):  # a comment that goes on from the line above
            continue
        if command.split(" ", 1)[0] in COMMAND_WORDS:
            commands.append(Item("command", n, command))
        elif commands:
            raise AssertionError(f"line {n}: a line in a command block that is not a command")
    return commands or [Item("text", first_line, block[0].strip())]


def _inline_items(prose: str) -> list[Item]:
    prose_without_fences = re.sub(r"(`{2,}).*?\1", lambda m: " " * len(m.group()), prose, flags=re.S)
    items = []
    for m in re.finditer(r"`([^`]+)`", prose_without_fences):
        span = " ".join(m.group(1).split())
        line = prose_without_fences.count("\n", 0, m.start()) + 1
        if span.split(" ", 1)[0] in COMMAND_WORDS and " " in span:
            items.append(Item("command", line, span))
        elif span.startswith(("for r in potrun", "from potrun")):
            items.append(Item("python-inline", line, span))
    return items


# -- what runs here --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A working directory like the repository's for the examples: examples/ in it, ../shared beside it."""
    root = tmp_path_factory.mktemp("readme")
    work = root / "potrun"
    shutil.copytree(REPO / "examples", work / "examples")
    if SHARED.exists():
        (root / "shared").symlink_to(SHARED)
    return work


def _run(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=900)


def _potrun(command: str, cwd: Path, extra: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    words = shlex.split(command)
    assert words[0] == "potrun"
    return _run([sys.executable, "-m", "potrun", *words[1:], *extra], cwd)


def _summary(cwd: Path) -> dict:
    return json.loads((cwd / "summary.json").read_text())


def _needs_shared() -> None:
    if not SHARED.exists():
        pytest.skip(f"the shared data is missing: {SHARED}")


def _gsm8k(out: subprocess.CompletedProcess[str], cwd: Path) -> None:
    assert out.returncode == 0, out.stderr
    assert round(_summary(cwd)["accuracy"], 4) == 0.7155


def _svamp(out: subprocess.CompletedProcess[str], cwd: Path) -> None:
    summary = _summary(cwd)
    assert out.returncode == 0 and (round(summary["accuracy"], 4), summary["skipped"]) == (0.8519, 3)


def _puzzles(out: subprocess.CompletedProcess[str], cwd: Path) -> None:
    summary = _summary(cwd)
    assert out.returncode == 0
    assert (summary["correct"], summary["scored"], summary["checklist_accuracy"]) == (6, 9, 0.6)


# The JSON line the docs show (docs/validation.md) for line 3 of examples/golds.jsonl ("..." stands for more fields).
VALIDATE_LINE_3 = {
    "line": 3,
    "id": "fin-003",
    "ok": False,
    "value": None,
    "problems": [
        {
            "code": "runtime_error",
            "severity": "error",
            "message": "ZeroDivisionError: float division by zero",
            "line": 6,
        }
    ],
}


def _validate_golds(out: subprocess.CompletedProcess[str], cwd: Path) -> None:
    assert out.returncode == 1  # some golds have errors
    lines = [json.loads(line) for line in (cwd / "report.jsonl").read_text().splitlines()]
    assert len(lines) == 5
    assert {key: lines[2][key] for key in VALIDATE_LINE_3} == VALIDATE_LINE_3
    assert "replaced by the executed value in fixed.jsonl" in out.stderr and (cwd / "fixed.jsonl").exists()


def _harness_file(total: int, scored: int, correct: int) -> Callable[[subprocess.CompletedProcess[str], Path], None]:
    """A harness-shaped example scored with flags alone: every record accounted for."""

    def check(out: subprocess.CompletedProcess[str], cwd: Path) -> None:
        summary = _summary(cwd)
        assert out.returncode == 0, out.stderr
        assert (summary["total"], summary["scored"], summary["correct"]) == (total, scored, correct)

    return check


def _exit_0(out: subprocess.CompletedProcess[str], cwd: Path) -> None:
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip()


def _version(out: subprocess.CompletedProcess[str], cwd: Path) -> None:
    from importlib.metadata import version

    assert out.returncode == 0 and out.stdout.strip() == f"potrun {version('potrun')}"


# command -> (arguments added, and why; the check of its result; needs the shared data)
RUN: dict[str, tuple[tuple[str, ...], Callable[[subprocess.CompletedProcess[str], Path], None], bool]] = {
    # At the default limit (20 s of CPU), bench/load_independence.py finds every record the same idle
    # and under a CPU hog: the slowest real programs (lines 826 and 856) stay clear of it.
    "potrun check ../shared/data/pot/gsm8k_fewshot_codex.jsonl --compare pot": (
        ("--quiet", "--summary-json", "summary.json"),
        _gsm8k,
        True,
    ),
    "potrun check ../shared/data/pot/svamp_fewshot_codex.jsonl --compare pot --abs": (
        ("--quiet", "--summary-json", "summary.json"),
        _svamp,
        True,
    ),
    "potrun validate examples/golds.jsonl --out report.jsonl --fix-answers fixed.jsonl": ((), _validate_golds, False),
    "potrun check examples/puzzles.jsonl --mode auto": (("--quiet", "--summary-json", "summary.json"), _puzzles, False),
    "potrun check examples/lm_eval_samples_gsm8k_cot.jsonl --mode cot --code-field resps.0.0 --gold-field target "
    "--id-field doc_id": (("--quiet", "--summary-json", "summary.json"), _harness_file(4, 4, 3), False),
    # one record's id is missing from the gold file: no_gold, counted, not in the accuracy
    "potrun check examples/openai_batch_output.jsonl --code-field response.body.choices.0.message.content "
    "--id-field custom_id --gold examples/openai_batch_golds.jsonl": (
        ("--quiet", "--summary-json", "summary.json"),
        _harness_file(5, 3, 2),
        False,
    ),
    "potrun doctor": ((), _exit_0, False),
    "potrun image build --help": ((), _exit_0, False),
    "potrun --version": ((), _version, False),
}

# The usage synopsis: placeholders in capitals and optional [--flags]; each runs as `--help`, which must
# name every flag the line shows.
SYNOPSIS = {
    "potrun check PREDS [--out results.jsonl] [--summary-json summary.json] [--compare PRESET[,PRESET]]",
    "potrun run PROGRAM.py",
    "potrun validate GOLDS",
    "potrun doctor [--backend docker] [--cleanup]",
    "potrun image build [--base B]",
    "potrun bench CORPUS",
    "potrun diff A.jsonl B.jsonl",
    "potrun serve [--host H] [--port 8080] [--workers N] [--token T]",
    "potrun report results.jsonl [--summary S.json] --html report.html",
}

# The Python blocks (by their first line) and what they print.
PYTHON = {
    "from potrun import Sandbox, compare": "ok 42 solution warm\nok 2 None\nok 2.5 None\nerror None ZeroDivisionError\n"
    "True\nTrue\n1\n",
    "from potrun.rewards import configure, pot_reward, shaped_pot_reward": "[1.0, 0.0, 0.0]\n[1.0, 0.1, 0.0]\n",
    "from potrun import CheckOptions, SandboxConfig, run_check": "11 10 0.5\n0.5 True\n",
    "from potrun.integrations import openrlhf, verl": "1.0\n{'score': 0.0, 'acc': False, 'pred': '24', 'status': 'ok'}\n"
    "{'rewards': [1.0], 'scores': [1.0], 'extra_logs': {'executed': [1.0]}}\n[0.0]\n",
}
PYTHON_INLINE = {'for r in potrun.validate("golds.jsonl"): r.ok, r.problems'}

# What runs elsewhere, or is no command at all, and why.
CI = "run by .ci/run (the editable install, .ci/lint, the tests) and .ci/check-wheel (the wheel in a fresh venv)"
DOCKER = "needs a Docker engine (and root, apt and a mirror for setup-docker.sh): run by .ci/run"
NETWORK = "downloads from a package index"
CLUSTER = "needs a Ray cluster of several machines (tests/check/test_ray.py runs the engine on a local instance)"
LONG = "a benchmark: minutes of machine time, its figure measured by hand (docs/performance.md)"
PROSE = "names a command or part of one in a sentence; nothing to run"
ELSEWHERE = {
    "pip install . && potrun check examples/docmath_outputs.jsonl": CI,
    "pip install -e '.[test]' && python -m pytest -n auto": CI,
    "python -m pytest -m soak": "the soaks (minutes each): the fault harness's GSM8K soak, the neighbours' larger sweep",
    "bash .ci/lint": CI,
    "pip install .": CI,
    "potrun image build": DOCKER,
    "bash .ci/setup-docker.sh": DOCKER,
    "potrun image build --base potrun-base:bookworm": DOCKER,
    "potrun doctor --cleanup": DOCKER,
    "python bench/docker_vs_process.py": DOCKER,
    "pip install 'potrun[ray]'": NETWORK,
    "pip install 'potrun[docker]'": NETWORK,
    "pip install 'potrun[parquet]'": NETWORK,
    "pip install 'potrun[zstd]'": NETWORK,
    "pip install 'potrun[math]'": NETWORK,
    "potrun validate --benchmark docmath": "names the option in a sentence; tests/benchmarks/test_benchmark_docmath.py runs it",
    "ray start --head": CLUSTER,
    "ray start --address HEAD:6379": CLUSTER,
    "potrun check PREDS --engine ray [--ray-address ADDR] [--ray-actors N] [--workers W]": CLUSTER,
    "python bench/scale.py --ray-records 50000": CLUSTER,
    "python bench/parent_memory.py": LONG,
    "python bench/idiom_corpus.py": "runs 2,545 programs in forks (minutes); tests/policies/test_idioms.py asserts the same"
    " refused set (the PoT part with -m slow)",
    "python bench/kill_latency.py": LONG,
    "python bench/replacement_stall.py --compare-with OLD.py": LONG,
    "python bench/seccomp_cost.py --compare-with OLD.py": LONG,
    "python bench/syscalls.py": LONG,
    "python bench/scale.py": LONG,
    "python bench/extract_speed.py": LONG,
    "python bench/threaded_rewards.py": LONG,
    "python bench/threaded_rewards.py [--harness executor] [--cached]": LONG,
    "python bench/handoff_floor.py [--work-us 86] [--work-in caller]": LONG,
    "python bench/small_batches.py": LONG,
    "python bench/fork_classes.py --programs 200 --rounds 3": LONG,
    "python bench/load_independence.py": LONG,
    "potrun bench ../shared/data/pot/gsm8k_fewshot_codex.jsonl --workers 2": LONG,
    "potrun bench ../shared/data/pot/gsm8k_fewshot_codex.jsonl --policy trusted --isolation fork": LONG,
    "potrun bench ../shared/data/pot/gsm8k_fewshot_codex.jsonl --isolation fork": LONG,
    "potrun check results.jsonl --benchmark longdocurl --out scored.jsonl --summary-json summary.json": "a placeholder; tests/benchmarks/test_benchmark_*.py run --benchmark on every benchmark's samples",
    "potrun check FILE --benchmark NAME": PROSE,
    "potrun check ../shared/data/pot/gsm8k_fewshot_codex.jsonl --compare pot --summary-json s.json --out r.jsonl": "its figures come from the reproduction runs above (RUN); tests/check/test_summary.py checks the intervals",
    "potrun diff pot.jsonl default.jsonl": "tests/reports/test_diff.py runs potrun diff on two runs with known changes",
    "pip install 'potrun[report]' && potrun report r.jsonl --summary s.json --html report.html": "tests/reports/test_html.py makes the report of a GSM8K run and opens it in Chromium",
    "potrun diff": PROSE,
    "potrun serve": PROSE,
    "potrun check --out": PROSE,
    "pip install 'potrun[serve]' && potrun serve --port 8080": "a server that runs until stopped: tests/service/test_service.py starts it on a random port of 127.0.0.1 and calls it",
    "potrun serve --host 0.0.0.0 --token T": "binds beyond loopback (tests stay on 127.0.0.1): tests/service/test_service.py checks the refusal without a token",
    "python bench/serve_vs_sandboxfusion.py": LONG,
    "potrun report": PROSE,
    "potrun check preds.jsonl": "a placeholder for the user's file (the bundled example runs in .ci/check-wheel)",
    "potrun validate ../shared/data/pot/gsm8k_fewshot_codex.jsonl --program-field generated --answer-field answer "
    "--compare pot": "tests/validation/test_validate.py::test_gsm8k_pot_programs_as_golds runs it (one run of the 1,318 "
    "programs, not two) and checks each record and the README's figures (943 pass, 351 wrong_answer)",
    "potrun check PREDS --out FILE --resume": "a placeholder; resuming is tested in tests/check/test_durability.py",
    "pip install -e '.[docs]'": NETWORK,
    "pip install -e '.[docs]' && mkdocs serve": "a web server that runs until stopped; tests/docs/test_docs.py builds the site with mkdocs build --strict",
    "potrun check": PROSE,
    "python -m potrun": PROSE,
    "python -m pytest -n 2": "names the fast loop's runner in a sentence (its paths are .ci/run-py313's FAST list)",
    "python bench/seccomp_cost.py": LONG,
    "python -s -P -m potrun.sandbox.inside.worker": "the worker's command line: the pool starts it in every sandbox test",
    "python -c": PROSE,
    "docker run": PROSE,
    "docker build": PROSE,
    "potrun validate": PROSE,
    "potrun bench": PROSE,
}
# Indented blocks that are not commands: checked by the tests named.
TEXT = {
    '{"line": 3, "id": "fin-003", "ok": false, "problems": [{"code": "runtime_error", "severity": "error",': "test_validate_output_example",
    "potrun/ ": "tests/docs/test_docs.py: test_the_layout_list_is_the_tree",
    "model output --extract--> program / answer text --execute in a sandbox--> typed value --compare--> verdict": "the pipeline drawn in words on the docs' home page",
    "paired records graded in both runs: 1318 (unpaired: 0 in A, 0 in B; not graded in one or both: 0)": "potrun diff's output on the GSM8K runs of --compare pot and default, as printed; tests/reports/test_diff.py checks its lines on runs with known changes",
    "# verl (trainer config): the batch manager is the fastest, one batch through the pool": "tests/service/test_integrations.py: verl's loader of custom_reward_function.path and name",
    "# OpenRLHF: the reward function file, or `potrun serve` and --remote_rm_url http://HOST:PORT/openrlhf/reward": "tests/service/test_integrations.py: OpenRLHF's loader of a --remote_rm_url file",
    "zcat preds.jsonl.gz | potrun check - --out - > results.jsonl      # or /dev/stdin, /dev/stdout": "tests/check/test_input.py: test_stdin_is_read_as_it_comes_and_stdout_gets_the_lines, test_a_gzip_stream_on_stdin_and_dev_stdout",
}

ITEMS = docs_items(DOCS)


def test_every_item_is_accounted_for() -> None:
    found = {(item.kind, item.text) for item in ITEMS}
    named = (
        {("command", c) for c in [*RUN, *SYNOPSIS, *ELSEWHERE]}
        | {("python", p) for p in PYTHON}
        | {("python-inline", p) for p in PYTHON_INLINE}
        | {("text", t) for t in TEXT}
    )
    python_blocks = {(item.kind, item.text.split("\n", 1)[0]) for item in ITEMS if item.kind == "python"}
    # a text block is named by its first line, or by the start of it (the layout list: "potrun/" and its role)
    text_blocks = {
        ("text", next((t for t in TEXT if text.startswith(t)), text)) for kind, text in found if kind == "text"
    }
    found = {f for f in found if f[0] not in ("python", "text")} | python_blocks | text_blocks
    assert sorted(found - named) == [], "items of the docs that no table in this file names"
    assert sorted(named - found) == [], "items named in this file that the docs no longer have"


@pytest.mark.parametrize("first_line", sorted(PYTHON))
def test_python_block(first_line: str, checkout: Path) -> None:
    (block,) = [item for item in ITEMS if item.kind == "python" and item.text.startswith(first_line + "\n")]
    out = _run([sys.executable, "-c", block.text], checkout)
    assert out.returncode == 0, out.stderr
    assert out.stdout == PYTHON[first_line]


def test_inline_python(checkout: Path) -> None:
    shutil.copy(checkout / "examples" / "golds.jsonl", checkout / "golds.jsonl")
    (snippet,) = PYTHON_INLINE
    loop, body = snippet.split(": ", 1)
    out = _run([sys.executable, "-c", f"import potrun\n{loop}:\n    print({body})"], checkout)
    assert out.returncode == 0, out.stderr
    assert len(out.stdout.splitlines()) == 5 and out.stdout.startswith("True ()")


@pytest.mark.parametrize("command", [pytest.param(c, marks=pytest.mark.slow) if RUN[c][2] else c for c in RUN])
def test_command(command: str, checkout: Path) -> None:
    extra, check, needs_shared = RUN[command]
    if needs_shared:
        _needs_shared()
    check(_potrun(command, checkout, extra), checkout)


@pytest.mark.parametrize("command", sorted(SYNOPSIS))
def test_synopsis_line(command: str, checkout: Path) -> None:
    words = [w for w in command.split() if w.islower() and not w.startswith("[")]  # the subcommand
    out = _potrun(" ".join(words), checkout, ("--help",))
    assert out.returncode == 0, out.stderr
    for flag in re.findall(r"\[(--[a-z-]+)", command):
        assert flag in out.stdout, flag


def test_validate_output_example() -> None:
    """The docs' line is the real line 3 (test_command checks the file), written as it is written."""
    (item,) = [item for item in ITEMS if item.kind == "text" and item.text.startswith('{"line": 3')]
    shown = item.path.read_text(encoding="utf-8").split("\n")[item.line - 1 : item.line + 1]
    text = " ".join(" ".join(shown).split())
    for key, value in VALIDATE_LINE_3.items():
        if key != "problems":
            assert f'"{key}": {json.dumps(value)}' in text
    for key, value in VALIDATE_LINE_3["problems"][0].items():  # type: ignore[index]
        assert f'"{key}": {json.dumps(value)}' in text
