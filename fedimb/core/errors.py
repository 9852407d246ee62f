"""Errors that the front end reports as one line, before any training starts."""


class FedimbError(Exception):
    """Base class of errors that carry a complete, user-facing one-line message."""


class ConfigError(FedimbError, ValueError):
    """The experiment configuration is invalid (unknown choice, value out of range)."""


class DataUnavailableError(FedimbError, RuntimeError):
    """A data set cannot be loaded here (offline, or no local copy)."""
