"""MOON server (Li, He & Song, CVPR 2021): FedAvg's; the method is the client's contrastive term."""

from strategies.base.averaging import AveragingStrategy


class MOONStrategy(AveragingStrategy):
    """MOON's server is FedAvg's: only the local objective changes."""
