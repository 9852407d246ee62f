"""What a client trains on: its share of the training set and the global test set."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from fedimb.core.errors import ConfigError


@dataclass(frozen=True)
class ClientData:
    """A client's share of the training set (indices into tensors shared per process),
    and the global balanced test set for client-side evaluations of personalised models."""

    partition_id: int
    x: torch.Tensor
    y: torch.Tensor
    indices: torch.Tensor
    num_classes: int
    label_counts: np.ndarray
    x_test: torch.Tensor | None = None
    y_test: torch.Tensor | None = None
    test_indices: torch.Tensor | None = None  # the client's local test split (into x, y)
    validation_indices: torch.Tensor | None = None  # its own validation share (into x, y)
    #: the client's own test set where the data set gives every client one (Synthetic's devices)
    own_test: tuple[torch.Tensor, torch.Tensor] | None = None
    #: fingerprint of a device's own data when its node has no partition id: the server
    #: then assigns the client id (and ``partition_id`` only seeds local randomness)
    device_key: str | None = None

    @property
    def num_examples(self) -> int:
        return int(self.indices.numel())

    def local_test(self) -> tuple[torch.Tensor, torch.Tensor] | None:
        """The client's local test set (inputs, labels): the data set's own test set of this
        client where it has one, else its share held out by ``evaluation.local_test_fraction``;
        None without either."""
        if self.own_test is not None:
            return self.own_test
        if self.test_indices is not None and len(self.test_indices):
            return self.x[self.test_indices], self.y[self.test_indices]
        return None

    def local_validation(self) -> tuple[torch.Tensor, torch.Tensor] | None:
        """The client's own validation share (``evaluation.local_validation_fraction``),
        which chooses a personal model's round; None without one."""
        if self.validation_indices is not None and len(self.validation_indices):
            return self.x[self.validation_indices], self.y[self.validation_indices]
        return None

    def global_test(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The global test set, for client-side evaluations of personalised models."""
        if self.x_test is None or self.y_test is None:
            raise ConfigError(
                "this method evaluates on the global test set on the clients, "
                "but the data set is not available on this node"
            )
        return self.x_test, self.y_test
