"""Settings declared as a dataclass (its fields the keys, each with its type and, through
:func:`setting`, a rule) and read from a mapping with every value as its declared type:
the one reading shared by the training settings, the Synthetic data set's settings and
the methods' client and strategy settings. :func:`check_declared` rejects a missing,
unknown, mistyped or rule-breaking setting with one line."""

from __future__ import annotations

import dataclasses
import difflib
import typing
from collections.abc import Callable, Mapping
from types import NoneType, UnionType
from typing import Any

from fedimb.core.errors import ConfigError
from fedimb.core.process_cache import ProcessCache, cache_key

_TYPES: ProcessCache[dict[str, Any]] = ProcessCache()


def setting_types(declared: type) -> dict[str, Any]:
    """Each field of the ``declared`` dataclass with its type, resolved once per process:
    resolving compiles the annotations, which Python 3.11 must not do in several threads at
    once (in-process clients read their settings in parallel)."""
    return _TYPES.get(cache_key(declared), lambda: _resolve_types(declared))


def _resolve_types(declared: type) -> dict[str, Any]:
    hints = typing.get_type_hints(declared)
    return {f.name: hints[f.name] for f in dataclasses.fields(declared)}


def type_options(kind: Any) -> tuple[Any, ...]:
    """The types a declared type allows (``float | None``: float and NoneType)."""
    return typing.get_args(kind) if isinstance(kind, UnionType) else (kind,)


def as_declared(value: Any, kind: Any) -> Any:
    """``value`` as its declared type (a float setting given as an int becomes a float;
    a null stays null)."""
    if value is None:
        return None
    target = next(o for o in type_options(kind) if o is not NoneType)
    return target(value)


def read_declared(declared: type, values: Mapping[str, Any]) -> Any:
    """The ``declared`` dataclass read from ``values`` (other keys are ignored), each
    field as its declared type."""
    return declared(
        **{name: as_declared(values[name], kind) for name, kind in setting_types(declared).items()}
    )


def setting(rule: Callable[[str, Any], None] | None = None) -> Any:
    """A declared setting with a rule checked with the configuration (no default)."""
    return dataclasses.field(metadata={"rule": rule} if rule is not None else {})


@dataclasses.dataclass(frozen=True)
class NoSettings:
    """The declaration of a component without settings."""


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


def check_declared(declared: type, settings: Mapping[str, Any], prefix: str) -> None:
    """One-line :class:`ConfigError` for the first setting of ``settings`` (the section
    ``prefix``) that the ``declared`` dataclass does not declare, that is missing, of the
    wrong type or against its rule."""
    types = setting_types(declared)
    for key in settings:
        if key not in types:
            close = difflib.get_close_matches(key, list(types), n=1, cutoff=0.6)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            known = ", ".join(types) or "(none)"
            raise ConfigError(f"unknown setting {prefix}.{key}{hint}; settings: {known}")
    for f in dataclasses.fields(declared):
        if f.name not in settings:
            raise ConfigError(f"{prefix}.{f.name} is missing (the method declares it)")
        value, kind = settings[f.name], types[f.name]
        if not _has_type(value, kind):
            raise ConfigError(f"{prefix}.{f.name} must be {_type_name(kind)}, got {value!r}")
        rule = f.metadata.get("rule")
        if rule is not None:
            rule(f"{prefix}.{f.name}", value)
