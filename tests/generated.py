"""Files the repository keeps that the code writes: docs/architecture.md and its picture
(``python -m tests.imports``) and docs/tables/privacy_payloads.md
(``benchmarks/accuracy/privacy.py --table-only``).

The test of such a file writes it anew where it is out of date and passes with a
:class:`Regenerated` warning to commit it, so that a new method is its two files and a
green suite, and the rewritten file is in the working tree for the same commit. What the
tests assert is the generated text's content."""

from __future__ import annotations

import warnings
from pathlib import Path


class Regenerated(UserWarning):
    """A generated file was out of date and has been rewritten: commit it."""


def keep_current(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` where the file differs (or is missing)."""
    if path.is_file() and path.read_text() == text:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    warnings.warn(f"{path} was out of date and is rewritten: commit it", Regenerated, stacklevel=2)
