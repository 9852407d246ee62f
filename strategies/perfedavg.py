"""Per-FedAvg server (Fallah et al., NeurIPS 2020): FedAvg's; the method is the client's
MAML step."""

from strategies.base.averaging import AveragingStrategy


class PerFedAvgStrategy(AveragingStrategy):
    """Per-FedAvg's server is FedAvg's: only the local update changes."""
