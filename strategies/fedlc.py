"""FedLC server (Zhang et al., ICML 2022): FedAvg's; the method is the client's
logit calibration."""

from strategies.base.averaging import AveragingStrategy


class FedLCStrategy(AveragingStrategy):
    """FedLC's server is FedAvg's: only the local loss changes."""
