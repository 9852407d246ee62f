"""absl's log handler, kept on the process's stderr.

absl (brought by dp-accounting and TensorBoard) logs through a handler that keeps the
``sys.stderr`` of the moment absl's logging was imported, and *closes* that stream
whenever logging is reconfigured, as Hydra does for every sweep and job, unless it is
``sys.stderr`` or ``sys.stdout`` at that moment. Where it was a redirected stream (a
tuning sweep's log, an in-process run's output, a test's capture), the close breaks the
stream's owner long after: its next write meets a closed file. On the process's own
stderr, which absl never closes, the handler writes where it would have anyway.
"""

from __future__ import annotations

import sys


def keep_absl_on_process_stderr() -> None:
    """Point absl's handler at ``sys.__stderr__``; nothing where absl's logging is not
    loaded (absl's import is left to those who need it)."""
    absl_logging = sys.modules.get("absl.logging")
    if absl_logging is not None:
        absl_logging.get_absl_handler().python_handler.stream = sys.__stderr__
