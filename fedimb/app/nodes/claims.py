"""What a node says it is when asked for its properties, checked before the registry
makes it a client: a malformed or hostile answer is refused with a one-line reason."""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import TypeGuard

import numpy as np

from fedimb.core import payload, protocol


class ClaimRefused(ValueError):
    """A node's identity answer that cannot make it a client (the message says why)."""


@dataclass(frozen=True)
class Claim:
    """What a node says it is: a partition id, or ``device_key`` for a node with its own data."""

    partition_id: int
    num_examples: int
    label_counts: np.ndarray | None
    device_key: str | None = None


def _is_integer(value: object) -> TypeGuard[numbers.Integral]:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _shown(value: object) -> str:
    """A node-supplied value for a message: its repr, cut short (one line, bounded)."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def read_claim(props: dict, capacity: int | None) -> Claim:
    """A node's properties answer as a :class:`Claim`, or :class:`ClaimRefused`: the
    partition id must be an integer in [0, ``capacity``), or -1 with a device key (a node
    with its own data); ``num_examples`` a non-negative integer; label counts decodable."""
    pid = props.get(protocol.PARTITION_ID)
    if not _is_integer(pid):
        raise ClaimRefused(
            "no partition id" if pid is None else f"partition id {_shown(pid)} is not an integer"
        )
    pid = int(pid)
    num_examples = props.get(protocol.NUM_EXAMPLES)
    if not _is_integer(num_examples) or num_examples < 0:
        raise ClaimRefused(
            "no num_examples"
            if num_examples is None
            else f"num_examples {_shown(num_examples)} is not a non-negative integer"
        )
    device_key = None
    if pid == -1:
        device_key = props.get(protocol.DEVICE_KEY)
        if not isinstance(device_key, str) or not device_key:
            raise ClaimRefused("has its own data (partition id -1) but no device key")
    elif pid < 0 or (capacity is not None and pid >= capacity):
        where = f"outside 0..{capacity - 1}" if capacity is not None else "negative"
        raise ClaimRefused(f"partition id {pid} is {where}")
    try:
        counts = payload.unpack(props).get(protocol.LABEL_COUNTS)
    except Exception as err:  # a crafted payload: bytes that are no array
        raise ClaimRefused(f"its label counts cannot be decoded ({type(err).__name__})") from err
    return Claim(pid, int(num_examples), counts, device_key)
