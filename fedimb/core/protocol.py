"""The instruction protocol between a strategy and its clients: every key the framework
puts into a fit or evaluate instruction besides the training settings (``TrainConfig``'s
fields) and the method's own settings (its YAML's ``client`` section, under their YAML
names), and every key clients answer with. Both sides name these keys only through
this module; a method's own keys are declared in its client module.

Server → client (``FitIns.config`` / ``EvaluateIns.config``), key: type — meaning

- ``server_round``: int — the Flower round (seeds the client's local shuffling)
- ``stage``: str — the phase of a multi-stage method, else ``train``
- ``seed``: int — the run's seed
- ``report_latent``: bool — also return the mean latent (contribution normalisation)
- ``personal_eval``: bool — evaluate the personal model (the personal scores)
- ``return_probs``: bool — with ``personal_eval``, also the global-test probabilities
- ``read_test``: bool — with ``personal_eval``, whether the test sets may be read (false
  in tuning: the personal model is scored on the client's validation share alone)
- ``array:<name>``: bytes — a named array (:mod:`fedimb.core.payload`)
- ``assigned_partition``: int — the client the node serves for this message, where the
  server assigns clients to nodes (``runtime.client_ids=assigned``: the simulation's
  virtual nodes, which all hold the whole data set); absent where nodes claim their own

Client → server (``FitRes.metrics``, ``EvaluateRes.metrics``, ``get_properties``)

- ``train_loss``: float — mean batch loss of the local training
- ``local_steps``: int — optimiser steps taken
- ``initial_loss``: float — loss of the received model on the local data
- ``partition_id``: int, ``device_key``: str, ``num_examples``: int — identity (properties)
- ``personal_local_f1``, ``personal_local_accuracy``, ``personal_global_f1``,
  ``personal_global_accuracy``, ``personal_validation_accuracy``: float — the personal
  model's scores (the last on the client's own validation share)
- payloads: ``label_counts``, ``latent_mean``, ``global_test_probs`` (and each method's own)

The arrays every method may exchange are declared here (``BASE_PAYLOADS``,
``PERSONAL_PAYLOADS``, one :class:`fedimb.core.schema.PayloadSpec` each). A method's own
keys, payloads and attacks are declared once in its client module (``clients/<name>.py``),
which its strategy imports; this module names no method.
"""

from __future__ import annotations

from fedimb.core.schema import ANSWER, FEATURE_DIM, NUM_CLASSES, NUM_TEST, UP, PayloadSpec

# server -> client
SERVER_ROUND = "server_round"
STAGE = "stage"
SEED = "seed"
REPORT_LATENT = "report_latent"
PERSONAL_EVAL = "personal_eval"
LOCAL_EVAL = "local_eval"  # test the received model on the client's local test set
RETURN_PROBS = "return_probs"
READ_TEST = "read_test"
ASSIGNED_PARTITION = "assigned_partition"
#: every key the framework puts into an instruction (no method setting may be named so)
INSTRUCTION_KEYS = (
    SERVER_ROUND,
    STAGE,
    SEED,
    REPORT_LATENT,
    PERSONAL_EVAL,
    LOCAL_EVAL,
    RETURN_PROBS,
    READ_TEST,
    ASSIGNED_PARTITION,
)

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
PERSONAL_VALIDATION_ACCURACY = "personal_validation_accuracy"
# scores of an evaluation (EvaluateRes.metrics, the strategy's evaluation)
ACCURACY = "accuracy"
MACRO_F1 = "macro_f1"
LOSS = "loss"

# named arrays (payloads) every method may exchange
LABEL_COUNTS = "label_counts"
LATENT_MEAN = "latent_mean"
GLOBAL_TEST_PROBS = "global_test_probs"


# ------------------------------------------------------------ declared payloads
def indexed(pattern: str, j: int) -> str:
    """The name of the ``j``-th array of a ``<j>`` pattern, e.g. ``control_delta.3``."""
    return pattern.replace("<j>", str(j))


# the arrays every method's clients may send (contribution normalisation)
LATENT_PAYLOAD = PayloadSpec(LATENT_MEAN, UP, "float", (FEATURE_DIM,))
BASE_PAYLOADS = (LATENT_PAYLOAD,)
# label histogram in a properties answer: non-negative integers summing to the answer's num_examples
LABEL_COUNTS_PAYLOAD = PayloadSpec(
    LABEL_COUNTS,
    ANSWER,
    "integer",
    (NUM_CLASSES,),
    nonnegative=True,
    total=NUM_EXAMPLES,
    required=True,
)

# personal evaluation (personalised methods): the personal model's global-test probabilities
PERSONAL_PAYLOADS = BASE_PAYLOADS + (
    PayloadSpec(
        GLOBAL_TEST_PROBS,
        ANSWER,
        "float",
        (NUM_TEST, NUM_CLASSES),
        nonnegative=True,
        bound=1.0,
        required=True,
    ),
)
