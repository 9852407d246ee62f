"""q-FFL client (Li et al., ICLR 2020): FedAvg's local training plus F_k, the received
model's loss on the local data, reported as ``initial_loss``."""

from clients.base_shared import InitialLossClient


class QFFLClient(InitialLossClient):
    """q-FFL's client reports the received model's loss (the loss powers' F_k)."""
