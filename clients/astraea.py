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

import numpy as np
import torch

from clients.base import BaseClient
from fedimb.app.faults.method_attacks import label_count_attack
from fedimb.core import payload, protocol
from fedimb.core.data.client_data import ClientData
from fedimb.core.data.stats import label_counts
from fedimb.core.process_cache import ProcessCache, cache_key
from fedimb.core.rebalance import apply_plan
from fedimb.core.schema import DOWN, NUM_CLASSES, PayloadSpec

#: the z-score plan's per-class ratios (server -> client); the answer's histogram is rebalanced
ZSCORE_RATIOS = "zscore_ratios"
PAYLOADS = protocol.BASE_PAYLOADS + (
    PayloadSpec(ZSCORE_RATIOS, DOWN, "float", (NUM_CLASSES,), nonnegative=True),
    protocol.LABEL_COUNTS_PAYLOAD,
)
#: each client's rebalanced data, by client, samples, plan, seed and augmentation
_REBALANCED: ProcessCache[ClientData] = ProcessCache(max_entries=256)


class AstraeaClient(BaseClient):
    """Applies the z-score plan, then trains like FedAvg."""

    attacks = {
        "astraea_counts": label_count_attack(
            protocol.LABEL_COUNTS, variants=("shape", "nan", "missing", "huge")
        )
    }

    @dataclasses.dataclass(frozen=True)
    class Settings:
        """The augmentation ranges (the paper gives none)."""

        rotation: float  # degrees
        shift: float  # fraction of the image size
        shear: float  # degrees
        zoom: float  # ± fraction of the scale

    def rebalanced(self, config) -> ClientData:
        """This client's data after the plan in ``config`` (its own data without one)."""
        ratios = payload.unpack(config).get(ZSCORE_RATIOS)
        if ratios is None or np.all(ratios == 1.0):
            return self.data
        params = dataclasses.asdict(self.settings_of(config))
        seed = int(
            np.random.SeedSequence(
                [int(config.get(protocol.SEED, 0)), self.data.partition_id]
            ).generate_state(1)[0]
        )
        # the samples themselves are in the key: two runs in one process (a sweep, the tests)
        # may give one client id other samples under the same plan
        key = cache_key(
            self.data.partition_id,
            self.data.indices,
            ratios,
            seed,
            tuple(params.values()),
            self.data.x.data_ptr(),
        )

        def build() -> ClientData:
            x, y = apply_plan(self.data.x, self.data.y, self.data.indices, ratios, params, seed)
            return dataclasses.replace(
                self.data,
                x=x,
                y=y,
                indices=torch.arange(len(y)),
                label_counts=label_counts(y.numpy(), self.data.num_classes),
            )

        return _REBALANCED.get(key, build)

    def get_properties(self, config):
        """Identity and label histogram — after the plan, when the query carries one."""
        props = super().get_properties(config)
        data = self.rebalanced(config)
        props[protocol.NUM_EXAMPLES] = data.num_examples
        props.update(payload.pack({protocol.LABEL_COUNTS: data.label_counts}))
        return props

    def before_training(self, config):
        self.data = self.rebalanced(config)
