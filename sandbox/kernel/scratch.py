"""The worker's scratch: the folders its runners write in, made, emptied and removed (and the worker's
minimal root, built on it where the worker may). Moved out of the worker (#40)."""

from __future__ import annotations

import os
import sys

from potrun.sandbox.kernel import isolation, namespace


def remove_directory(path: str) -> None:
    try:
        os.rmdir(path)  # empty, as most programs leave it
    except OSError:
        remove_tree(path)


def remove_tree(path: str) -> None:
    """Remove what a program left, however deep: one directory open at a time, entries by name, no
    recursion (shutil.rmtree recursed into a RecursionError on 3,000 nested folders, which ended the
    worker; a path that deep is also past PATH_MAX). Each folder is read once. What cannot be removed
    stays (`_own_directory` then refuses to reuse the name)."""
    try:
        fd = os.open(path, _DIRECTORY_FLAGS)
    except OSError:
        return
    try:
        pending = [_clear_files(fd)]  # per open level: its subfolders still to remove
        names: list[str] = []  # each level's name in the level above
        while True:
            if pending[-1]:
                name = pending[-1].pop()
                child = os.open(name, _DIRECTORY_FLAGS, dir_fd=fd)
                os.close(fd)
                fd = child
                names.append(name)
                pending.append(_clear_files(fd))
                continue
            pending.pop()
            if not names:
                break
            parent = os.open("..", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = parent
            os.rmdir(names.pop(), dir_fd=fd)
    except OSError:
        pass
    finally:
        os.close(fd)
    try:
        os.rmdir(path)
    except OSError:
        pass


_DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW


def _clear_files(fd: int) -> list[str]:
    """Unlink every entry of the open folder `fd` that is not a folder; return the folders' names."""
    folders = []
    with os.scandir(fd) as entries:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                folders.append(entry.name)
            else:
                os.unlink(entry.name, dir_fd=fd)
    return folders


def build_minimal_root(staging: str) -> bool:
    """The worker's minimal root on `staging` (potrun's scratch folder for it, empty); False, and the
    host's files seen as before, where it cannot be built (said on stderr)."""
    reveal = [*namespace.python_installation(), *namespace.loaded_library_directories()]
    try:
        return namespace.build_minimal_root(staging, reveal, isolation.SCRATCH_OPTIONS)
    except OSError as exc:
        print(f"potrun worker: no minimal root ({exc}): programs see the host's files", file=sys.stderr)
        isolation.unmount(staging)
        return False


def temporary_directory() -> str:
    import tempfile  # (it imports shutil)

    folder = tempfile.mkdtemp(prefix="potrun-worker-")
    tempfile.tempdir = None  # not inherited by forks: each program finds its own writable place, its folder
    return folder


def empty_directory(path: str) -> None:
    for entry in os.scandir(path):
        if entry.is_dir(follow_symlinks=False):
            remove_tree(entry.path)
        else:
            try:
                os.unlink(entry.path)
            except OSError:
                pass
