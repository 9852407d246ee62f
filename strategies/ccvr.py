"""CCVR server (Luo et al., "No Fear of Heterogeneity: Classifier Calibration for Federated
Learning with Non-IID Data", NeurIPS 2021, §4 "Classifier Calibration with Virtual
Representations").

Rounds 1..``num_rounds`` are FedAvg. At the end of the last round (``end_round``, before
its test) the server asks every connected client, the final global model in the query,
for its per-class feature moments (eq. 1); answers that break their declaration
(:data:`clients.ccvr.PAYLOADS`), hold an implausible covariance or, where the server
holds the client's data, differ from the server's recomputation of eq. 1 are left out
(one note). The moments are pooled into the federation's per-class Gaussian N(μ_c, Σ_c)
(eqs. 2–3, :func:`fedimb.core.feature_stats.pooled_moments`), ``virtual_per_class``
(M_c) virtual features are drawn per class, and the classifier alone is re-trained on
them by cross-entropy (:class:`strategies.base.feature_retraining.FeatureRetraining`).
The calibrated model is the final global model, tested in the last round;
``uncalibrated_accuracy`` (extra) is the model before the calibration.

The paper asks the clients after training ends, not in a Flower round: a statistics
round would have every client send the unchanged model back. Clients never train on
the calibrated classifier.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from flwr.common import ndarrays_to_parameters

from clients.ccvr import CALIBRATION_MODEL, PAYLOADS, STATISTICS, flatten_weights
from fedimb.core import payload, protocol
from fedimb.core.errors import at_least
from fedimb.core.feature_stats import pooled_moments, sample_virtual_features
from fedimb.core.settings import setting
from strategies.base.averaging import AveragingStrategy
from strategies.base.feature_retraining import FeatureRetraining, HeadTraining

#: how far a covariance may be from symmetric, relative to its largest entry (float32)
SYMMETRY_TOLERANCE = 1e-3
#: how far reported statistics may be from the server's recomputation of them, relative to
#: the largest (float32 features summed in another order; a crafted value is far off)
RECOMPUTED_TOLERANCE = 1e-3


def covariance_problem(covariances: np.ndarray) -> str | None:
    """Why reported covariances (C × d × d) cannot be covariances, or None: each must be
    symmetric with a non-negative diagonal (the shape and finiteness are declared)."""
    scale = max(float(np.abs(covariances).max(initial=0.0)), 1e-12)
    if np.abs(covariances - covariances.transpose(0, 2, 1)).max(initial=0.0) > (
        SYMMETRY_TOLERANCE * scale
    ):
        return "a covariance that is not symmetric"
    if np.diagonal(covariances, axis1=1, axis2=2).min(initial=0.0) < 0:
        return "a covariance with a negative variance"
    return None


class CCVRStrategy(FeatureRetraining, AveragingStrategy):
    """FedAvg, then classifier calibration with virtual representations."""

    payloads = PAYLOADS

    @dataclasses.dataclass(frozen=True)
    class Settings:
        virtual_per_class: int = setting(at_least(1, integer=True))
        calibration_epochs: int = setting(at_least(1, integer=True))
        calibration_batch_size: int = setting(at_least(1, integer=True))
        calibration_lr: float = setting(at_least(0, strict=True))
        calibration_momentum: float = setting(at_least(0))
        calibration_weight_decay: float = setting(at_least(0))

    def __init__(self, *, run):
        super().__init__(run=run)
        s = self.settings
        self.virtual_per_class = int(s.virtual_per_class)
        self.calibration = HeadTraining(
            epochs=int(s.calibration_epochs),
            batch_size=int(s.calibration_batch_size),
            lr=float(s.calibration_lr),
            momentum=float(s.calibration_momentum),
            weight_decay=float(s.calibration_weight_decay),
        )

    def end_round(self, server_round: int):
        if server_round != self.total_rounds() or self.current_weights is None:
            return None
        calibrated = self.calibrate(server_round, self.current_weights)
        if calibrated is None or not self.adoptable(calibrated, "the calibrated model"):
            return None
        self.current_weights = calibrated
        return ndarrays_to_parameters(calibrated)

    def calibrate(self, server_round: int, weights: list[np.ndarray]) -> list[np.ndarray] | None:
        """The global model with its classifier calibrated on virtual features, or None
        where no client answered with usable statistics."""
        statistics = self.client_statistics(server_round, weights)
        log = self.round_log.extra
        log["calibration_clients"] = len(statistics)
        if not statistics:
            self.round_log.note("no client statistics: the classifier is not calibrated")
            return None
        mean, covariance, counts = pooled_moments(*self.bounded_statistics(statistics))
        rng = np.random.default_rng(np.random.SeedSequence([self.run.seed, server_round]))
        features, labels = sample_virtual_features(
            mean, covariance, counts, self.virtual_per_class, rng
        )
        log["virtual_features"] = len(labels)
        if self.run.reads_test:
            log["uncalibrated_accuracy"] = self.run.evaluate(weights)[protocol.ACCURACY]
        calibrated = self.retrain_head(weights, features, labels, self.calibration, server_round)
        return calibrated if self.validated(weights, calibrated, "the calibrated model") else None

    def bounded_statistics(
        self, statistics: dict[int, dict[str, np.ndarray]]
    ) -> tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray]]:
        """The clients' means, covariances and counts, each class's mean and covariance
        of a client at most ``influence.statistic_ratio`` times the median norm of the other
        clients holding that class: one client's class mean of 1e9 would otherwise set
        the pooled mean of eq. 2 and the calibrated head predict that class alone."""
        pids = sorted(statistics)
        means = [statistics[p][STATISTICS[0]].astype(np.float64) for p in pids]
        covariances = [statistics[p][STATISTICS[1]].astype(np.float64) for p in pids]
        counts = [statistics[p][STATISTICS[2]] for p in pids]
        for c in range(len(counts[0]) if counts else 0):
            holders = [i for i in range(len(pids)) if counts[i][c] > 0]
            holder_pids = [pids[i] for i in holders]
            for arrays, what in ((means, "mean"), (covariances, "covariance")):
                kept = self.bounded_vectors(
                    holder_pids, [arrays[i][c] for i in holders], f"class_{what} of class {c}"
                )
                for i, value in zip(holders, kept):
                    arrays[i][c] = value
        return means, covariances, counts

    def statistics_differ(
        self, pid: int, arrays: dict[str, np.ndarray], weights: list[np.ndarray]
    ) -> str | None:
        """Where the server holds client ``pid``'s data (every client but a device with
        its own), why its statistics are not eq. 1 on that data under ``weights``, which
        the server recomputes, or None: a mean or covariance within every bound would
        still move the calibrated head. A device's own statistics stay bounded
        (:meth:`bounded_statistics`)."""
        if self.registry.has_own_data(pid):
            return None
        recomputed = self.run.client_feature_moments(weights, pid)
        for name, actual in zip(STATISTICS, recomputed):
            scale = max(float(np.abs(actual).max(initial=0.0)), 1e-12)
            reported = np.asarray(arrays[name], dtype=np.float64)
            if not np.allclose(reported, actual, rtol=0, atol=RECOMPUTED_TOLERANCE * scale):
                return f"its {name} are not those of its data (recomputed by the server)"
        return None

    def client_statistics(
        self, server_round: int, weights: list[np.ndarray]
    ) -> dict[int, dict[str, np.ndarray]]:
        """Every connected client's moments of eq. 1 under ``weights`` (by partition id),
        those that match their declaration and are plausible covariances; the others left
        out."""
        question = {
            **self.fit_config(server_round),
            **payload.pack({CALIBRATION_MODEL: flatten_weights(weights)}),
        }
        pids = self.registry.partition_ids()
        answers = self.registry.query(pids, question)
        self.round_log.bytes_down += payload.nbytes(question) * len(pids)
        self.round_log.bytes_up += sum(payload.nbytes(a) for a in answers.values())
        valid: dict[int, dict[str, np.ndarray]] = {}
        problems = {}
        for pid, answer in sorted(answers.items()):
            try:
                problem = self.check_answer(answer, answer.get(protocol.NUM_EXAMPLES), STATISTICS)
                arrays = payload.unpack(answer) if problem is None else {}
                problem = problem or covariance_problem(arrays[STATISTICS[1]])
                problem = problem or self.statistics_differ(pid, arrays, weights)
            except Exception as err:  # whatever a crafted answer makes decoding raise
                problem = f"unreadable answer ({type(err).__name__}: {err})"
            if problem:
                problems[pid] = problem
            else:
                valid[pid] = {name: arrays[name] for name in STATISTICS}
        if problems:
            pid, problem = next(iter(problems.items()))
            self.round_log.note(
                f"{len(problems)} client(s) left out of the calibration (client {pid}: {problem})"
            )
            self.round_log.extra["clients_left_out"] = len(problems)
        return valid
