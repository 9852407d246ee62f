"""The instruction protocol between a strategy and its clients: every key a strategy puts
into a fit or evaluate instruction besides the training settings (``TrainConfig``'s
fields) and the method's own settings (its YAML's ``client`` section, under their YAML
names), and every key clients answer with. Both sides name these keys only through
this module, so a reader finds the whole conversation here.

Server → client (``FitIns.config`` / ``EvaluateIns.config``), key: type — meaning

- ``server_round``: int — the Flower round (seeds the client's local shuffling)
- ``stage``: str — the phase of a multi-stage method (FedConcat), else ``train``
- ``seed``: int — the run's seed
- ``report_latent``: bool — also return the mean latent (contribution normalisation)
- ``personal_eval``: bool — evaluate the personal model (GRP-FED §4.1's T_p and T_r)
- ``return_probs``: bool — with ``personal_eval``, also the global-test probabilities
- ``array:<name>``: bytes — a named array (:mod:`fedimb.core.payload`)

Client → server (``FitRes.metrics``, ``EvaluateRes.metrics``, ``get_properties``)

- ``train_loss``: float — mean batch loss of the local training
- ``local_steps``: int — optimiser steps taken
- ``initial_loss``: float — loss of the received model on the local data
- ``partition_id``: int, ``device_key``: str, ``num_examples``: int — identity (properties)
- ``personal_local_f1``, ``personal_local_accuracy``, ``personal_global_f1``,
  ``personal_global_accuracy``: float — the personal model's scores
- payloads: ``label_counts``, ``latent_mean``, ``global_test_probs`` (and each method's own)

Each method's named arrays are declared once below (``*_PAYLOADS``, one
:class:`fedimb.core.schema.PayloadSpec` each): the strategy checks every reply against
them before reading it, and both halves name the arrays through these constants.
"""

from __future__ import annotations

from fedimb.core.schema import ANSWER, DOWN, UP, PayloadSpec

# server -> client
SERVER_ROUND = "server_round"
STAGE = "stage"
SEED = "seed"
REPORT_LATENT = "report_latent"
PERSONAL_EVAL = "personal_eval"
LOCAL_EVAL = "local_eval"  # test the received model on the client's local test set
RETURN_PROBS = "return_probs"

# client -> server
TRAIN_LOSS = "train_loss"
LOCAL_STEPS = "local_steps"
INITIAL_LOSS = "initial_loss"
PARTITION_ID = "partition_id"
DEVICE_KEY = "device_key"
NUM_EXAMPLES = "num_examples"
LOCAL_ACCURACY = "local_accuracy"  # the received (global) model on the local test set
PERSONAL_LOCAL_F1 = "personal_local_f1"
PERSONAL_LOCAL_ACCURACY = "personal_local_accuracy"
PERSONAL_GLOBAL_F1 = "personal_global_f1"
PERSONAL_GLOBAL_ACCURACY = "personal_global_accuracy"

# named arrays (payloads) every method may exchange
LABEL_COUNTS = "label_counts"
LATENT_MEAN = "latent_mean"
GLOBAL_TEST_PROBS = "global_test_probs"


# ------------------------------------------------------------ declared payloads
def indexed(pattern: str, j: int) -> str:
    """The name of the ``j``-th array of a ``<j>`` pattern, e.g. ``control_delta.3``."""
    return pattern.replace("<j>", str(j))


#: the largest control-variate change a SCAFFOLD client may report per entry: c
#: estimates the gradient of the local loss, whose entries no honest client sees
#: near 1e6; beyond it one client would steer every client's correction
CONTROL_BOUND = 1e6

# the arrays every method's clients may send (contribution normalisation)
LATENT_PAYLOAD = PayloadSpec(LATENT_MEAN, UP, "float", ("feature_dim",))
BASE_PAYLOADS = (LATENT_PAYLOAD,)
# label histogram in a properties answer: non-negative integers summing to the answer's num_examples
LABEL_COUNTS_PAYLOAD = PayloadSpec(
    LABEL_COUNTS,
    ANSWER,
    "integer",
    ("num_classes",),
    nonnegative=True,
    total="num_examples",
    required=True,
)

# ReBaFL: class prototypes as (classes, vectors, counts); global ones sent without counts
PROTOTYPES = "prototypes"
PROTOTYPE_CLASSES, PROTOTYPE_VECTORS, PROTOTYPE_COUNTS = (
    f"{PROTOTYPES}_{part}" for part in ("classes", "vectors", "counts")
)
REBAFL_PAYLOADS = BASE_PAYLOADS + (
    PayloadSpec(
        PROTOTYPE_CLASSES, UP, "integer", ("k",), nonnegative=True, bound="max_class", required=True
    ),
    PayloadSpec(PROTOTYPE_VECTORS, UP, "float", ("k", "feature_dim"), required=True),
    PayloadSpec(
        PROTOTYPE_COUNTS,
        UP,
        "integer",
        ("k",),
        nonnegative=True,
        total="num_examples",
        required=True,
    ),
    PayloadSpec(PROTOTYPE_CLASSES, DOWN, "integer", ("k",)),
    PayloadSpec(PROTOTYPE_VECTORS, DOWN, "float", ("k", "feature_dim")),
)

# SCAFFOLD: the server control variate c and each client's change Δc_i, per trainable parameter
CONTROL = "control.<j>"
CONTROL_DELTA = "control_delta.<j>"
SCAFFOLD_PAYLOADS = BASE_PAYLOADS + (
    PayloadSpec(CONTROL, DOWN, "float", "model"),
    PayloadSpec(CONTROL_DELTA, UP, "float", "model", bound=CONTROL_BOUND, required=True),
)

# Astraea: the z-score plan's per-class ratios; the rebalanced histogram in the answer
ZSCORE_RATIOS = "zscore_ratios"
ASTRAEA_PAYLOADS = BASE_PAYLOADS + (
    PayloadSpec(ZSCORE_RATIOS, DOWN, "float", ("num_classes",), nonnegative=True),
    LABEL_COUNTS_PAYLOAD,
)

# FedConcat: (noised) label distributions in the answer; FedConcat-ID's inferred ones in round 1
LABEL_DISTRIBUTION = "label_distribution"
INFERRED_DISTRIBUTION = "inferred_distribution"
LAPLACE_EPSILON = "laplace_epsilon"
ENCODERS = (
    "encoder."  # the frozen encoders, encoder.<k>.<j> (fedimb.core.models.concat), server -> client
)
FEDCONCAT_PAYLOADS = BASE_PAYLOADS + (
    PayloadSpec(INFERRED_DISTRIBUTION, UP, "float", ("num_classes",), nonnegative=True, total=1.0),
    PayloadSpec(
        LABEL_DISTRIBUTION,
        ANSWER,
        "float",
        ("num_classes",),
        nonnegative=True,
        total=1.0,
        required=True,
    ),
    LABEL_COUNTS_PAYLOAD,
)

# personal evaluation (GRP-FED, local-only ...): the personal model's global-test probabilities
PERSONAL_PAYLOADS = BASE_PAYLOADS + (
    PayloadSpec(
        GLOBAL_TEST_PROBS,
        ANSWER,
        "float",
        ("num_test", "num_classes"),
        nonnegative=True,
        bound=1.0,
        required=True,
    ),
)
