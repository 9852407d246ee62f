"""Errors that the front end reports as one line, before any training starts, and the
helpers that settings' rules are written with."""

from typing import TypeGuard


class FedimbError(Exception):
    """Base class of errors that carry a complete, user-facing one-line message."""


class ConfigError(FedimbError, ValueError):
    """The experiment configuration is invalid (unknown choice, value out of range)."""


class DataUnavailableError(FedimbError, RuntimeError):
    """A data set cannot be loaded here (offline, or no local copy)."""


def require(condition: bool, message: str) -> None:
    """One-line :class:`ConfigError` with ``message`` unless ``condition`` holds."""
    if not condition:
        raise ConfigError(message)


def is_int(value) -> TypeGuard[int]:
    """An integer setting (``True`` is not one, although Python counts it as 1)."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value) -> TypeGuard[float]:
    """A numeric setting (an integer or a float, not a boolean)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def check_choice(key: str, value, choices) -> None:
    """One-line :class:`ConfigError` when setting ``key`` is not one of ``choices``."""
    if value not in choices:
        raise ConfigError(f"unknown {key} {value!r} (choose from: {', '.join(map(str, choices))})")


def check_number(
    key: str, value, low: float, *, strict: bool = False, integer: bool = False
) -> None:
    """One-line :class:`ConfigError` when setting ``key`` is not a number (an integer with
    ``integer``) at least ``low`` (above it with ``strict``)."""
    kind = int if integer else (int, float)
    ok = (
        isinstance(value, kind)
        and not isinstance(value, bool)
        and (value > low if strict else value >= low)
    )
    if not ok:
        what = f"{'an integer ' if integer else ''}{'>' if strict else '>='} {low}"
        raise ConfigError(f"{key} must be {what}, got {value!r}")


def one_of(*choices):
    """A setting rule: the value is one of ``choices`` (see ``check_settings`` of clients)."""
    return lambda key, value: check_choice(key, value, choices)


def at_least(low: float, *, strict: bool = False, integer: bool = False):
    """A setting rule: a number at least (with ``strict``: above) ``low``."""
    return lambda key, value: check_number(key, value, low, strict=strict, integer=integer)


def optional(rule):
    """A setting rule: null, or a value that ``rule`` accepts."""
    return lambda key, value: None if value is None else rule(key, value)


def check_rules(rules: dict, settings, prefix: str) -> None:
    """Apply each ``rules[key]`` (:func:`one_of`, :func:`at_least`) to ``settings[key]``,
    naming the setting ``<prefix>.<key>`` in the error."""
    for key, rule in rules.items():
        rule(f"{prefix}.{key}", settings.get(key))
