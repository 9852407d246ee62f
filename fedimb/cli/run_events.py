"""A run folder's ``events.jsonl``: every event the ServerApp sent, one JSON object a line.

Read back apart from the recorder that writes it, because a resumed or attached run starts
from the events of the attempt before it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

EVENTS_FILE = "events.jsonl"


def read_events(path: Path, warn: Callable[[str], None] | None = None) -> list[dict[str, Any]]:
    """The events of a run folder's ``events.jsonl``; a damaged line (a write cut short
    by a crash or a full disk, an edit) is skipped, and ``warn`` gets one line saying how
    many were and where."""
    found, damaged = [], []
    for number, line in enumerate(path.read_text(errors="replace").splitlines(), start=1):
        try:
            event = json.loads(line)
        except ValueError:
            event = None
        if isinstance(event, dict) and isinstance(event.get("event"), str):
            found.append(event)
        elif line.strip():
            damaged.append(number)
    if damaged and warn is not None:
        shown = ", ".join(map(str, damaged[:10])) + (", ..." if len(damaged) > 10 else "")
        s = "" if len(damaged) == 1 else "s"
        warn(
            f"[fedimb] warning: skipped {len(damaged)} damaged line{s} of {path} (line{s} {shown})"
        )
    return found
