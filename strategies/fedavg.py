"""FedAvg (McMahan et al., 2017, Algorithm 1): the base strategy unchanged.

Local models are averaged weighted by the clients' sample counts n_k / n; sampling,
dropout, validation and evaluation come from :class:`strategies.base.BaseStrategy`.
"""

from strategies.base import BaseStrategy, PersonalEvaluation


class FedAvgStrategy(PersonalEvaluation, BaseStrategy):
    """Server side of FedAvg."""

    #: the next round starts from the aggregate alone, so its clients need not wait for
    #: this round's test (without personal evaluation, see the round loop)
    evaluation_overlaps_next_round = True
