"""FedAvg client (McMahan et al., 2017): E epochs of mini-batch SGD on local data with
cross-entropy — the base client unchanged."""

from clients.base import BaseClient, PersonalEvaluation


class FedAvgClient(PersonalEvaluation, BaseClient):
    """Local side of FedAvg."""
