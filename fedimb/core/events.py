"""Structured progress events from the ServerApp to the launching machine.

One channel that only :func:`emit` writes to. In the Flower runtimes it is the
ServerApp's log stream, which ``flwr run --stream`` carries to the front end: the
ServerApp prints one JSON line per event, and client code cannot write there (a deployed
client is another machine; a simulated one a Ray actor whose output stays in Ray's logs).
In process, :func:`emit` hands each event to the sink the runtime installs
(:func:`to_sink`), and whatever the process prints or logs is plain text
(:func:`plain_text`), never an event.
"""

from __future__ import annotations

import contextlib
import json
import math
import re
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

TAG = "FEDIMB-EVENT "


def _clean(value: Any) -> Any:
    """JSON-safe copy: NaN/inf become null, numpy scalars become Python numbers."""
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):
        return _clean(value.tolist())  # numpy arrays and scalars
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def format_event(event: str, **fields: Any) -> str:
    return TAG + json.dumps(_clean({"event": event, **fields}), separators=(",", ":"))


_WRITE = threading.Lock()
#: where :func:`emit` sends each event line instead of stdout (:func:`to_sink`)
_sink: Callable[[str], None] | None = None


def emit(event: str, **fields: Any) -> None:
    """One event, written at once (a round's event may come from the round loop's
    background thread while other threads log): a line on stdout, or to the sink."""
    line = format_event(event, **fields)
    with _WRITE:
        if _sink is not None:
            _sink(line)
            return
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


@contextlib.contextmanager
def to_sink(sink: Callable[[str], None]) -> Iterator[None]:
    """:func:`emit` hands each event line to ``sink`` while the block runs: the
    in-process runtime's channel, which no text a client prints or logs can reach."""
    global _sink
    previous, _sink = _sink, sink
    try:
        yield
    finally:
        _sink = previous


def emit_error(err: BaseException) -> None:
    """The ``error`` event of an exception that ends the run: its type, its message and
    the source line it was raised from, so that the front end's one line names the cause
    whether or not the rest of the log reaches it."""
    import traceback

    from fedimb.core.errors import FedimbError

    message = str(err) if isinstance(err, FedimbError) else f"{type(err).__name__}: {err}"
    frames = traceback.extract_tb(err.__traceback__)
    ours = [
        f for f in frames if any(m in f.filename for m in _PACKAGES)
    ]  # the innermost line of fedimb's code
    innermost = ours or frames
    where = f"{_short_path(innermost[-1].filename)}:{innermost[-1].lineno}" if innermost else None
    emit("error", message=message, where=where)


_PACKAGES = ("/fedimb/", "/strategies/", "/clients/")


def _short_path(filename: str) -> str:
    """A source path from fedimb's package roots or site-packages on, else as it is."""
    for marker in (*_PACKAGES, "/site-packages/"):
        if marker in filename:
            tail = filename.rsplit(marker, 1)[1]
            return tail if marker == "/site-packages/" else marker.strip("/") + "/" + tail
    return filename


def lost_clients_cause(num_clients: int, reasons: dict[str, int]) -> str:
    """``1 of 3 clients could not start: <why>`` or ``2 of 3 clients lost: 1 did not
    connect; 1 could not start: <why>``: the clients a run goes on without, and why
    (``reasons``: one-line cause -> how many clients it took)."""
    lost = sum(reasons.values())
    if len(reasons) == 1:
        return f"{lost} of {num_clients} clients {next(iter(reasons))}"
    return f"{lost} of {num_clients} clients lost: " + "; ".join(
        f"{n} {why}" for why, n in reasons.items()
    )


def emit_clients_lost(num_clients: int, reasons: dict[str, int]) -> None:
    """The ``warning`` event of clients that never joined the run (``clients_lost``, with
    ``clients_lost_reasons``): the front end prints it and keeps it in the run's summary.
    The reasons quote the clients' own errors: :func:`neutral` first."""
    safe: dict[str, int] = {}
    for why, count in reasons.items():
        safe[neutral(why)] = safe.get(neutral(why), 0) + count
    reasons = safe
    emit(
        "warning",
        message=f"{lost_clients_cause(num_clients, reasons)}; continuing without them",
        num_clients=num_clients,
        clients_lost=sum(reasons.values()),
        clients_lost_reasons=reasons,
    )


def parse_event(line: str) -> dict[str, Any] | None:
    """The event a log line carries, or None. Only a line that *starts* with the tag is
    one: :func:`emit` writes each event as a whole line of the ServerApp's stdout, which
    every runtime delivers unprefixed, whereas a log record (which may quote a client's
    text) starts with its level."""
    text = line.strip()
    if not text.startswith(TAG):
        return None
    try:
        event = json.loads(text[len(TAG) :])
    except json.JSONDecodeError:
        return None
    return event if isinstance(event, dict) and "event" in event else None


#: the longest client-provided text a round note keeps
NEUTRAL_LIMIT = 300

_CONTROL = re.compile(
    r"[\x00-\x1f\x7f-\x9f\u2028\u2029]+"
)  # every character str.splitlines() breaks at
_TAG_ANYWHERE = re.compile(re.escape(TAG.strip()), re.IGNORECASE)


def neutral(text: object, limit: int = NEUTRAL_LIMIT) -> str:
    """``text`` made safe to log: one line (control characters and line breaks become a
    space), the event tag defanged so that it can never start a line nor parse as an
    event, at most ``limit`` characters. Every note that may carry a client's words (an
    exception message, a payload name) passes through here."""
    flat = _CONTROL.sub(" ", str(text)).strip()
    flat = _TAG_ANYWHERE.sub("FEDIMB_EVENT", flat)
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def plain_text(line: str) -> str:
    """A line of output that :func:`emit` did not write (what a process prints or logs),
    as log text: the tag defanged wherever it stands, so no reader takes it for an event."""
    return _TAG_ANYWHERE.sub("FEDIMB_EVENT", line)


@contextlib.contextmanager
def neutral_errors() -> Iterator[None]:
    """Re-raise an exception whose message carries the event tag with that message
    :func:`neutral`. A client wraps its calls in this: the simulation logs a failing
    client's traceback, message and all, into the ServerApp's log stream, where a line
    of it could otherwise start with the tag. Other exceptions pass untouched."""
    try:
        yield
    except Exception as err:
        if not _TAG_ANYWHERE.search(str(err)):
            raise
        err.args = (neutral(err),)
        if _TAG_ANYWHERE.search(str(err)):  # an exception that formats its own message
            raise RuntimeError(f"{type(err).__name__}: {neutral(err)}") from None
        raise
