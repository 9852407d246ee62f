"""The types of what Flower hands a strategy's ``aggregate_fit`` and
``aggregate_evaluate``: each contacted client's reply, and the failures."""

from __future__ import annotations

from typing import TypeAlias

from flwr.common import EvaluateRes, FitRes
from flwr.server.client_proxy import ClientProxy

FitReplies: TypeAlias = list[tuple[ClientProxy, FitRes]]
FitFailures: TypeAlias = list[tuple[ClientProxy, FitRes] | BaseException]
EvaluateReplies: TypeAlias = list[tuple[ClientProxy, EvaluateRes]]
EvaluateFailures: TypeAlias = list[tuple[ClientProxy, EvaluateRes] | BaseException]
