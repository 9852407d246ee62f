"""FedETF server (Li et al., ICCV 2023): FedAvg of encoder, projection and temperature
(the fixed ETF is in no state_dict, so it is neither sent nor averaged), with the
personal evaluation of the clients' locally adapted models."""

from strategies.base.averaging import AveragingStrategy


class FedETFStrategy(AveragingStrategy):
    """Server side of FedETF: FedAvg's."""
