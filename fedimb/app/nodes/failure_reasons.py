"""A client's failure in one line, whatever the runtime wrapped it in: Ray's actor errors
in the simulation, the Grid's errors in a deployment, a plain exception in process."""

from __future__ import annotations

import re


def _one_line(reason: str) -> str:
    """A reason's first line, and where Ray explains a dead actor on a later line, the
    first sentence of that explanation: one console line; the whole text is in flwr.log."""
    lines = [line.strip() for line in reason.splitlines() if line.strip()]
    why = [
        line.split(". ")[0].rstrip(".") + "."
        for line in lines[1:]
        if line.startswith("The actor is dead because")
    ]
    return " ".join(lines[:1] + why[:1])


def describe_failure(err: BaseException) -> str:
    """A client failure as ``<exception type>: <message>`` in every runtime, on one line."""
    return _one_line(_full_reason(err))


def _full_reason(err: BaseException) -> str:
    text = str(err)
    ray = re.search(
        r"ClientAppException occurred\. Message: (.*?)(?:'>\)\. It originated.*)?$", text, re.S
    )
    if ray:  # the simulation: Flower keeps only the message, Ray's traceback above it the type
        message = ray.group(1).strip()
        first = re.escape(message.splitlines()[0]) if message else "$"
        raised = re.search(rf"^\s*(?:[\w.]*\.)?(\w+): {first}", text, re.M)
        return f"{raised.group(1) if raised else 'ClientAppException'}: {message}"
    if text.startswith("Expected one Message but got: 0") or "Message Unavailable" in text:
        # Flower's grid proxy after its timeout, or the SuperLink after the message's TTL
        return "no reply within the round timeout (node gone or straggling)"
    match = re.search(r"Message contains an Error \(reason: (.*)\)\. It originated", text, re.S)
    if match:  # the ClientApp raised, or the SuperLink answered for an unavailable node
        reason = match.group(1).strip()
        raised = re.fullmatch(r"<class '(?:[\w.]*\.)?(\w+)'>:<'(.*)'>", reason, re.S)
        return f"{raised.group(1)}: {raised.group(2)}" if raised else reason
    return f"{type(err).__name__}: {text}"
