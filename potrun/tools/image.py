"""Build the potrun sandbox image (build tooling: the runtime's docker backend only runs the image).

The image is built from ``Dockerfile.sandbox`` in a throwaway build context that holds nothing but
that file, a ``.dockerignore`` and a ``wheels/`` folder filled on the host:

    wheels/potrun-*.whl       built from the source tree (or repacked from the installed distribution)
    wheels/numpy-*.whl ...    ``pip download``-ed for the image's Python, glibc and CPU architecture
    wheels/pip-*.whl          runs pip inside the build (bases without pip, e.g. Debian's python3)

so ``docker build`` itself needs no network (it runs with ``--network none``) and no registry once the
base image is present. ``BASE`` is a build argument: ``python:3.12-slim`` by default, for users with a
registry; ``.ci/setup-docker.sh`` uses ``potrun-base:bookworm``, imported from a debootstrap root
filesystem, where no registry is reachable.

Only the worker's runtime dependencies go into the image (numpy, RestrictedPython; ``--with sympy``
adds more): potrun itself is installed ``--no-deps``, so regex and rich, which the host-side
extractors and CLI use, stay out of the sandbox.

Usage::

    potrun image build [--base IMAGE] [--tag TAG] [--python 3.11] [--with sympy]
    potrun image context DIR      # only write the build context
    potrun image exists [TAG]     # exit status 0 when the image is present, 1 when not

(`python -m potrun.tools.image ...` runs the same command.)

Standard library only; it calls the ``docker`` CLI through subprocess. The image's tag and label
are the docker backend's (``potrun.sandbox.parent.docker``); the Dockerfile is package data of
``potrun.sandbox``, next to the backend that runs it.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import importlib.metadata
import io
import json
import os
import platform as _platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import potrun.sandbox
from potrun.sandbox.parent.docker import CODE_LABEL, DEFAULT_IMAGE, SANDBOX_LABEL, code_fingerprint
from potrun.types import ImageBuildError, SandboxUnavailable

DEFAULT_BASE = "python:3.12-slim"  # Dockerfile.sandbox's own default for ARG BASE
DOCKERFILE = "Dockerfile.sandbox"
RUNTIME_PACKAGES = ("numpy", "RestrictedPython")
DEFAULT_PYTHON = "3.11"
DEFAULT_GLIBC = "2.36"  # Debian bookworm, the oldest base we build on

# Copied from the source tree into a temporary directory before `pip wheel`, so the build writes
# nothing (build/, *.egg-info) into the repository.
_SOURCE_IGNORE = shutil.ignore_patterns(
    ".git",
    ".ci",
    "__pycache__",
    "*.pyc",
    "build",
    "dist",
    "*.egg-info",
    ".venv",
    ".pytest_cache",
    "tests",
    "bench",
    "wheels",
    "results*.jsonl",
    "summary*.json",
)


def _log(message: str) -> None:
    print(f"[potrun image] {message}", file=sys.stderr, flush=True)


def _run(cmd: list[str], step: str, **kwargs: Any) -> subprocess.CompletedProcess[Any]:
    """Run a build step; its failure is an ImageBuildError (the step printed why above)."""
    _log("$ " + " ".join(cmd))
    try:
        return subprocess.run(cmd, check=True, **kwargs)
    except subprocess.CalledProcessError as exc:
        raise ImageBuildError(f"{step} failed (exit {exc.returncode}); see the output above") from exc


# --------------------------------------------------------------------------------------- docker


def _docker_cli() -> str:
    docker = shutil.which("docker")
    if docker is None:
        raise SandboxUnavailable(
            "the docker CLI is not installed: install Docker (on Debian: apt-get install docker.io) "
            "or run .ci/setup-docker.sh"
        )
    return docker


def ensure_engine() -> str:
    """Return the path of the docker CLI; raise SandboxUnavailable unless an engine answers."""
    docker = _docker_cli()
    try:
        proc = subprocess.run(
            [docker, "version", "--format", "{{.Server.Version}}"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except subprocess.TimeoutExpired as exc:
        raise SandboxUnavailable("the Docker engine did not answer within 30 s") from exc
    if proc.returncode != 0:
        detail = (proc.stderr or proc.stdout).strip().splitlines()
        raise SandboxUnavailable(
            "no Docker engine is reachable"
            + (f" ({detail[-1]})" if detail else "")
            + ": start dockerd (see .ci/setup-docker.sh) or set DOCKER_HOST"
        )
    return docker


def image_exists(tag: str = DEFAULT_IMAGE) -> bool:
    """True when the engine has an image called `tag`; SandboxUnavailable when it cannot be asked."""
    docker = _docker_cli()
    proc = subprocess.run([docker, "image", "inspect", "--format", "{{.Id}}", tag], capture_output=True, text=True)
    if proc.returncode == 0:
        return True
    if re.search(r"no such (image|object)", proc.stderr, re.IGNORECASE):
        return False
    ensure_engine()  # raises with a clear message when the engine is the problem
    raise SandboxUnavailable(f"docker image inspect {tag} failed: {proc.stderr.strip()}")


def detect_base(base: str) -> tuple[str | None, str | None]:
    """(python X.Y, glibc X.Y) of a base image present locally, else guesses from its name."""
    docker = _docker_cli()
    if image_exists(base):
        probe = "import platform, sys; print('%d.%d' % sys.version_info[:2], platform.libc_ver()[1] or '')"
        proc = subprocess.run(
            [docker, "run", "--rm", "--network", "none", "--entrypoint", "python3", base, "-I", "-c", probe],
            capture_output=True,
            text=True,
            timeout=120,
        )
        if proc.returncode == 0 and proc.stdout.split():
            fields = proc.stdout.split()
            return fields[0], (fields[1] if len(fields) > 1 else None)
        _log(f"could not run python3 in {base}: {proc.stderr.strip()}")
    match = re.match(r"(?:.*/)?python:(\d+\.\d+)", base)
    return (match.group(1) if match else None), None


# ---------------------------------------------------------------------------------- the wheels


def _is_potrun_source(root: Path) -> bool:
    pyproject = root / "pyproject.toml"
    if not pyproject.is_file() or not (root / "potrun" / "types.py").is_file():
        return False
    return re.search(r'(?m)^name\s*=\s*"potrun"', pyproject.read_text(encoding="utf-8")) is not None


def find_dockerfile() -> Path:
    """Dockerfile.sandbox: package data of potrun.sandbox in an installed wheel (in a source tree, the
    link sandbox/Dockerfile.sandbox to the top-level file). Raises SandboxUnavailable without it."""
    packaged = Path(potrun.sandbox.__file__).resolve().parent / DOCKERFILE
    if packaged.is_file():
        return packaged
    raise SandboxUnavailable(f"{DOCKERFILE} is missing from the potrun installation ({packaged}): reinstall potrun")


def find_source_root() -> Path | None:
    """The potrun source tree: next to this file's real location, or an editable install's; else None."""
    here = Path(__file__).resolve().parents[2]  # potrun/tools/image.py -> the repository root
    if _is_potrun_source(here):
        return here
    try:
        dist = importlib.metadata.distribution("potrun")
    except importlib.metadata.PackageNotFoundError:
        return None
    # An editable install runs the source tree itself; a regular install is repacked as installed
    # (its source directory, if any, may have changed since), so the image runs what the host runs.
    direct_url = json.loads(dist.read_text("direct_url.json") or "{}")
    if direct_url.get("dir_info", {}).get("editable"):
        url = direct_url.get("url", "")
        if url.startswith("file://"):
            root = Path(unquote(urlparse(url).path))
            if _is_potrun_source(root):
                return root
    return None


def build_potrun_wheel(wheels: Path) -> Path:
    """Put a potrun wheel into `wheels`: built from the source tree, else repacked from site-packages."""
    wheels.mkdir(parents=True, exist_ok=True)
    root = find_source_root()
    if root is None:
        _log("no potrun source tree found: repacking the installed distribution")
        return repack_installed("potrun", wheels)
    with tempfile.TemporaryDirectory(prefix="potrun-src-") as tmp:
        src = Path(tmp) / "potrun"
        shutil.copytree(root, src, ignore=_SOURCE_IGNORE)
        before = set(wheels.glob("potrun-*.whl"))
        _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(wheels), str(src)], "pip wheel")
    built = sorted(set(wheels.glob("potrun-*.whl")) - before) or sorted(wheels.glob("potrun-*.whl"))
    if not built:
        raise ImageBuildError(f"pip wheel left no potrun wheel in {wheels}")
    return built[-1]


def _record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"sha256={digest}"


def repack_installed(name: str, wheels: Path) -> Path:
    """Rebuild a wheel from an installed (non-editable) distribution's files, as listed in RECORD."""
    dist = importlib.metadata.distribution(name)
    files = dist.files or []
    meta = dist.metadata
    dist_name = re.sub(r"[-_.]+", "_", meta["Name"])
    version = meta["Version"]
    wheel_meta = dist.read_text("WHEEL") or ""
    tags = re.findall(r"(?m)^Tag:\s*(\S+)", wheel_meta) or ["py3-none-any"]
    out = wheels / f"{dist_name}-{version}-{tags[0]}.whl"
    skip_meta = {"RECORD", "INSTALLER", "REQUESTED", "direct_url.json"}
    dist_info = None
    record: list[tuple[str, str, str]] = []
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        for file in files:
            arcname = file.as_posix()
            parts = file.parts
            if arcname.startswith("..") or "__pycache__" in parts or arcname.endswith(".pyc"):
                continue  # console scripts outside site-packages, bytecode
            if parts[0].endswith(".dist-info"):
                dist_info = parts[0]
                if parts[-1] in skip_meta:
                    continue
            path = Path(file.locate())
            if not path.is_file():
                continue
            data = path.read_bytes()
            zf.writestr(arcname, data)
            record.append((arcname, _record_hash(data), str(len(data))))
        if dist_info is None:
            raise ImageBuildError(f"{name}: installed distribution lists no .dist-info files")
        if not any(r[0] == f"{dist_info}/WHEEL" for r in record):
            raise ImageBuildError(f"{name}: installed distribution has no WHEEL file; cannot repack")
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerows(record)
        writer.writerow((f"{dist_info}/RECORD", "", ""))
        zf.writestr(f"{dist_info}/RECORD", buf.getvalue())
    return out


def host_arch() -> str:
    machine = _platform.machine().lower()
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(machine, machine)


def platform_tags(arch: str | None = None, glibc: str = DEFAULT_GLIBC) -> list[str]:
    """pip --platform values for a Linux image with this glibc: newest manylinux first."""
    arch = arch or host_arch()
    major, minor = (int(x) for x in glibc.split(".")[:2])
    if major != 2 or minor < 17:
        raise ValueError(f"unsupported glibc {glibc}: manylinux wheels need glibc 2.17 or newer")
    tags = [f"manylinux_2_{m}_{arch}" for m in range(minor, 16, -1)]
    tags.append(f"manylinux2014_{arch}")
    return tags


def _host_pins(packages: tuple[str, ...]) -> list[str]:
    """`numpy==<host version>` for each package the host has, so both backends run the same versions."""
    pins = []
    for package in packages:
        if re.search(r"[=<>!~ ;\[]", package):
            pins.append(package)  # already a requirement specifier
            continue
        try:
            pins.append(f"{package}=={importlib.metadata.version(package)}")
        except importlib.metadata.PackageNotFoundError:
            pins.append(package)
    return pins


def download_wheels(
    wheels: Path,
    requirements: list[str],
    *,
    python_version: str,
    platform: str | None,
    glibc: str,
) -> None:
    major_minor = "".join(python_version.split(".")[:2])
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--quiet",
        "--disable-pip-version-check",
        "-d",
        str(wheels),
        "--only-binary=:all:",
        "--python-version",
        python_version,
        "--implementation",
        "cp",
        "--abi",
        f"cp{major_minor}",
    ]
    for tag in [platform] if platform else platform_tags(glibc=glibc):
        cmd += ["--platform", tag]
    _run(cmd + requirements, "pip download")


def prepare_context(
    dest: Path,
    *,
    python_version: str = DEFAULT_PYTHON,
    platform: str | None = None,
    glibc: str = DEFAULT_GLIBC,
    packages: tuple[str, ...] = RUNTIME_PACKAGES,
    pin_host_versions: bool = True,
) -> Path:
    """Write a complete, network-free build context into `dest` (created if missing); return it.

    `platform` is one pip platform tag (e.g. manylinux2014_x86_64); by default every manylinux tag
    the image's `glibc` accepts, for the host's CPU architecture. With `pin_host_versions`, packages
    the host has installed are pinned to the host's versions (falling back to the newest wheels
    when those have none for the image's Python).
    """
    dest = Path(dest)
    wheels = dest / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    for stale in wheels.glob("*.whl"):
        stale.unlink()
    shutil.copyfile(find_dockerfile(), dest / DOCKERFILE)
    # Only the Dockerfile and wheels/ are sent to the engine, whatever else lands in dest.
    (dest / ".dockerignore").write_text(f"*\n!{DOCKERFILE}\n!wheels/\n", encoding="utf-8")

    started = time.monotonic()
    wheel = build_potrun_wheel(wheels)
    _log(f"potrun wheel: {wheel.name} ({time.monotonic() - started:.1f} s)")

    started = time.monotonic()
    requirements = _host_pins(tuple(packages)) if pin_host_versions else list(packages)

    def download(requirements: list[str]) -> None:
        download_wheels(wheels, requirements, python_version=python_version, platform=platform, glibc=glibc)

    try:
        download(requirements)
    except ImageBuildError:
        if requirements == list(packages):
            raise
        _log(f"no wheels for {requirements} on Python {python_version}; taking the newest instead")
        download(list(packages))
    download(["pip"])
    names = sorted(p.name for p in wheels.glob("*.whl"))
    _log(f"wheels ({time.monotonic() - started:.1f} s): {', '.join(names)}")
    return dest


# ---------------------------------------------------------------------------------------- build


def build_image(
    base: str | None = None,
    tag: str = DEFAULT_IMAGE,
    *,
    python_version: str | None = None,
    packages: tuple[str, ...] = RUNTIME_PACKAGES,
    context: Path | None = None,
) -> str:
    """Build the sandbox image from `base` (Dockerfile.sandbox's default when None); return `tag`.

    Raises SandboxUnavailable when the docker CLI or engine is missing. The wheels are fetched for
    the base image's Python and glibc (probed by running the base when it is present locally;
    otherwise read from a `python:X.Y` tag, else Python 3.11).
    """
    docker = ensure_engine()
    probed_python, glibc = detect_base(base or DEFAULT_BASE)
    python_version = python_version or probed_python or DEFAULT_PYTHON
    glibc = glibc or DEFAULT_GLIBC
    _log(f"base {base or DEFAULT_BASE}: Python {python_version}, glibc {glibc}, arch {host_arch()}")

    with tempfile.TemporaryDirectory(prefix="potrun-image-") as tmp:
        ctx = prepare_context(
            Path(context) if context else Path(tmp),
            python_version=python_version,
            glibc=glibc,
            packages=packages,
        )
        cmd = [
            docker,
            "build",
            "--network",
            "none",
            "-f",
            str(ctx / DOCKERFILE),
            "-t",
            tag,
            "--label",
            f"{SANDBOX_LABEL}.python={python_version}",
            "--label",
            f"{CODE_LABEL}={code_fingerprint()}",  # require_image refuses an image of other code
        ]
        if base:
            cmd += ["--build-arg", f"BASE={base}"]
        env = dict(os.environ)
        if not _has_buildx(docker):
            env["DOCKER_BUILDKIT"] = "0"  # the legacy builder; the Dockerfile needs nothing newer
        started = time.monotonic()
        _run([*cmd, str(ctx)], "docker build", env=env)
        _log(f"built {tag} in {time.monotonic() - started:.1f} s")
    # The legacy builder leaves the install stage behind untagged, and a rebuild untags the previous
    # image: drop those (dangling images carrying our stage label; ones in use are kept).
    subprocess.run(
        [docker, "image", "prune", "--force", "--filter", f"label={SANDBOX_LABEL}.stage"],
        capture_output=True,
        text=True,
    )
    return tag


def _has_buildx(docker: str) -> bool:
    proc = subprocess.run([docker, "buildx", "version"], capture_output=True, text=True)
    return proc.returncode == 0


# ----------------------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    """`python -m potrun.tools.image ...` is `potrun image ...`: one command, one set of exit codes."""
    from potrun.cli import main as potrun_main

    return potrun_main(["image", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
