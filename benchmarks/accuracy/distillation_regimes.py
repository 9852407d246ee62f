"""The two methods that distil the received global model into the local one, FedNTD and
FedVLS, beside FedAvg and balanced-softmax FedAvg under two local optimisers: where their
papers' gains show here, and why FedVLS's does not (docs/methods.md).

1. *Trajectories*: FedAvg, FedNTD, FedVLS and ``bsm_fedavg`` (FedVLS's prior-calibrated
   cross-entropy alone) on digits, the default pathological partition, 5 local epochs and
   Bernoulli dropout p = 0.5, ``--rounds`` rounds, seeds 0 to ``--seeds`` − 1, under each
   of :data:`regimes.REGIMES`: SGD at lr 0.01 without momentum (fedimb's default) and with
   momentum 0.9 (both authors' setting), which lets the local models drift further from
   the global one. The test accuracy after every round.
2. *Terms*: FedVLS without dropout, seed 0, under each regime; in rounds 1, 5, 10 and 20
   every client's steps measure the calibrated cross-entropy L_cal, the weighted
   suppression term w·L_sup and the weighted distillation λ·L_dis, the gradient norm of
   each over the trained parameters, and the share of L_cal's gradient on the logits that
   falls on the client's vacant classes (:class:`MeasuredFedVLSClient`, which trains
   exactly as FedVLS does).

Writes ``<out>/table.md``, the tables ``docs/tables/distillation_regimes.md`` and
``fedvls_terms.md`` and the trajectories' figure.

    python benchmarks/accuracy/distillation_regimes.py [--rounds 40] [--seeds 5]
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks import common
from benchmarks.accuracy import regimes
from clients.fedvls import FedVLSClient
from fedimb.app.runtimes.in_process import InProcessFederation
from fedimb.core import protocol

METHODS = {m: [f"method={m}"] for m in ("fedavg", "fedntd", "fedvls", "bsm_fedavg")}
TERM_ROUNDS = (1, 5, 10, 20)

#: one dict per measured step of :class:`MeasuredFedVLSClient`
MEASURED: list[dict] = []


class MeasuredFedVLSClient(FedVLSClient):
    """FedVLS's client, recording each term of its loss and of its gradient at every step
    of the rounds in :data:`TERM_ROUNDS`; its training is FedVLS's, step for step."""

    def before_training(self, config):
        super().before_training(config)
        self.measured_round = int(config.get(protocol.SERVER_ROUND, 0))

    def loss(self, x, y):
        logits, cal, sup, dis = self.terms(x, y)
        if self.measured_round in TERM_ROUNDS:
            self._measure(logits, cal, sup, dis)
        return cal + sup + dis

    def _measure(self, logits, cal, sup, dis) -> None:
        params = [p for p in self.trainable_parameters() if p.requires_grad]
        row = {"round": self.measured_round, "client": self.data.partition_id}
        for name, term in (("cal", cal), ("sup", sup), ("dis", dis)):
            grads = torch.autograd.grad(term, params, retain_graph=True, allow_unused=True)
            norm = torch.sqrt(sum((g**2).sum() for g in grads if g is not None))
            row[name], row[f"grad_{name}"] = float(term.detach()), float(norm)
        (on_logits,) = torch.autograd.grad(cal, logits, retain_graph=True)
        total = float(on_logits.norm())
        vacant = float(on_logits[:, self.vacant].norm()) if bool(self.vacant.any()) else 0.0
        row["vacant_share"] = vacant / total if total > 0 else 0.0
        MEASURED.append(row)


def measure_terms(regime: str) -> list[dict]:
    """Per measured round under ``regime``: the terms and gradient norms over every
    client's steps."""
    MEASURED.clear()
    fed = InProcessFederation(
        [
            *regimes.SETUP,
            *regimes.REGIMES[regime],
            "method=fedvls",
            f"method.client._target_={__name__}.{MeasuredFedVLSClient.__name__}",
            "dropout=none",
            "seed=0",
        ]
    )
    for r in range(1, max(TERM_ROUNDS) + 1):
        fed.round(r)
    rows = []
    for r in TERM_ROUNDS:
        steps = [m for m in MEASURED if m["round"] == r]
        means = {
            f"{k}_mean": float(np.mean([m[k] for m in steps]))
            for k in steps[0]
            if k not in ("round", "client")
        }
        rows.append(
            {
                "regime": regime,
                "round": r,
                "steps": len(steps),
                **means,
                "dis_max": max(m["dis"] for m in steps),
                "grad_dis_max": max(m["grad_dis"] for m in steps),
                "vacant_share_max": max(m["vacant_share"] for m in steps),
            }
        )
    return rows


def terms_table(rows: list[dict]) -> list[str]:
    lines = [
        "| local SGD | round | steps | L_cal | ‖∇L_cal‖ | w·L_sup | ‖∇w·L_sup‖ "
        "| λ·L_dis mean (max) | ‖∇λ·L_dis‖ mean (max) "
        "| vacant share of ∇L_cal on the logits (max) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['regime']} | {r['round']} | {r['steps']} | {r['cal_mean']:.3f} "
            f"| {r['grad_cal_mean']:.3f} | {r['sup_mean']:.4f} | {r['grad_sup_mean']:.4f} "
            f"| {r['dis_mean']:.1e} ({r['dis_max']:.1e}) "
            f"| {r['grad_dis_mean']:.1e} ({r['grad_dis_max']:.1e}) | {r['vacant_share_max']:.1e} |"
        )
    return lines


def main() -> None:
    args = regimes.parse_arguments(__doc__, "distillation_regimes")
    print("trajectories", flush=True)
    rows = regimes.trajectories(METHODS, args.rounds, args.seeds)
    print("terms", flush=True)
    terms = [row for regime in regimes.REGIMES for row in measure_terms(regime)]
    trajectory = regimes.trajectory_table(rows, list(METHODS), args.seeds)
    measured = terms_table(terms)
    common.publish_in_docs("distillation_regimes", trajectory, data=rows)
    common.publish_in_docs("fedvls_terms", measured)
    regimes.write_results_table(
        args,
        "distillation_regimes",
        "FedNTD and FedVLS beside FedAvg under two local optimisers, and FedVLS's loss terms",
        trajectory,
        [
            "FedVLS without dropout, seed 0: means over every client's steps in the round.",
            "",
            *measured,
        ],
    )


if __name__ == "__main__":
    # run as the module the configuration names, so that the measured client's steps land
    # in the MEASURED this main reads
    from benchmarks.accuracy import distillation_regimes

    distillation_regimes.main()
