"""Settings declared as a dataclass (its fields the keys, each with its type) and read
from a mapping with every value as its declared type: the one reading shared by the
training settings, the Synthetic data set's settings and the methods' client settings."""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping
from types import NoneType, UnionType
from typing import Any

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
