"""A run folder's ``events.jsonl``: every event the ServerApp sent, one JSON object a line.

Read back apart from the recorder that writes it, because a resumed or attached run starts
from the events of the attempt before it. A line that is not an event, or an event whose
fields have types the front end cannot use (a run folder is data anyone may have edited),
is skipped with one warning naming it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fedimb.core.errors import is_int, is_number

EVENTS_FILE = "events.jsonl"

#: the scores of a split of a round event (a number or null each)
_SCORES = ("accuracy", "macro_f1", "loss")


def _number_or_null(value: Any) -> bool:
    return value is None or is_number(value)


def _numbers(node: Any, name: str, null: bool = True) -> str | None:
    """The first field of the mapping ``node`` (named ``name``) that is not a number
    (or null, with ``null``); ``name`` itself if it is no mapping; None if all are."""
    if node is None:
        return None
    if not isinstance(node, dict):
        return name
    for key, value in node.items():
        if not (is_number(value) or (null and value is None)):
            return f"{name}.{key}" if name else str(key)
    return None


def round_problem(event: dict[str, Any]) -> str | None:
    """The first field of a round event with a type the run folder's writers cannot use."""
    if not is_int(event.get("round")):
        return "round"
    if not isinstance(event.get("stage", ""), str):
        return "stage"
    checks = [
        _numbers({k: event.get(k) for k in ("seconds", "weight_diversity")}, ""),
        *(_numbers(event.get(section), section, null=False) for section in ("clients", "bytes")),
        *(_numbers(event.get(section), section) for section in ("train", "timing")),
    ]
    for split in ("test", "validation"):
        scores = event.get(split) or {}
        if not isinstance(scores, dict):
            return split
        checks.append(_numbers({k: scores.get(k) for k in _SCORES}, split))
        recall = scores.get("recall") or []
        if not (isinstance(recall, list) and all(map(_number_or_null, recall))):
            checks.append(f"{split}.recall")
    local = event.get("local") or {}
    if not (isinstance(local, dict) and all(isinstance(v, dict) for v in local.values())):
        return "local"
    for model, stats in local.items():
        checks.append(_numbers(stats.get("accuracy"), f"local.{model}.accuracy"))
        others = {k: v for k, v in stats.items() if k != "accuracy"}
        checks.append(_numbers(others, f"local.{model}"))
    for key, kind in (("extra", dict), ("messages", list)):
        if not isinstance(event.get(key) or kind(), kind):
            return key
    return next((check for check in checks if check), None)


def event_problem(event: dict[str, Any]) -> str | None:
    """The first field of an event the front end reads back that has the wrong type."""
    kind = event["event"]
    if kind == "round":
        return round_problem(event)
    if kind in ("start", "end"):
        fields = ("num_rounds", "num_parameters") if kind == "start" else ("seconds",)
        return _numbers({k: event.get(k) for k in fields}, "")
    return None


def read_events(
    path: Path, warn: Callable[[str], None] | None = None, typed: bool = True
) -> list[dict[str, Any]]:
    """The events of a run folder's ``events.jsonl``; a damaged line (a write cut short
    by a crash or a full disk, an edit) or, where ``typed``, a mistyped event
    (:func:`event_problem`) is skipped, and ``warn`` gets one line saying how many were
    and where. ``typed=False`` keeps every event line, for counting them."""
    found, damaged = [], []
    for number, line in enumerate(path.read_text(errors="replace").splitlines(), start=1):
        try:
            event = json.loads(line)
        except (ValueError, RecursionError):
            event = None
        if isinstance(event, dict) and isinstance(event.get("event"), str):
            problem = event_problem(event) if typed else None
            if problem is None:
                found.append(event)
            else:
                damaged.append(f"{number} (field {problem!r})")
        elif line.strip():
            damaged.append(str(number))
    if damaged and warn is not None:
        shown = ", ".join(damaged[:10]) + (", ..." if len(damaged) > 10 else "")
        s = "" if len(damaged) == 1 else "s"
        warn(
            f"[fedimb] warning: skipped {len(damaged)} damaged line{s} of {path} (line{s} {shown})"
        )
    return found
