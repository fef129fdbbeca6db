"""The wheel holds what an installed potrun needs outside a source tree: Dockerfile.sandbox (package
data of potrun.sandbox, a link to the top-level file) and `python -m potrun`. `.ci/check-wheel` installs
the wheel in a fresh virtual environment and runs the README's main command with it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from paths import REPO

from potrun.tools.image import DOCKERFILE, find_dockerfile


def test_the_dockerfile_has_one_home() -> None:
    link = REPO / "sandbox" / DOCKERFILE
    assert link.is_symlink() and os.readlink(link) == f"../{DOCKERFILE}"
    assert find_dockerfile().read_bytes() == (REPO / DOCKERFILE).read_bytes()


def test_the_wheel_contains_the_dockerfile_and_main(tmp_path: Path) -> None:
    source = tmp_path / "src"  # a copy: building in the repository would leave build/ behind
    shutil.copytree(
        REPO,
        source,
        symlinks=True,
        ignore=shutil.ignore_patterns(".git", "build", "*.egg-info", "__pycache__", "cache"),
    )
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",  # build isolation: setuptools and wheel from the index, as a user's pip does
            "-q",
            "-w",
            str(tmp_path / "dist"),
            str(source),
        ],
        check=True,
        cwd=tmp_path,
    )
    (wheel,) = (tmp_path / "dist").glob("potrun-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        assert archive.read(f"potrun/sandbox/{DOCKERFILE}") == (REPO / DOCKERFILE).read_bytes()
    assert {"potrun/__main__.py", "potrun/py.typed", "potrun/sandbox/inside/worker.py"} <= names
