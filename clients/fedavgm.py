"""FedAvgM client (Hsu et al., 2019): FedAvg's; the method is the server's momentum."""

from clients.base_shared import AveragingClient


class FedAvgMClient(AveragingClient):
    """FedAvgM's client is FedAvg's: only the server step changes."""
