"""Who may write a run folder, and the one-line error when it cannot be written.

One process writes a run folder: a run, its resume or an attach. The lock is taken before
the first file is written and the kernel drops it however the process ends, so a second
process gets one line naming the holder instead of two writers mixing their files.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import Any

from fedimb.core.errors import FedimbError


class RunFolderError(FedimbError, OSError):
    """The run folder cannot be written (disk full, read-only, removed)."""


def unwritable(run_dir: Path, err: OSError, files: str) -> RunFolderError:
    """The one-line error for ``err`` while writing ``files`` of the run folder."""
    return RunFolderError(
        f"cannot write the run folder {run_dir}: {err.strerror or err} ({err.filename or files})"
    )


#: the lock file that says which process writes a run folder (see :func:`hold_run_folder`)
LOCK_FILE = ".fedimb.lock"

_held: dict[Path, Any] = {}  # run folder -> the open lock file of this process


class RunFolderInUse(FedimbError):
    """Another process writes the run folder."""


def hold_run_folder(run_dir: Path) -> None:
    """Make this process the run folder's only writer until :func:`release_run_folder`
    or its end: an exclusive ``flock`` on its lock file, which the kernel drops however
    the process ends (a crash or SIGKILL leaves no stale lock). A second ``fedimb`` run,
    resume or attach on the folder gets one line naming the holder's process id."""
    run_dir = run_dir.resolve()
    if run_dir in _held:
        return
    try:
        handle = open(run_dir / LOCK_FILE, "a+", encoding="utf-8")  # noqa: SIM115 - closed on release
    except OSError as err:
        raise unwritable(run_dir, err, LOCK_FILE) from err
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        handle.seek(0)
        holder = handle.read().strip()
        handle.close()
        raise RunFolderInUse(
            f"run folder {run_dir} is in use by process {holder or '(unknown)'} (a fedimb run, "
            f"resume or attach writing it); wait for it to end or stop it"
        ) from None
    handle.seek(0)
    handle.truncate()
    handle.write(f"{os.getpid()}\n")
    handle.flush()
    _held[run_dir] = handle


def release_run_folder(run_dir: Path) -> None:
    """Let another process write the run folder (the lock file stays: removing it would
    let two processes lock two different files)."""
    handle = _held.pop(run_dir.resolve(), None)
    if handle is not None:
        handle.close()
