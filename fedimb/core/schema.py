"""Declared shapes and bounds of named payloads (:mod:`fedimb.core.payload`).

A method declares each named array it exchanges once, as a :class:`PayloadSpec`
(:mod:`fedimb.core.protocol` keeps the declarations, so both halves of a method read the
same ones). The server checks what a client sends against them with :func:`check`
before any method code reads it: a client's arrays are untrusted, and a method's own
reading (stacking, indexing, weighting) must never be where a bad one is found.

Shapes are tuples whose entries are a number, a size the run knows (``num_classes``,
``feature_dim``, ``num_examples``) or a single letter, a size that may vary but must be
the same wherever the letter appears in one reply (e.g. ReBaFL's ``k`` reported
classes). ``shape="model"`` stands for the ``<j>``-th trainable parameter's shape, for
names such as ``control_delta.<j>``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

#: how a rejection for NaN/Inf values ends, so that it is counted apart (``nonfinite``)
NONFINITE = "holds NaN or Inf"

UP = "up"  # a fit result, client -> server
DOWN = "down"  # an instruction, server -> client
ANSWER = "answer"  # an answer to a properties query or an evaluation, client -> server

# the sizes a run knows, by the names declared shapes and bounds use
NUM_CLASSES = "num_classes"
MAX_CLASS = "max_class"  # num_classes - 1, the largest class index
FEATURE_DIM = "feature_dim"  # the encoder's output width
NUM_TEST = "num_test"  # the global test set's size
MODEL = "model"  # the trainable parameters' shapes (``shape=MODEL``)


@dataclass(frozen=True)
class PayloadSpec:
    """One named array: what it may hold.

    ``bound``: the largest magnitude of any entry (a number or a size the run knows);
    ``total``: what the entries must sum to (``num_examples``, or e.g. 1.0 for a
    distribution, to a relative 1e-4); ``required``: every reply must carry it (a
    ``<j>`` pattern: once per trainable parameter); ``unique``: no entry repeated (an
    array of class indices whose rows stand for those classes)."""

    name: str
    direction: str
    kind: str = "float"  # "float" | "integer"
    shape: tuple | str = ()  # the dimensions, or MODEL (the only shape given by name)
    nonnegative: bool = False
    bound: float | str | None = None
    total: float | str | None = None
    required: bool = False
    unique: bool = False  # no value twice (rows that stand for classes)

    def matches(self, name: str) -> int | None:
        """The ``<j>`` of ``name`` under this spec (0 for a plain name), or None."""
        if "<j>" not in self.name:
            return 0 if name == self.name else None
        found = re.fullmatch(re.escape(self.name).replace("<j>", r"(\d{1,6})"), name)
        return int(found.group(1)) if found else None

    def expected_names(self, sizes: Mapping[str, object]) -> list[str]:
        if "<j>" not in self.name:
            return [self.name]
        return [self.name.replace("<j>", str(j)) for j in range(len(model_shapes(sizes)))]


def model_shapes(sizes: Mapping[str, object]) -> list[tuple[int, ...]]:
    """The trainable parameters' shapes the run gives (``sizes[MODEL]``; none without)."""
    shapes = sizes.get(MODEL, ())
    if not isinstance(shapes, (list, tuple)):
        raise TypeError(f"sizes[{MODEL!r}] must list the trainable parameters' shapes")
    return [tuple(shape) for shape in shapes]


def shown(name: str) -> str:
    """A client-chosen name as it may appear in a one-line note."""
    return repr(name[:40] + ("…" if len(name) > 40 else ""))


def check(
    named: Mapping[str, np.ndarray], specs, sizes: Mapping[str, object], direction: str = UP
) -> str | None:
    """Why ``named`` (one reply's arrays) breaks ``specs``, in one line, or None.

    ``sizes`` gives the run's sizes by name (``num_classes``, ``feature_dim``,
    ``num_examples`` of this reply, ``model``: the trainable parameters' shapes)."""
    specs = [s for s in specs if s.direction == direction]
    letters: dict[str, int] = {}
    for name, arr in named.items():
        found = next(((s, j) for s in specs if (j := s.matches(name)) is not None), None)
        if found is None:
            known = ", ".join(sorted(s.name for s in specs)) or "none"
            return f"unknown payload {shown(name)} (this method reads: {known})"
        problem = check_array(name, np.asarray(arr), *found, sizes, letters)
        if problem:
            return problem
    for spec in specs:
        missing = [n for n in spec.expected_names(sizes) if spec.required and n not in named]
        if missing:
            return f"payload '{missing[0]}' missing"
    return None


def check_array(
    name: str,
    arr: np.ndarray,
    spec: PayloadSpec,
    j: int,
    sizes: Mapping[str, object],
    letters: dict[str, int],
) -> str | None:
    """Why one array breaks its spec, or None (``letters`` binds the free sizes)."""
    wanted = np.floating if spec.kind == "float" else np.integer
    if not np.issubdtype(arr.dtype, wanted):
        return f"payload '{name}' must be {spec.kind}, got {arr.dtype}"
    problem = shape_problem(arr.shape, spec, j, sizes, letters)
    if problem:
        return f"payload '{name}' {problem}"
    if not np.all(np.isfinite(arr)):
        return f"payload '{name}' {NONFINITE}"
    values = arr.astype(np.float64)
    if spec.nonnegative and values.size and values.min() < 0:
        return f"payload '{name}' holds negative values"
    bound = size_of(spec.bound, sizes)
    if bound is not None and values.size and np.abs(values).max() > bound:
        return f"payload '{name}' holds values beyond {bound:g}"
    if spec.unique and np.unique(values).size != values.size:
        return f"payload '{name}' repeats a value"
    total = size_of(spec.total, sizes)
    exact = spec.kind == "integer"  # counts add up exactly; float sums to a relative 1e-4
    if total is not None and not np.isclose(values.sum(), total, rtol=0 if exact else 1e-4, atol=0):
        return f"payload '{name}' sums to {values.sum():g}, expected {total:g}"
    return None


def shape_problem(
    shape: tuple, spec: PayloadSpec, j: int, sizes: Mapping[str, object], letters: dict[str, int]
) -> str | None:
    """Why ``shape`` is not the one ``spec`` declares, or None."""
    if isinstance(spec.shape, str):  # MODEL: the j-th trainable parameter's shape
        model = model_shapes(sizes)
        if j >= len(model):
            return f"names parameter {j} of {len(model)}"
        expected = model[j]
        return None if shape == expected else f"has shape {shape}, expected {expected}"
    if len(shape) != len(spec.shape):
        return f"has shape {shape}, expected {len(spec.shape)} dimensions"
    for dim, want in zip(shape, spec.shape):
        if isinstance(want, str) and len(want) == 1:
            want = letters.setdefault(want, dim)
        elif isinstance(want, str):
            want = sizes.get(want)
        if dim != want:
            names = ", ".join(str(d) for d in spec.shape)
            return f"has shape {shape}, expected {describe(spec.shape, sizes, letters)} ({names})"
    return None


def describe(shape: tuple, sizes: Mapping[str, object], letters: Mapping[str, int]) -> tuple:
    return tuple(letters.get(d, sizes.get(d, d)) if isinstance(d, str) else d for d in shape)


def size_of(value: float | str | None, sizes: Mapping[str, object]) -> float | None:
    """A bound as a number: itself, or the named size (None where the run gives none)."""
    named = sizes.get(value) if isinstance(value, str) else value
    if named is None:
        return None
    if not isinstance(named, (int, float, np.number)):
        raise TypeError(f"size {value!r} is not a number: {named!r}")
    return float(named)
