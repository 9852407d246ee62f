"""FedAvg + fine-tuning: FedAvg's server unchanged (its clients fine-tune the global model
into their personal models, :mod:`clients.fedavg_ft`, which never reach the server)."""

from strategies.base.averaging import AveragingStrategy


class FedAvgFTStrategy(AveragingStrategy):
    """Server side of FedAvg + FT."""
