"""fedimb: federated learning under label imbalance, non-IID data and client dropout."""

__version__ = "0.1.0"
