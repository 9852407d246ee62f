"""FedNova client (Wang et al., NeurIPS 2020): FedAvg's; it reports its local steps, which
every client does, and the server normalises by them."""

from clients.base_shared import AveragingClient


class FedNovaClient(AveragingClient):
    """FedNova's client is FedAvg's: only the server step changes."""
