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
"""

from __future__ import annotations

# server -> client
SERVER_ROUND = "server_round"
STAGE = "stage"
SEED = "seed"
REPORT_LATENT = "report_latent"
PERSONAL_EVAL = "personal_eval"
LOCAL_EVAL = "local_eval"        # test the received model on the client's local test set
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
