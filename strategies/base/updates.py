"""Accepting client updates: failures counted, updates checked before they are
aggregated (the sent model's shapes and dtypes, finite values, sample counts, metrics,
named payloads), in a fixed order."""

from __future__ import annotations

import math
from typing import Any, Protocol

import numpy as np
from flwr.common import FitRes, parameters_to_ndarrays
from flwr.server.client_proxy import ClientProxy

from fedimb.app.nodes.node_proxy import ClientFailure
from fedimb.app.nodes.registry import ClientRegistry
from fedimb.app.server.run_context import ServerRun
from fedimb.core import payload, protocol, schema
from strategies.base.accounting import RoundAccounting
from strategies.base.round_log import ClientUpdate, RoundLog

#: how every rejection for NaN/Inf values ends, so that they are counted apart (``nonfinite``)
NONFINITE = schema.NONFINITE
#: how far a reported loss may differ from the server's own computation of it (relative):
#: float32 sums in another order or on another device differ by far less than 1e-3
LOSS_TOLERANCE = 1e-3
#: the most metrics one fit result may carry, and the longest key or text among them
MAX_METRICS = 256
MAX_TEXT = 1024


def model_mismatch(
    sent: list[tuple[tuple[int, ...], np.dtype]], arrays: list[np.ndarray]
) -> str | None:
    """Why ``arrays`` are not a model like the one sent (``sent``: each array's shape and
    dtype), or hold values that are not finite numbers of their dtype. A dtype must match
    exactly: averaging takes the first update's dtype, so one client sending int64 or
    float16 arrays would silently change the global model's."""
    shapes = [a.shape for a in arrays]
    expected = [shape for shape, _ in sent]
    if shapes != expected:
        return (
            f"expected {len(expected)} arrays of shapes {expected[:3]}..., "
            f"got {len(shapes)} of {shapes[:3]}..."
        )
    for i, (arr, (_, dtype)) in enumerate(zip(arrays, sent)):
        if arr.dtype != dtype:
            return f"array {i} is {arr.dtype}, the server sent {dtype}"
        if np.issubdtype(arr.dtype, np.floating) and arr.size:
            largest = float(np.abs(arr).max())  # NaN if any value is: one pass for both checks
            if not math.isfinite(largest):
                return f"array {i} {NONFINITE}"
            # a norm or a product would be inf
            if largest > math.sqrt(float(np.finfo(arr.dtype).max)):
                return (
                    f"array {i} holds values whose square overflows {arr.dtype} "
                    f"(largest magnitude {largest:.3g})"
                )
    return None


def metrics_problem(metrics: dict) -> str | None:
    """Why a fit result's metrics cannot be kept: more than ``MAX_METRICS`` entries besides
    the named arrays (whose names the method declares), or a key or a text longer than
    ``MAX_TEXT`` characters. A number that is not finite, like a text, is left out of the
    round's means (:meth:`BaseStrategy.aggregate_metrics`) rather than costing the update:
    a diverging client's loss may overflow while its model is still finite, and the
    losses a method weighs with are checked on their own (:func:`positive_metric`)."""
    count = sum(not (isinstance(key, str) and key.startswith(payload.PREFIX)) for key in metrics)
    if count > MAX_METRICS:
        return f"{count:,} metrics, more than {MAX_METRICS}"
    for key, value in metrics.items():
        if not isinstance(key, str) or len(key) > MAX_TEXT:
            return f"a metric key of {len(str(key)):,} characters (limit {MAX_TEXT})"
        if isinstance(value, str) and len(value) > MAX_TEXT:
            return f"metric '{key}' is a text of {len(value):,} characters (limit {MAX_TEXT})"
    return None


def positive_metric(res, key: str) -> str | None:
    """Why ``res.metrics[key]`` cannot serve as a loss, or None."""
    value = payload.scalars(res.metrics).get(key)
    if value is None or not math.isfinite(value) or value <= 0:
        return f"{key} must be a positive number, got {res.metrics.get(key)!r}"
    return None


#: each array's shape and dtype, as sent to a client
Layout = list[tuple[tuple[int, ...], np.dtype]]


class UpdatesHost(Protocol):
    """What :class:`UpdateChecks` reads of the strategy it is part of (its own methods
    that call one another are listed too)."""

    run: ServerRun
    registry: ClientRegistry
    round_log: RoundLog
    accounting: RoundAccounting
    current_weights: list[np.ndarray] | None
    #: per client, the layout of the model it was sent this round
    sent_layouts: dict[int, Layout]

    def in_partition_order(
        self, results: list[tuple[ClientProxy, Any]]
    ) -> list[tuple[ClientProxy, Any]]: ...
    def accept_update(self, pid: int | None, res: FitRes) -> ClientUpdate | str: ...
    def check_update(
        self, pid: int | None, arrays: list[np.ndarray], res: FitRes
    ) -> str | None: ...
    def check_num_examples(self, pid: int, num_examples: Any) -> str | None: ...
    def training_size(self, pid: int) -> int: ...
    def bound_update_norms(self, updates: list[ClientUpdate]) -> None: ...
    def bounded_num_examples(self, pid: int, num_examples: int) -> int: ...
    def check_payloads(
        self, named: dict[str, np.ndarray], num_examples: int | None = None
    ) -> str | None: ...


class UpdateChecks:
    """The base strategy's handling of fit results (a part of
    :class:`strategies.base.BaseStrategy`)."""

    def accept_updates(self: UpdatesHost, results, failures) -> list[ClientUpdate]:
        """Turn Flower results into validated :class:`ClientUpdate` objects. Each reply is
        decoded and checked inside one guard: whatever fails is that client's rejection
        (counted, its cause in one note), never an exception out of the round."""
        for failure in failures:
            self.round_log.errors += 1
            if isinstance(failure, ClientFailure):
                self.round_log.note(str(failure))
            elif isinstance(failure, BaseException):
                self.round_log.note(f"client failed: {type(failure).__name__}: {failure}")
            else:
                proxy, res = failure
                self.round_log.note(
                    f"client {self.registry.partition_of(proxy)} failed: {res.status.message}"
                )
        updates = []
        for proxy, res in self.in_partition_order(results):
            pid = self.registry.partition_of(proxy)
            try:
                update = self.accept_update(pid, res)
            except Exception as err:  # whatever a crafted reply makes decoding or a check raise
                update = f"unreadable update ({type(err).__name__}: {err})"
            if isinstance(update, str):
                self.round_log.rejected += 1
                self.round_log.nonfinite += update.endswith(NONFINITE)
                self.round_log.note(f"update of client {pid} rejected: {update}")
                continue
            updates.append(update)
        self.round_log.succeeded = len(updates)
        if len(updates) > 1:
            self.bound_update_norms(updates)
        return updates

    def in_partition_order(
        self: UpdatesHost, results: list[tuple[ClientProxy, Any]]
    ) -> list[tuple[ClientProxy, Any]]:
        """``results`` sorted by partition id. Flower lists replies in the order they
        arrive, which varies from run to run; floating-point sums over clients in a fixed
        order make a seeded run repeat to the last bit (unknown senders go last)."""

        def key(item):
            pid = self.registry.partition_of(item[0])
            return (pid is None, -1 if pid is None else int(pid))

        return sorted(results, key=key)

    def accept_update(self: UpdatesHost, pid: int | None, res: FitRes) -> ClientUpdate | str:
        """One client's reply as an accepted update, or why it is rejected (one line)."""
        metrics = self.accounting.count_received(pid, res)
        try:
            arrays = parameters_to_ndarrays(res.parameters)
        except Exception as err:
            return f"undecodable parameters ({err})"
        problem = self.check_update(pid, arrays, res)
        if problem:
            return problem
        num_examples = self.bounded_num_examples(int(pid), int(res.num_examples))
        return ClientUpdate(int(pid), arrays, num_examples, metrics)

    def check_update(
        self: UpdatesHost, pid: int | None, arrays: list[np.ndarray], res: FitRes
    ) -> str | None:
        """Why an update must not be aggregated, or None if it is acceptable: the model
        the client was sent (shapes and dtypes), finite values, a sample count it can
        have, bounded finite metrics, then the method's named arrays."""
        if pid is None or pid not in self.sent_layouts:
            return "from a client that was not asked to train"
        problem = (
            model_mismatch(self.sent_layouts[pid], arrays)
            or self.check_num_examples(pid, res.num_examples)
            or metrics_problem(res.metrics)
        )
        if problem:
            return problem
        try:
            named = payload.unpack(res.metrics)
        except Exception as err:  # not an ndarray_to_bytes encoding
            return f"undecodable payload ({type(err).__name__}: {err})"
        return self.check_payloads(named, res.num_examples)

    def check_reported_loss(self: UpdatesHost, pid: int, res: FitRes, key: str) -> str | None:
        """Why the loss ``key`` a client reports for its weight cannot be used, or None: it
        must be a positive finite number, and where it is the loss of the model the client
        was sent on its own training data (``initial_loss``) and the server holds that data
        (every client but a device with its own), the server computes it too and the two
        must agree (:data:`LOSS_TOLERANCE`): one inflated loss would otherwise take a
        loss-weighted average (F_k^q) for itself."""
        problem = positive_metric(res, key)
        if problem or key != protocol.INITIAL_LOSS or self.registry.has_own_data(pid):
            return problem
        reported = payload.scalars(res.metrics)[key]
        actual = self.run.client_training_loss(self.current_weights, pid)
        if not math.isclose(reported, actual, rel_tol=LOSS_TOLERANCE):
            return (
                f"{key} {reported:.6g} is not the loss of the model it was sent "
                f"on its training data ({actual:.6g})"
            )
        return None

    def check_num_examples(self: UpdatesHost, pid: int, num_examples) -> str | None:
        """``num_examples`` must be an integer between 1 and the client's training-set
        size: it weighs the client's update, and the server knows that size."""
        if not isinstance(num_examples, int) or isinstance(num_examples, bool) or num_examples <= 0:
            return f"num_examples must be a positive integer, got {num_examples!r}"
        most = self.training_size(pid)
        if num_examples > most:
            return (
                f"num_examples {num_examples:,} exceeds the {most:,} "
                "training samples this client holds"
            )
        return None

    def training_size(self: UpdatesHost, pid: int) -> int:
        """The most samples client ``pid`` trains on: its partition's size, which the
        server computed itself; for a device with its own data, the size it announced
        when it joined (the server cannot know better). Methods that resample a
        client's data (Astraea) override it."""
        if self.registry.has_own_data(pid):
            return int(self.registry.info(pid).num_examples)
        return int(self.run.data.partition.counts[pid].sum())
