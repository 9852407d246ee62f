"""The base strategy every method's strategy subclasses, by job: :mod:`.strategy` (the
class itself: settings, the round's identity and checkpoint state, Flower's fit step),
:mod:`.sampling` (discovery and sampling), :mod:`.updates` and :mod:`.payload_checks` (checking
what clients send), :mod:`.aggregation` (from updates to the global model),
:mod:`.evaluation` (the server's test and the local evaluation), :mod:`.accounting` (the
round's timing and bytes), :mod:`.round_log` (what a round reports),
:mod:`.personal_evaluation` (GRP-FED §4.1's scores, a mixin) and :mod:`.replies` (the
types of the clients' replies). Each mixin declares what it reads of the strategy as a
``typing.Protocol``, the type of ``self`` in its methods."""

from strategies.base.accounting import RoundAccounting, parameters_nbytes
from strategies.base.personal_evaluation import PersonalEvaluation
from strategies.base.round_log import ClientUpdate, RoundLog
from strategies.base.strategy import BaseStrategy
from strategies.base.updates import NONFINITE

__all__ = [
    "BaseStrategy",
    "ClientUpdate",
    "NONFINITE",
    "PersonalEvaluation",
    "RoundAccounting",
    "RoundLog",
    "parameters_nbytes",
]
