"""Accepting client updates: failures counted, updates checked before they are
aggregated (shapes, NaN/Inf, sample counts, named payloads), in a fixed order."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from flwr.common import FitRes, Parameters, parameters_to_ndarrays
from flwr.server.client_proxy import ClientProxy

from fedimb.app.phases import split_client_timing
from fedimb.app.registry import ClientFailure
from fedimb.core import payload, protocol
from strategies.base.round_log import ClientUpdate

#: how every rejection for NaN/Inf values ends, so that they are counted apart (``nonfinite``)
NONFINITE = "holds NaN or Inf"


def parameters_nbytes(parameters: Parameters) -> int:
    return sum(len(t) for t in parameters.tensors)


def positive_metric(res, key: str) -> str | None:
    """Why ``res.metrics[key]`` cannot serve as a loss, or None."""
    value = payload.scalars(res.metrics).get(key)
    if value is None or not math.isfinite(value) or value <= 0:
        return f"{key} must be a positive number, got {res.metrics.get(key)!r}"
    return None


class UpdateChecks:
    """The base strategy's handling of fit results (a part of :class:`BaseStrategy`)."""

    def accept_updates(self, results, failures) -> list[ClientUpdate]:
        """Turn Flower results into validated :class:`ClientUpdate` objects."""
        for failure in failures:
            self.round_log.errors += 1
            if isinstance(failure, ClientFailure):
                self.round_log.note(str(failure))
            elif isinstance(failure, BaseException):
                self.round_log.note(f"client failed: {type(failure).__name__}: {failure}")
            else:
                proxy, res = failure
                self.round_log.note(f"client {self.registry.partition_of(proxy)} failed: {res.status.message}")
        updates = []
        for proxy, res in self.in_partition_order(results):
            pid = self.registry.partition_of(proxy)
            self.round_log.bytes_up += parameters_nbytes(res.parameters) + payload.nbytes(res.metrics)
            metrics, timing = split_client_timing(dict(res.metrics))  # a rejected client's time counts too
            self.round_log.client_timing[int(pid)] = timing
            try:
                arrays = parameters_to_ndarrays(res.parameters)
            except Exception as err:
                arrays, problem = [], f"undecodable parameters ({err})"
            else:
                problem = self.check_update(pid, arrays, res)
            if problem:
                self.round_log.rejected += 1
                self.round_log.nonfinite += problem.endswith(NONFINITE)
                self.round_log.note(f"update of client {pid} rejected: {problem}")
                continue
            updates.append(ClientUpdate(int(pid), arrays, int(res.num_examples), metrics))
        self.round_log.succeeded = len(updates)
        return updates


    def in_partition_order(self, results: list[tuple[ClientProxy, Any]]) -> list[tuple[ClientProxy, Any]]:
        """``results`` sorted by partition id. Flower lists replies in the order they
        arrive, which varies from run to run; floating-point sums over clients in a fixed
        order make a seeded run repeat to the last bit (unknown senders go last)."""
        def key(item):
            pid = self.registry.partition_of(item[0])
            return (pid is None, -1 if pid is None else int(pid))

        return sorted(results, key=key)


    def check_update(self, pid: int | None, arrays: list[np.ndarray], res: FitRes) -> str | None:
        """Why an update must not be aggregated, or None if it is acceptable."""
        if pid is None or pid not in self._sent_shapes:
            return "from a client that was not asked to train"
        expected = self._sent_shapes[pid]
        shapes = [a.shape for a in arrays]
        if shapes != expected:
            return f"expected {len(expected)} arrays of shapes {expected[:3]}..., got {len(shapes)} of {shapes[:3]}..."
        for i, arr in enumerate(arrays):
            if np.issubdtype(arr.dtype, np.number) and not np.all(np.isfinite(arr)):
                return f"array {i} {NONFINITE}"
        if not isinstance(res.num_examples, int) or res.num_examples <= 0:
            return f"num_examples must be a positive integer, got {res.num_examples!r}"
        try:
            arrays = payload.unpack(res.metrics)
        except Exception as err:  # not an ndarray_to_bytes encoding
            return f"undecodable payload ({type(err).__name__}: {err})"
        known, limit = self.payload_names(), self.payload_limit()
        for name, arr in arrays.items():
            if name not in known:
                return f"unknown payload '{name}' (this method reads: {', '.join(sorted(known))})"
            if arr.size > limit:
                return f"payload '{name}' holds {arr.size:,} values, more than the model's {limit:,} parameters"
            if np.issubdtype(arr.dtype, np.number) and not np.all(np.isfinite(arr)):
                return f"payload '{name}' {NONFINITE}"
        return None

    def payload_names(self) -> set[str]:
        """Names of the named arrays the strategy reads from fit results; any other is
        rejected. Methods whose clients send their own extend it."""
        return {protocol.LATENT_MEAN}

    def payload_limit(self) -> int:
        """The most values one named array may hold: as many as the model has parameters
        (control variates are as large; prototypes, latents and distributions far smaller)."""
        return self.run.num_parameters
