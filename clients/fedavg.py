"""FedAvg client (McMahan et al., 2017): E epochs of mini-batch SGD on local data with
cross-entropy — the base client unchanged."""

from clients.base_shared import AveragingClient


class FedAvgClient(AveragingClient):
    """Local side of FedAvg."""
