"""Checking the named arrays clients send against the method's payload declarations
(:attr:`PayloadChecks.payloads`, the sizes they refer to): those of fit results and
those of answers to the server's properties queries (a label histogram, a label
distribution, test-set probabilities). A part of :class:`strategies.base.BaseStrategy`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import numpy as np

from fedimb.app.server.run_context import ServerRun
from fedimb.core import payload, protocol, schema
from fedimb.core.models import trainable_indices
from strategies.base.round_log import RoundLog


class PayloadsHost(Protocol):
    """What :class:`PayloadChecks` reads of the strategy it is part of (its own methods
    that call one another are listed too)."""

    run: ServerRun
    round_log: RoundLog
    payloads: tuple[schema.PayloadSpec, ...]
    _payload_sizes: dict[str, object] | None

    def payload_sizes(self, num_examples: int | None = None) -> dict[str, object]: ...
    def check_answer(
        self, answer: Any, num_examples: Any, names: tuple[str, ...]
    ) -> str | None: ...


class PayloadChecks:
    """Which named arrays of a fit result or an answer a method may read."""

    def check_payloads(
        self: PayloadsHost, named: dict[str, np.ndarray], num_examples: int | None = None
    ) -> str | None:
        """Why the named arrays of one fit result must not be read, or None: each checked
        against the method's declared :attr:`payloads` (``num_examples``: the reply's)."""
        return schema.check(named, self.payloads, self.payload_sizes(num_examples))

    #: the named arrays the method exchanges (:mod:`fedimb.core.protocol`); any other is rejected
    payloads: tuple[schema.PayloadSpec, ...] = protocol.BASE_PAYLOADS

    def payload_sizes(self: PayloadsHost, num_examples: int | None = None) -> dict[str, object]:
        """The sizes declared payload shapes and bounds refer to, for one reply."""
        if getattr(self, "_payload_sizes", None) is None:
            model = self.run.new_model()
            trainable = trainable_indices(model)
            initial = self.run.initial_weights()
            self._payload_sizes = {
                schema.NUM_CLASSES: self.run.num_classes,
                schema.MAX_CLASS: self.run.num_classes - 1,
                schema.FEATURE_DIM: int(model.feature_dim),
                schema.MODEL: [initial[i].shape for i in trainable],
            }
        return {**self._payload_sizes, protocol.NUM_EXAMPLES: num_examples}

    def check_answer(
        self: PayloadsHost, answer, num_examples, names: tuple[str, ...]
    ) -> str | None:
        """Why the named arrays ``names`` of a client's properties answer (a label histogram,
        a label distribution) must not be read, or None: checked against the method's
        declarations like a fit result's (``num_examples``: what the client announced)."""
        if not isinstance(num_examples, int) or isinstance(num_examples, bool) or num_examples <= 0:
            return f"num_examples must be a positive integer, got {num_examples!r}"
        try:
            named = payload.unpack(answer) if answer is not None else {}
        except Exception as err:  # not an ndarray_to_bytes encoding
            return f"undecodable payload ({type(err).__name__}: {err})"
        specs = [s for s in self.payloads if s.direction == schema.ANSWER and s.name in names]
        return schema.check(
            {n: a for n, a in named.items() if n in names},
            specs,
            self.payload_sizes(num_examples),
            schema.ANSWER,
        )

    def valid_answers(
        self: PayloadsHost,
        reported: dict,
        name: str,
        left_out_of: str,
        plausible: Callable[[int, np.ndarray], str | None] | None = None,
    ) -> dict[int, np.ndarray]:
        """The arrays ``name`` that match their declaration, by client (``reported``:
        client -> (its sample count, the array or its properties answer)), and the
        method's own test ``plausible`` (client, array -> why not, or None) where given;
        the other clients are left out of ``left_out_of`` with one note, and counted."""
        valid, problems = {}, {}
        for pid, (num_examples, reply) in sorted(reported.items()):
            try:
                answer = payload.pack({name: reply}) if isinstance(reply, np.ndarray) else reply
                problem = self.check_answer(answer, num_examples, (name,))
                if problem is None and plausible is not None:
                    problem = plausible(pid, payload.unpack(answer)[name])
            except Exception as err:  # whatever a crafted answer makes encoding or a check raise
                problem = f"unreadable answer ({type(err).__name__}: {err})"
            if problem:
                problems[pid] = problem
            else:
                valid[pid] = payload.unpack(answer)[name]
        if problems:
            pid, problem = next(iter(problems.items()))
            clients = "1 client" if len(problems) == 1 else f"{len(problems)} clients"
            self.round_log.note(
                f"{clients} left out of {left_out_of}: {name} invalid (client {pid}: {problem})"
            )
            self.round_log.extra["clients_left_out"] = self.round_log.extra.get(
                "clients_left_out", 0
            ) + len(problems)
        return valid
