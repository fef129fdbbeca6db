"""Where the tests find the repository and their data, in one place (test files live in folders by
wing, so each computing its own `Path(__file__).parents[N]` breaks when a file moves).

- REPO: the repository's root (the worktree the tests run from).
- SHARED: the project's shared data, `../shared/data` beside the repository (the corpora: PoT
  generations, hostile programs, peers' cases, benchmark samples). Not in the repository: it must
  sit beside it (README, "Tests").
- TEST_DATA: the tests' own data, tests/data, kept in the repository.

Importable from every test file as `from paths import ...`: pytest (default `prepend` import mode)
puts tests/, the root conftest's folder, on sys.path.
"""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "data"
TEST_DATA = REPO / "tests" / "data"
