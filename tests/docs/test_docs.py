"""The docs hold together: every page is in the site's nav, every link between pages (and to a heading)
resolves, the site builds, and the developer guide's layout list is the tree, both ways.

tests/docs/test_readme.py runs the pages' examples and commands; this file checks their structure. The
layout list is read from the guide and the tree from disk, so a module added, split or moved fails here
until the guide says where it lives and what it is for.
"""

from __future__ import annotations

import re
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest

REPO = next(folder for folder in Path(__file__).resolve().parents if (folder / "pyproject.toml").exists())
DOCS = REPO / "docs"
GUIDE = DOCS / "developer.md"
PACKAGES = ("potrun", "sandbox", "extractors", "policies")  # the folders that install as potrun.*
PAGES_WITH_LINKS = [REPO / "README.md", REPO / "CONTRIBUTING.md", *sorted(DOCS.glob("*.md"))]


def _nav_pages(nav: object) -> list[str]:
    """The page files named anywhere in mkdocs.yml's nav (a list of {title: page or nested list})."""
    if isinstance(nav, str):
        return [nav]
    if isinstance(nav, list):
        return [page for entry in nav for page in _nav_pages(entry)]
    if isinstance(nav, dict):
        return [page for value in nav.values() for page in _nav_pages(value)]
    raise AssertionError(f"unexpected nav entry: {nav!r}")


def test_every_page_is_in_the_nav_and_every_nav_entry_is_a_page() -> None:
    yaml = pytest.importorskip("yaml")  # PyYAML comes with mkdocs (the test and docs extras)
    config = yaml.safe_load((REPO / "mkdocs.yml").read_text(encoding="utf-8"))
    in_nav = _nav_pages(config["nav"])
    on_disk = sorted(str(page.relative_to(DOCS)) for page in DOCS.rglob("*.md"))
    assert len(in_nav) == len(set(in_nav)), "a page is in the nav twice"
    assert sorted(in_nav) == on_disk


def _prose(text: str) -> str:
    """The text outside fenced and indented code blocks and inline code, where links are links."""
    text = re.sub(r"^(```|~~~).*?^\1\s*$", "", text, flags=re.S | re.M)
    text = re.sub(r"(?m)^(?: {4}|\t).*$", "", text)
    return re.sub(r"(`+).+?\1", "", text, flags=re.S)


def slug(heading: str) -> str:
    """A heading's anchor as Python-Markdown's toc (mkdocs) and GitHub make it, for the headings written here."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text
    text = text.replace("`", "").replace("*", "")
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def anchors(page: Path) -> set[str]:
    text = re.sub(r"^(```|~~~).*?^\1\s*$", "", page.read_text(encoding="utf-8"), flags=re.S | re.M)
    return {slug(m.group(1)) for m in re.finditer(r"(?m)^#{1,6} +(.+?) *#*$", text)}


def links(page: Path) -> list[str]:
    return re.findall(r"\]\(([^)\s]+)\)", _prose(page.read_text(encoding="utf-8")))


def test_the_link_checker_reads_links_and_anchors() -> None:
    """The checker below finds what it must: a slug of a heading with code, a link, none inside code."""
    assert slug("The service: `potrun serve`") == "the-service-potrun-serve"
    assert slug("What a fork costs, and how it is kept low") == "what-a-fork-costs-and-how-it-is-kept-low"
    assert slug("Where the official code is wrong: `--strict`") == "where-the-official-code-is-wrong-strict"
    text = "see [Tiers](sandbox.md#tiers) and `[not](a-link.md)`\n\n    [nor](this.md)\n"
    assert re.findall(r"\]\(([^)\s]+)\)", _prose(text)) == ["sandbox.md#tiers"]


@pytest.mark.parametrize("page", PAGES_WITH_LINKS, ids=lambda page: str(page.relative_to(REPO)))
def test_every_relative_link_resolves(page: Path) -> None:
    """A link to another page names a file that exists, and its #anchor a heading of that file."""
    broken = []
    for target in links(page):
        if re.match(r"[a-z]+:", target):  # https:, mailto: (not checked here: no network)
            continue
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        if not resolved.exists():
            broken.append(f"{target}: no file {resolved}")
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            broken.append(f"{target}: no heading #{anchor} in {resolved.name}")
    assert broken == []


def test_the_site_builds_without_a_warning(tmp_path: Path) -> None:
    """mkdocs build --strict: a page outside the nav, a broken link or a missing anchor fails the build."""
    pytest.importorskip("mkdocs", reason="mkdocs is in the test and docs extras: pip install -e '.[test]'")
    out = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "site" / "sandbox" / "index.html").exists()


# -- the layout list ---------------------------------------------------------------------------------------


def layout_list(guide: str) -> dict[str, str]:
    """The developer guide's layout block: each listed path (folders end with /) -> its line of role.

    The block is the indented one under "## Layout"; nesting is by indentation; a top-level entry that is
    not one of the packages (tests/, examples/, ...) is named, not listed."""
    section = guide[guide.index("\n## Layout\n") :]
    lines = section.split("\n")
    start = next(i for i, line in enumerate(lines) if line.startswith("    ") and line.strip())
    listed: dict[str, str] = {}
    folders: list[tuple[int, str]] = []  # (indent, name) of the folders enclosing a line
    for line in lines[start:]:
        if not line.startswith("    "):
            break
        indent = len(line) - len(line.lstrip())
        name, _, role = line.strip().partition(" ")
        while folders and folders[-1][0] >= indent:
            folders.pop()
        if not folders and name.rstrip("/") not in PACKAGES:
            continue
        path = "/".join([folder for _, folder in folders] + [name])
        listed[path] = role.strip()
        if name.endswith("/"):
            folders.append((indent, name.rstrip("/")))
    return listed


def tree() -> set[str]:
    """Every module of the packages, and every folder that holds one (folders end with /)."""
    modules = {path.relative_to(REPO) for top in PACKAGES for path in (REPO / top).rglob("*.py")}
    folders = {parent for module in modules for parent in module.parents if parent != Path(".")}
    return {str(module) for module in modules} | {f"{folder}/" for folder in folders}


def test_the_layout_list_is_the_tree() -> None:
    """The guide lists every module and folder of the packages, each with its role, and nothing else."""
    listed = layout_list(GUIDE.read_text(encoding="utf-8"))
    on_disk = tree()
    assert sorted(set(listed) - on_disk) == [], "listed in docs/developer.md, not in the tree"
    assert sorted(on_disk - set(listed)) == [], "in the tree, not listed in docs/developer.md's Layout"
    assert [path for path, role in listed.items() if not role] == [], "listed without its role"


def test_the_layout_reader_reads_nesting() -> None:
    guide = "\n## Layout\n\nOne module:\n\n    potrun/\n      a.py   role a\n      sub/\n        b.py  role b\n      c.py  role c\n    tests/  examples/\n\nafter\n"
    assert layout_list(guide) == {
        "potrun/": "",
        "potrun/a.py": "role a",
        "potrun/sub/": "",
        "potrun/sub/b.py": "role b",
        "potrun/c.py": "role c",
    }
