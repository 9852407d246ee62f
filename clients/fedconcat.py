"""FedConcat / FedConcat-ID client (Diao et al., AAAI 2024, Algorithm 1).

Stage ``cluster`` (FedConcat-ID only): ordinary local training from the common
initialisation, then the inferred label distribution, eq. 3, is reported. Stage
``encoders``: ordinary local training of the cluster's model. Stage ``classifier``:
the K frozen encoders arrive once (kept in its client state); the client trains only
the global classifier on its concatenated features, computed once per round. With
``laplace_epsilon`` in a properties query the reported distribution is noised.
"""

from __future__ import annotations

import numpy as np
import torch

from clients.base import BaseClient
from fedimb.app.faults.method_attacks import label_count_attack
from fedimb.core import payload, protocol
from fedimb.core.clustering import inferred_distribution, noisy_distribution
from fedimb.core.models import get_weights
from fedimb.core.models.concat import ENCODERS, concatenated_model, encoders_from_arrays
from fedimb.core.schema import ANSWER, NUM_CLASSES, UP, PayloadSpec
from fedimb.core.training import TrainConfig, train_head

EXTRACTOR_STATE = "fedconcat_extractor"

# the stages (``protocol.STAGE``)
STAGE_CLUSTER, STAGE_ENCODERS, STAGE_CLASSIFIER = "cluster", "encoders", "classifier"
# instruction keys: the random inputs of eq. 3 (stage cluster), the noise of a properties query
INFER_SAMPLES = "infer_samples"
LAPLACE_EPSILON = "laplace_epsilon"
#: FedConcat-ID's inferred distribution (round 1); the (noised) label distribution in the
#: answer, with the histogram; the frozen encoders travel as ``concat.ENCODERS``
INFERRED_DISTRIBUTION = "inferred_distribution"
LABEL_DISTRIBUTION = "label_distribution"
PAYLOADS = protocol.BASE_PAYLOADS + (
    PayloadSpec(INFERRED_DISTRIBUTION, UP, "float", (NUM_CLASSES,), nonnegative=True, total=1.0),
    PayloadSpec(
        LABEL_DISTRIBUTION,
        ANSWER,
        "float",
        (NUM_CLASSES,),
        nonnegative=True,
        total=1.0,
        required=True,
    ),
    protocol.LABEL_COUNTS_PAYLOAD,
)


class FedConcatClient(BaseClient):
    """Local side of FedConcat: stage-dependent."""

    needs_linear_head = True  # its classifier stage builds a linear head
    #: the per-class arrays of its properties answer (a label-flipping attacker reports them
    #: for its real labels)
    class_histograms = (protocol.LABEL_COUNTS, LABEL_DISTRIBUTION)
    attacks = {
        "fedconcat_counts": label_count_attack(
            protocol.LABEL_COUNTS, LABEL_DISTRIBUTION, variants=("shape", "missing")
        )
    }

    trains_encoder_alone = True  # needs an encoder with parameters (not mclr's identity)
    instruction_keys = (INFER_SAMPLES, LAPLACE_EPSILON)

    def get_properties(self, config):
        props = super().get_properties(config)
        epsilon = config.get(LAPLACE_EPSILON)
        if epsilon is not None:
            seed = int(
                np.random.SeedSequence(
                    [int(config.get(protocol.SEED, 0)), self.data.partition_id]
                ).generate_state(1)[0]
            )
            noisy = noisy_distribution(
                self.data.label_counts, float(epsilon), np.random.default_rng(seed)
            )
            props.update(payload.pack({LABEL_DISTRIBUTION: noisy}))
        return props

    def fit(self, parameters, config):
        if config.get(protocol.STAGE) == STAGE_CLASSIFIER:
            return self.fit_classifier(parameters, config)
        return super().fit(parameters, config)

    def after_training(self, config, result):
        if config.get(protocol.STAGE) != STAGE_CLUSTER:
            return {}
        distribution = inferred_distribution(
            self.model,
            tuple(self.data.x.shape[1:]),
            int(config[INFER_SAMPLES]),
            int(config.get(protocol.SEED, 0)),
        )
        return payload.pack({INFERRED_DISTRIBUTION: distribution})

    # ----------------------------------------------------------- stage 3
    def extractor(self, config) -> list[list[np.ndarray]]:
        """The K encoders: from this instruction (first time) or from its client state."""
        arrays = payload.unpack(config)
        encoders = encoders_from_arrays(arrays)
        if encoders:
            self.save_state(
                EXTRACTOR_STATE,
                {k: v for k, v in arrays.items() if k.startswith(ENCODERS)},
            )
            return encoders
        stored = self.load_state(EXTRACTOR_STATE)
        if stored is None:
            raise RuntimeError("no concatenated encoders received yet")
        return encoders_from_arrays(stored)

    def fit_classifier(self, parameters, config):
        model = concatenated_model(self.model, self.extractor(config)).to(self.device)
        head = model.head
        for p, w in zip(head.parameters(), parameters, strict=True):
            p.data = torch.as_tensor(w, dtype=p.dtype, device=p.device).clone()
        hp = TrainConfig.from_mapping(config)
        x, y = self.data.x[self.data.indices], self.data.y[self.data.indices]
        result = train_head(model, x, y, hp, self.generator(config), self.device)
        metrics = {protocol.TRAIN_LOSS: result.mean_loss, protocol.LOCAL_STEPS: result.steps}
        return get_weights(head), self.data.num_examples, metrics
