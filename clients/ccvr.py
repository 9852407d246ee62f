"""CCVR client (Luo et al., "No Fear of Heterogeneity: Classifier Calibration for Federated
Learning with Non-IID Data", NeurIPS 2021, §4). Training is FedAvg's. After the last
round the server asks every client, with the final global model in the question, for
its per-class feature statistics: the mean μ_{c,k}, the unbiased covariance Σ_{c,k} and
the count N_{c,k} of the encoder's features of its training data (eq. 1). The server
pools them and calibrates the classifier on virtual features (:mod:`strategies.ccvr`)."""

from __future__ import annotations

import numpy as np

from clients.base import BaseClient
from fedimb.core import payload, protocol
from fedimb.core.feature_stats import class_moments
from fedimb.core.models import get_weights, set_weights
from fedimb.core.schema import ANSWER, DOWN, FEATURE_DIM, NUM_CLASSES, PayloadSpec
from fedimb.core.training import predict

#: server -> client, in the statistics query: the final global model, its state_dict
#: arrays flattened into one vector (float32; integer buffers are small counters)
CALIBRATION_MODEL = "calibration_model"
#: client -> server, the answer: per class the features' mean, covariance and count
FEATURE_MEANS = "feature_means"
FEATURE_COVARIANCES = "feature_covariances"
FEATURE_COUNTS = "feature_counts"
STATISTICS = (FEATURE_MEANS, FEATURE_COVARIANCES, FEATURE_COUNTS)
PAYLOADS = protocol.BASE_PAYLOADS + (
    PayloadSpec(CALIBRATION_MODEL, DOWN, "float", ("p",)),
    PayloadSpec(FEATURE_MEANS, ANSWER, "float", (NUM_CLASSES, FEATURE_DIM), required=True),
    PayloadSpec(
        FEATURE_COVARIANCES,
        ANSWER,
        "float",
        (NUM_CLASSES, FEATURE_DIM, FEATURE_DIM),
        required=True,
    ),
    PayloadSpec(
        FEATURE_COUNTS,
        ANSWER,
        "integer",
        (NUM_CLASSES,),
        nonnegative=True,
        total=protocol.NUM_EXAMPLES,
        required=True,
    ),
)


def flatten_weights(weights: list[np.ndarray]) -> np.ndarray:
    """A model's state_dict arrays as one float32 vector (the query carries one array)."""
    return np.concatenate([np.asarray(w, dtype=np.float32).ravel() for w in weights])


def unflatten_weights(vector: np.ndarray, like: list[np.ndarray]) -> list[np.ndarray]:
    """The arrays of :func:`flatten_weights` back, shaped and typed as ``like``."""
    sizes = [w.size for w in like]
    if vector.shape != (sum(sizes),):
        raise ValueError(f"a model of {sum(sizes)} values expected, got shape {vector.shape}")
    parts = np.split(vector, np.cumsum(sizes)[:-1])
    return [p.reshape(w.shape).astype(w.dtype) for p, w in zip(parts, like)]


class CCVRClient(BaseClient):
    """FedAvg's local training; answers the statistics query after the last round."""

    needs_linear_head = True  # the server re-trains the head as a linear layer

    def get_properties(self, config):
        props = super().get_properties(config)
        arrays = payload.unpack(config)
        if CALIBRATION_MODEL in arrays:
            props.update(payload.pack(self.feature_statistics(arrays[CALIBRATION_MODEL])))
        return props

    def feature_statistics(self, model_vector: np.ndarray) -> dict[str, np.ndarray]:
        """Eq. 1 on this client's training data, with the received model's encoder."""
        set_weights(self.model, unflatten_weights(model_vector, get_weights(self.model)))
        x = self.data.x[self.data.indices].to(self.device)
        features = predict(self.model.encoder, x).cpu().numpy()
        labels = self.data.y[self.data.indices].cpu().numpy()
        means, covariances, counts = class_moments(features, labels, self.model.num_classes)
        return {
            FEATURE_MEANS: means.astype(np.float32),
            FEATURE_COVARIANCES: covariances.astype(np.float32),
            FEATURE_COUNTS: counts,
        }
