"""FedAvg (McMahan et al., 2017, Algorithm 1): the base strategy unchanged.

Local models are averaged weighted by the clients' sample counts n_k / n; sampling,
dropout, validation and evaluation come from :class:`strategies.base.BaseStrategy`.
"""

from strategies.base.averaging import AveragingStrategy


class FedAvgStrategy(AveragingStrategy):
    """Server side of FedAvg."""
