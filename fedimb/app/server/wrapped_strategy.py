"""A run's strategy behind a wrapper that changes some of Flower's hooks (differential
privacy, an omniscient attack): the hooks the wrapper does not override, and every other
attribute, read or set, are the run's strategy's, so the round loop and the checkpoints
see the method's strategy through it."""

from __future__ import annotations

from typing import Any

from flwr.server.strategy import Strategy


class WrappedStrategy(Strategy):
    """The method's strategy (``inner``) behind a wrapper; a subclass overrides the hooks
    it changes and names the attributes it keeps for itself in ``own``."""

    #: the wrapper's own attributes; every other one is the method's strategy's
    own: frozenset[str] = frozenset({"inner"})

    def __init__(self, inner: Strategy):
        object.__setattr__(self, "inner", inner)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name in self.own:
            object.__setattr__(self, name, value)
        else:
            setattr(self.inner, name, value)

    def initialize_parameters(self, client_manager):
        return self.inner.initialize_parameters(client_manager)

    def configure_fit(self, server_round, parameters, client_manager):
        return self.inner.configure_fit(server_round, parameters, client_manager)

    def aggregate_fit(self, server_round, results, failures):
        return self.inner.aggregate_fit(server_round, results, failures)

    def configure_evaluate(self, server_round, parameters, client_manager):
        return self.inner.configure_evaluate(server_round, parameters, client_manager)

    def aggregate_evaluate(self, server_round, results, failures):
        return self.inner.aggregate_evaluate(server_round, results, failures)

    def evaluate(self, server_round, parameters):
        return self.inner.evaluate(server_round, parameters)
