"""AFL client (Mohri et al., ICML 2019): FedAvg's local training plus the received
model's loss on the local data (the mixture weights' gradient), as ``initial_loss``."""

from clients.base_shared import InitialLossClient


class AFLClient(InitialLossClient):
    """AFL's client reports the received model's loss (the mixture gradient)."""
