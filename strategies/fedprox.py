"""FedProx server (Li et al., MLSys 2020): FedAvg's; the method is the client's proximal term."""

from strategies.base.averaging import AveragingStrategy


class FedProxStrategy(AveragingStrategy):
    """FedProx's server is FedAvg's: only the local objective changes."""
