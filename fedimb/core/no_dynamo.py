"""Optimisers that never import TorchDynamo.

``torch.optim`` guards several ``Optimizer`` methods against ``torch.compile`` by
importing ``torch._dynamo`` the first time they run (``add_param_group`` in the
constructor, ``zero_grad``, ``state_dict``), and ``step`` imports it on every call to
insert graph breaks. The import costs seconds of CPU, paid by every fresh process: each
message a deployed ClientApp serves, each Ray actor's first round. fedimb never compiles
a model, so these guards have nothing to guard: :func:`without_dynamo` marks the guarded
methods as already guarded and gives an optimiser a ``step`` that runs the same update
function directly under ``torch.no_grad()`` (what the guard does, less the graph
breaks). The update is bit-identical (tests/unit/test_no_dynamo.py). Should a future
torch change these wrappers, nothing is patched and torch's own methods run.
"""

from __future__ import annotations

import functools
from typing import Any

import torch

from fedimb.core.process_cache import ProcessCache, cache_key

_GUARDED = ("add_param_group", "zero_grad", "state_dict", "load_state_dict")
#: whether this process has marked torch's guards (one entry)
_GUARDS_MARKED: ProcessCache[None] = ProcessCache()


def _mark_guards_done() -> None:
    """Let torch's lazy ``_disable_dynamo`` wrappers call the plain method (once per process)."""
    _GUARDS_MARKED.get(cache_key("torch.optim guards"), _mark_guards)


def _mark_guards() -> None:
    try:
        from torch._compile import _disable_dynamo
    except ImportError:
        return
    wrapper_code = _disable_dynamo(lambda: None).__code__
    for name in _GUARDED:
        method = getattr(torch.optim.Optimizer, name, None)
        inner = getattr(method, "__wrapped__", None)
        if getattr(method, "__code__", None) is wrapper_code and inner is not None:
            inner.__dynamo_disable = (
                inner  # what the wrapper would have cached after importing dynamo
            )


def _update_function(optimizer_class: type[torch.optim.Optimizer]):
    """The optimiser's own ``step`` below torch's wrappers (profiling hook, grad-mode guard)."""
    step: Any = optimizer_class.step
    while hasattr(step, "__wrapped__"):
        step = step.__wrapped__
    return step


def without_dynamo(make):
    """``make()`` (an optimiser) built and stepped without importing TorchDynamo."""
    _mark_guards_done()
    optimizer = make()
    update = _update_function(type(optimizer))
    if update is not type(optimizer).step:

        @functools.wraps(update)
        def step(closure=None):
            with torch.no_grad():
                return update(optimizer, closure)

        optimizer.step = step
    return optimizer
