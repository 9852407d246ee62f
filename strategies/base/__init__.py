"""The base strategy every method's strategy subclasses (DESIGN §4.3), by job:
:mod:`.strategy` (sampling, dropout, instructions, aggregation, evaluation),
:mod:`.updates` (accepting and checking client updates), :mod:`.round_log` (what a
round reports) and :mod:`.personal_evaluation` (GRP-FED §4.1's scores, a mixin)."""

from strategies.base.personal_evaluation import PersonalEvaluation
from strategies.base.round_log import ClientUpdate, RoundLog
from strategies.base.strategy import BaseStrategy
from strategies.base.updates import NONFINITE, parameters_nbytes

__all__ = [
    "BaseStrategy",
    "ClientUpdate",
    "NONFINITE",
    "PersonalEvaluation",
    "RoundLog",
    "parameters_nbytes",
]
