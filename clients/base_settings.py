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

import dataclasses
import difflib
from collections.abc import Callable, Iterable, Mapping
from types import NoneType
from typing import Any

from fedimb.core import protocol
from fedimb.core.errors import ConfigError
from fedimb.core.settings import read_declared, setting_types, type_options
from fedimb.core.training import TRAIN_KEYS

PREFIX = "method.client"
#: keys every instruction carries besides the method's settings: no setting may be named so
RESERVED_KEYS = frozenset(protocol.INSTRUCTION_KEYS) | frozenset(TRAIN_KEYS)


def setting(rule: Callable[[str, Any], None] | None = None) -> Any:
    """A declared setting with a rule checked with the configuration (no default)."""
    return dataclasses.field(metadata={"rule": rule} if rule is not None else {})


def _allowed(kind: Any) -> tuple[type, ...]:
    """The Python types a setting of type ``kind`` accepts (an int for a float)."""
    accepted: list[type] = []
    for option in type_options(kind):
        accepted.extend((int, float) if option is float else (option,))
    return tuple(accepted)


def _has_type(value: Any, kind: Any) -> bool:
    accepted = _allowed(kind)
    if isinstance(value, bool):
        return bool in accepted
    return isinstance(value, accepted)


def _type_name(kind: Any) -> str:
    return " or ".join("null" if o is NoneType else o.__name__ for o in type_options(kind))


def check_settings(
    declared: type, settings: Mapping[str, Any], reserved: Iterable[str] = ()
) -> None:
    """One-line :class:`ConfigError` for the first setting that is named like an
    instruction key, undeclared, missing, of the wrong type or against its rule."""
    types = setting_types(declared)
    clashing = RESERVED_KEYS | frozenset(reserved)
    for key in settings:
        if key in clashing:
            raise ConfigError(
                f"{PREFIX}.{key}: a method setting must not be named like an instruction key "
                f"({key!r} is one every instruction carries)"
            )
    for key in settings:
        if key not in types:
            close = difflib.get_close_matches(key, list(types), n=1, cutoff=0.6)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            known = ", ".join(types) or "(none)"
            raise ConfigError(f"unknown setting {PREFIX}.{key}{hint}; settings: {known}")
    for f in dataclasses.fields(declared):
        if f.name not in settings:
            raise ConfigError(f"{PREFIX}.{f.name} is missing (the method declares it)")
        value, kind = settings[f.name], types[f.name]
        if not _has_type(value, kind):
            raise ConfigError(f"{PREFIX}.{f.name} must be {_type_name(kind)}, got {value!r}")
        rule = f.metadata.get("rule")
        if rule is not None:
            rule(f"{PREFIX}.{f.name}", value)


def read_settings(declared: type, values: Mapping[str, Any]) -> Any:
    """The ``declared`` settings read from ``values`` (an instruction or the YAML section;
    other keys are ignored), each as its declared type."""
    return read_declared(declared, values)
