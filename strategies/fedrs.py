"""FedRS server (Li & Zhan, KDD 2021): FedAvg's; the method is the client's restricted softmax."""

from strategies.base.averaging import AveragingStrategy


class FedRSStrategy(AveragingStrategy):
    """FedRS's server is FedAvg's: only the local loss changes."""
