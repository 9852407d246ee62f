"""BSM-FedAvg server: FedAvg's; the method is the client's balanced softmax."""

from strategies.base.averaging import AveragingStrategy


class BSMFedAvgStrategy(AveragingStrategy):
    """BSM-FedAvg's server is FedAvg's: only the local loss changes."""
