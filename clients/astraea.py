"""Astraea client (Duan et al., "Self-Balancing Federated Learning With Global Imbalanced
Data in Mobile Systems", Algorithm 2 client part, Algorithm 1 local training).

The server's z-score plan (per-class ratios Rad) arrives with every instruction; the
client downsamples its majority classes and adds augmented copies of minority-class
samples (random shift, rotation, shear, zoom), reports the new label distribution when
asked, and trains E local epochs on the rebalanced data of the model its mediator
hands it. The rebalanced set is deterministic in (seed, client) and cached per process.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections import OrderedDict

import numpy as np
import torch

from clients.base import BaseClient
from fedimb.core import payload, protocol
from fedimb.core.data.client_data import ClientData
from fedimb.core.data.stats import label_counts
from fedimb.core.rebalance import apply_plan

AUGMENT_KEYS = ("rotation", "shift", "shear", "zoom")
_REBALANCED: OrderedDict[tuple, ClientData] = OrderedDict()
_CACHE_SIZE = 256


class AstraeaClient(BaseClient):
    """Applies the z-score plan, then trains like FedAvg."""

    def rebalanced(self, config) -> ClientData:
        """This client's data after the plan in ``config`` (its own data without one)."""
        ratios = payload.unpack(config).get(protocol.ZSCORE_RATIOS)
        if ratios is None or np.all(ratios == 1.0):
            return self.data
        params = {k: float(config[k]) for k in AUGMENT_KEYS}
        seed = int(
            np.random.SeedSequence(
                [int(config.get(protocol.SEED, 0)), self.data.partition_id]
            ).generate_state(1)[0]
        )
        # the samples themselves are in the key: two runs in one process (a sweep, the tests)
        # may give one client id other samples under the same plan
        samples = hashlib.sha1(self.data.indices.numpy().tobytes()).hexdigest()
        key = (
            self.data.partition_id,
            samples,
            ratios.tobytes(),
            seed,
            tuple(params.values()),
            self.data.x.data_ptr(),
        )
        if key not in _REBALANCED:
            x, y = apply_plan(self.data.x, self.data.y, self.data.indices, ratios, params, seed)
            _REBALANCED[key] = dataclasses.replace(
                self.data,
                x=x,
                y=y,
                indices=torch.arange(len(y)),
                label_counts=label_counts(y.numpy(), self.data.num_classes),
            )
            while len(_REBALANCED) > _CACHE_SIZE:
                _REBALANCED.popitem(last=False)
        return _REBALANCED[key]

    def get_properties(self, config):
        """Identity and label histogram — after the plan, when the query carries one."""
        props = super().get_properties(config)
        data = self.rebalanced(config)
        props[protocol.NUM_EXAMPLES] = data.num_examples
        props.update(payload.pack({protocol.LABEL_COUNTS: data.label_counts}))
        return props

    def before_training(self, config):
        self.data = self.rebalanced(config)
