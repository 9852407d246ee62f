"""Where a client keeps what must outlive a round (SCAFFOLD's control variate, FedDyn's
linear term, personal models): :class:`ContextState`, Flower's ``Context.state``, or
:class:`DiskState`, one file per client and name.

Flower keeps ``Context.state`` in memory with the node: a SuperNode holds one client, but
a process that serves many (the simulation's engine, ``runtime=in_process``) would hold
the state of every client that ever trained, idle or not — SCAFFOLD's control variates
alone are a model per client, which a hundred thousand devices cannot keep in memory.
There the state goes to
disk (``runtime.client_state=disk``) and only the clients of the current message hold
theirs in memory. Both give the same arrays back, to the last bit.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Protocol

import numpy as np
from flwr.app import Array, ArrayRecord, Context

from fedimb.core.data.cache import cache_dir, save_npz


class ClientState(Protocol):
    """Named groups of arrays one client keeps between rounds."""

    def load(self, name: str) -> dict[str, np.ndarray] | None: ...

    def save(self, name: str, arrays: dict[str, np.ndarray]) -> None: ...


class ContextState:
    """Flower's ``Context.state``: kept by Flower with the node, in memory."""

    def __init__(self, context: Context):
        self.context = context

    def load(self, name: str) -> dict[str, np.ndarray] | None:
        state = self.context.state
        record = state.array_records.get(name) if name in state else None
        if record is None:
            return None
        return {key: array.numpy() for key, array in record.items()}

    def save(self, name: str, arrays: dict[str, np.ndarray]) -> None:
        self.context.state[name] = ArrayRecord(
            array_dict={k: Array(np.asarray(v)) for k, v in arrays.items()}
        )


class DiskState:
    """Client ``pid``'s state in ``<folder>/<pid>.<name>.npz``, written atomically."""

    def __init__(self, folder: Path, pid: int):
        self.folder = folder
        self.pid = pid

    def _path(self, name: str) -> Path:
        return self.folder / f"{self.pid}.{name}.npz"

    def load(self, name: str) -> dict[str, np.ndarray] | None:
        path = self._path(name)
        if not path.exists():
            return None
        with np.load(path) as stored:
            return {key: stored[key] for key in stored.files}

    def save(self, name: str, arrays: dict[str, np.ndarray]) -> None:
        save_npz(self._path(name), {k: np.asarray(v) for k, v in arrays.items()})


def state_folder(run_id: int) -> Path:
    """The client-state folder of one Flower run (of one in-process run): a resumed run is
    a new run, whose clients start afresh as with ``Context.state``."""
    return cache_dir() / "client_state" / str(run_id)


def remove_state_folder(run_id: int) -> None:
    """The run is over: its clients' state goes (a run that died leaves it, like its
    checkpoint, in the cache)."""
    shutil.rmtree(state_folder(run_id), ignore_errors=True)


def client_state(kind: str, context: Context, pid: int) -> ClientState:
    """Client ``pid``'s store: ``disk`` or ``memory`` (``runtime.client_state``)."""
    if kind == "disk":
        return DiskState(state_folder(int(context.run_id)), pid)
    return ContextState(context)
