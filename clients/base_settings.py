"""A client's settings (its method YAML's ``client:`` section), declared once.

A client declares them as a frozen dataclass (``Settings`` on the client class) whose
fields are the YAML keys, without defaults (values come from the YAML only), each with
its type and, through :func:`setting`, a rule (:func:`fedimb.core.errors.one_of`,
:func:`~fedimb.core.errors.at_least`). From that one declaration the configuration
check rejects a missing, unknown, mistyped or rule-breaking setting, and a setting
named like an instruction key (a protocol or training key, which it would override in
every instruction), with one line; the client reads them typed (:func:`read_settings`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from fedimb.core import protocol
from fedimb.core.errors import ConfigError
from fedimb.core.settings import check_declared, read_declared, setting

__all__ = ["check_settings", "read_settings", "setting"]
from fedimb.core.training import TRAIN_KEYS

PREFIX = "method.client"
#: keys every instruction carries besides the method's settings: no setting may be named so
RESERVED_KEYS = frozenset(protocol.INSTRUCTION_KEYS) | frozenset(TRAIN_KEYS)


def check_settings(
    declared: type, settings: Mapping[str, Any], reserved: Iterable[str] = ()
) -> None:
    """One-line :class:`ConfigError` for the first setting that is named like an
    instruction key, undeclared, missing, of the wrong type or against its rule."""
    clashing = RESERVED_KEYS | frozenset(reserved)
    for key in settings:
        if key in clashing:
            raise ConfigError(
                f"{PREFIX}.{key}: a method setting must not be named like an instruction key "
                f"({key!r} is one every instruction carries)"
            )
    check_declared(declared, settings, PREFIX)


def read_settings(declared: type, values: Mapping[str, Any]) -> Any:
    """The ``declared`` settings read from ``values`` (an instruction or the YAML section;
    other keys are ignored), each as its declared type."""
    return read_declared(declared, values)
