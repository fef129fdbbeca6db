"""potrun.tools.image: build tooling for the sandbox image.

Fast tests run everywhere (a fake `docker` on PATH stands in for the CLI). Tests marked `docker`
run the real image with the hardening the docker backend uses; they skip when no engine or image is
there, unless POTRUN_REQUIRE_DOCKER=1 (CI, after .ci/setup-docker.sh), where that is a failure.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import os
import re
import shutil
import subprocess
import zipfile

import pytest
from paths import REPO

from potrun.tools import image
from potrun.types import SandboxUnavailable

# ----------------------------------------------------------------------------------- pure parts


def test_platform_tags_cover_manylinux_up_to_the_image_glibc():
    tags = image.platform_tags("x86_64", "2.28")
    assert tags[0] == "manylinux_2_28_x86_64"
    assert "manylinux_2_17_x86_64" in tags and tags[-1] == "manylinux2014_x86_64"
    assert not any(t.startswith("manylinux_2_29") for t in tags)


@pytest.mark.parametrize("glibc", ["2.5", "3.1"])
def test_platform_tags_refuse_a_glibc_manylinux_cannot_serve(glibc):
    with pytest.raises(ValueError):
        image.platform_tags("x86_64", glibc)


def test_host_pins_pin_installed_packages_and_keep_specifiers():
    numpy_version = __import__("importlib.metadata").metadata.version("numpy")
    pins = image._host_pins(("numpy", "sympy>=1.12", "surely-not-installed-potrun-pkg"))
    assert pins == [f"numpy=={numpy_version}", "sympy>=1.12", "surely-not-installed-potrun-pkg"]


def test_source_root_is_found_from_this_checkout():
    assert image.find_source_root() == REPO


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def test_repack_installed_writes_a_valid_wheel(tmp_path):
    wheel = image.repack_installed("iniconfig", tmp_path)  # a pytest dependency: always installed
    assert re.fullmatch(r"iniconfig-[\w.]+-py3-none-any\.whl", wheel.name)
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        record_name = next(n for n in names if n.endswith(".dist-info/RECORD"))
        rows = list(csv.reader(io.StringIO(zf.read(record_name).decode())))
        assert {r[0] for r in rows} == names
        for path, digest, size in rows:
            if path != record_name:
                assert digest == _record_hash(zf.read(path)) and int(size) == len(zf.read(path))
    assert "iniconfig/__init__.py" in names
    assert not any("__pycache__" in n or n.endswith(("INSTALLER", "direct_url.json")) for n in names)


def test_dockerfile_keeps_the_contract():
    text = (REPO / "Dockerfile.sandbox").read_text()
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    assert lines[0] == "ARG BASE=python:3.12-slim"
    code = "\n".join(lines)
    assert "--no-index" in code and "http" not in code  # wheels only, nothing fetched
    final = text[text.rindex("FROM ${BASE}") :]
    assert 'LABEL potrun.sandbox="1"' in final
    assert "USER 10001" in final and "WORKDIR /tmp" in final
    for var in ("PYTHONDONTWRITEBYTECODE=1", "OPENBLAS_NUM_THREADS=1", "OMP_NUM_THREADS=1", "MKL_NUM_THREADS=1"):
        assert var in final
    assert lines[-1] == 'CMD ["python3", "-s", "-P", "-m", "potrun.sandbox.inside.worker"]'


# ------------------------------------------------------------------------ docker CLI and engine


def _fake_docker(tmp_path, monkeypatch, script: str) -> None:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    docker = bindir / "docker"
    docker.write_text("#!/bin/sh\n" + script)
    docker.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}")


def test_missing_cli_is_sandbox_unavailable(monkeypatch):
    monkeypatch.setattr(image.shutil, "which", lambda name: None)
    with pytest.raises(SandboxUnavailable, match="docker CLI"):
        image.build_image(base="potrun-base:bookworm")
    with pytest.raises(SandboxUnavailable, match="docker CLI"):
        image.image_exists("potrun-sandbox:latest")


ENGINE_DOWN = (
    'echo "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. '
    'Is the docker daemon running?" >&2\nexit 1\n'
)


def test_engine_down_is_sandbox_unavailable(tmp_path, monkeypatch):
    _fake_docker(tmp_path, monkeypatch, ENGINE_DOWN)
    with pytest.raises(SandboxUnavailable, match=r"no Docker engine is reachable.*Cannot connect"):
        image.build_image(base="potrun-base:bookworm")
    with pytest.raises(SandboxUnavailable, match="no Docker engine"):
        image.image_exists("potrun-sandbox:latest")
    assert image.main(["exists"]) == 3


def test_image_exists_answers_from_inspect(tmp_path, monkeypatch):
    _fake_docker(
        tmp_path,
        monkeypatch,
        (
            'case "$*" in\n'
            "  *there:1*) echo sha256:abc; exit 0;;\n"
            '  *) echo "Error response from daemon: No such image: $5" >&2; exit 1;;\n'
            "esac\n"
        ),
    )
    assert image.image_exists("there:1") is True
    assert image.image_exists("missing:1") is False


# ------------------------------------------------------------------ context (needs PyPI access)


@pytest.mark.slow
def test_prepare_context_holds_only_what_the_build_needs(tmp_path):
    repo_before = sorted(p.name for p in REPO.iterdir())
    ctx = image.prepare_context(tmp_path / "ctx", python_version="3.11")
    names = sorted(p.name for p in (ctx / "wheels").iterdir())
    assert [n.split("-")[0].lower() for n in names] == ["numpy", "pip", "potrun", "restrictedpython"]
    assert all(n.endswith(".whl") for n in names)
    assert (ctx / "Dockerfile.sandbox").read_bytes() == (REPO / "Dockerfile.sandbox").read_bytes()
    assert (ctx / ".dockerignore").read_text().split() == ["*", "!Dockerfile.sandbox", "!wheels/"]
    numpy_wheel = next(n for n in names if n.startswith("numpy-"))
    assert "-cp311-cp311-manylinux" in numpy_wheel
    assert sorted(p.name for p in REPO.iterdir()) == repo_before, "the build wrote into the repository"


# ---------------------------------------------------------------- the real image, hardened


HARDENED = [
    "--rm",
    "-i",
    "--network",
    "none",
    "--read-only",
    "--tmpfs",
    "/tmp:rw,size=64m",
    "--cap-drop",
    "ALL",
    "--security-opt",
    "no-new-privileges",
    "--pids-limit",
    "64",
    "--memory",
    "512m",
    "--user",
    "10001",
]


@pytest.fixture(scope="module")
def sandbox_image() -> str:
    try:
        image.ensure_engine()
        present = image.image_exists(image.DEFAULT_IMAGE)
    except SandboxUnavailable as exc:
        reason = str(exc)
    else:
        if present:
            return image.DEFAULT_IMAGE
        reason = f"{image.DEFAULT_IMAGE} is not built (run .ci/setup-docker.sh)"
    if os.environ.get("POTRUN_REQUIRE_DOCKER") == "1":
        pytest.fail(reason)
    pytest.skip(reason)


def _run_hardened(tag: str, code: str) -> subprocess.CompletedProcess:
    docker = shutil.which("docker")
    return subprocess.run(
        [docker, "run", *HARDENED, tag, "python3", "-I", "-c", code], capture_output=True, text=True, timeout=120
    )


@pytest.mark.docker
def test_image_runs_numpy_hardened(sandbox_image):
    proc = _run_hardened(sandbox_image, "import numpy, RestrictedPython, potrun.types; print(numpy.ones(3).sum())")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "3.0"


@pytest.mark.docker
def test_image_is_isolated_hardened(sandbox_image):
    code = (
        "import os, socket, json\n"
        "out = {'uid': os.getuid(), 'cwd': os.getcwd(), 'ifaces': [n for _, n in socket.if_nameindex()]}\n"
        "try:\n    socket.create_connection(('127.0.0.1', 9), 1); out['connect'] = 'connected'\n"
        "except OSError as e:\n    out['connect'] = type(e).__name__\n"
        "try:\n    open('/usr/lib/potrun-probe', 'w'); out['rootfs'] = 'writable'\n"
        "except OSError as e:\n    out['rootfs'] = e.errno\n"
        "status = open('/proc/self/status').read()\n"
        "out['capeff'] = status.split('CapEff:')[1].split()[0]\n"
        "out['nnp'] = status.split('NoNewPrivs:')[1].split()[0]\n"
        "print(json.dumps(out))\n"
    )
    proc = _run_hardened(sandbox_image, code)
    assert proc.returncode == 0, proc.stderr
    out = __import__("json").loads(proc.stdout)
    assert out["uid"] == 10001 and out["cwd"] == "/tmp"
    assert out["ifaces"] == ["lo"]
    assert out["connect"] != "connected"
    assert out["rootfs"] == 30  # EROFS
    assert int(out["capeff"], 16) == 0 and out["nnp"] == "1"


@pytest.mark.docker
def test_image_is_labelled_and_runs_the_worker(sandbox_image):
    fmt = '{{index .Config.Labels "potrun.sandbox"}} {{.Config.User}} {{json .Config.Cmd}}'
    proc = subprocess.run(
        [shutil.which("docker"), "image", "inspect", "--format", fmt, sandbox_image],
        capture_output=True,
        text=True,
        check=True,
    )
    label, user, cmd = proc.stdout.strip().split(" ", 2)
    assert (label, user) == ("1", "10001")
    assert cmd == '["python3","-s","-P","-m","potrun.sandbox.inside.worker"]'


class _Image:
    def __init__(self, labels: dict[str, str] | None) -> None:
        self.labels = labels


class _Images:
    def __init__(self, labels: dict[str, str] | None) -> None:
        self._image = _Image(labels)

    def get(self, name: str) -> _Image:
        return self._image


class _Client:
    def __init__(self, labels: dict[str, str] | None) -> None:
        self.images = _Images(labels)


@pytest.mark.parametrize("labels", [None, {}, {"potrun.code": "0" * 64}], ids=["none", "unlabelled", "other-code"])
def test_an_image_of_other_code_is_refused_with_the_fix(labels: dict[str, str] | None) -> None:
    # a worker or policy from before a fix would otherwise run without a word (session 13: the image
    # of the morning ran the policy the red team escaped, after the fix had landed)
    from potrun.sandbox.parent.docker import require_image

    with pytest.raises(SandboxUnavailable, match="potrun image build"):
        require_image(_Client(labels), "potrun-sandbox:latest")


def test_an_image_of_this_code_is_taken() -> None:
    from potrun.sandbox.parent.docker import CODE_LABEL, code_fingerprint, require_image

    client = _Client({CODE_LABEL: code_fingerprint()})
    assert require_image(client, "potrun-sandbox:latest") is client.images.get("x")


def test_the_fingerprint_covers_the_worker_and_the_policies() -> None:
    from potrun.sandbox.parent import docker

    fingerprint = docker.code_fingerprint()
    assert re.fullmatch(r"[0-9a-f]{64}", fingerprint)
    docker.code_fingerprint.cache_clear()
    try:
        names = set(docker._IMAGE_PACKAGES) | set(docker._IMAGE_MODULES)
        assert {"potrun.sandbox", "potrun.policies", "potrun.types"} <= names
        assert docker.code_fingerprint() == fingerprint  # the same files, the same digest
    finally:
        docker.code_fingerprint.cache_clear()
