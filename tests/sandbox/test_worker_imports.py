"""A worker imports only what it runs (issue 16, item 8): `import potrun` loads no public name, so the
pool and the facade, the parent's side of the sandbox, stay out of every worker and of the forks that
copy its memory."""

from __future__ import annotations

from conftest import Pools, describe

from potrun.types import Status

PROGRAM = "import sys\nans = sorted(name for name in sys.modules if name.startswith('potrun'))\n"


def test_a_worker_holds_neither_the_pool_nor_the_facade(pools: Pools, backend: str) -> None:
    result = pools.get("trusted", backend).run(PROGRAM)  # trusted: it may read sys.modules
    assert result.status is Status.OK, describe(result)
    assert isinstance(result.value, list) and "potrun.sandbox.inside.runner" in result.value  # a worker's modules
    assert "potrun.sandbox.parent.pool" not in result.value and "potrun.sandbox.api" not in result.value


def test_importing_potrun_loads_no_submodule() -> None:
    import subprocess
    import sys

    code = "import sys, potrun; print(sorted(name for name in sys.modules if name.startswith('potrun')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['potrun']"
