"""The 2024-25 methods that regularise without a teacher, FedUV, FedRCL and FedLWS, beside
FedAvg under two local optimisers (:mod:`regimes`), and what FedLWS's shrinking does
(docs/methods.md).

1. *Trajectories*: FedAvg, FedUV, FedRCL and FedLWS at its default β = 0.03 and at
   β = 0.3 and 3, ``--rounds`` rounds, seeds 0 to ``--seeds`` − 1, under each regime; the
   test accuracy after every round.
2. *FedLWS's factors*: from the same runs, each round's τ_l and γ_l per layer
   (``shrink.tau.<l>``, ``shrink.gamma.<l>`` of the round's record): per regime and β, the
   share of layer-rounds whose τ_l sits at ``min_tau``, the mean τ_l, the mean shrink
   1 − γ_l per round and the product of the γ_l of the classifier layer over the run.

Writes ``<out>/table.md``, the tables ``docs/tables/regulariser_regimes.md`` and
``fedlws_factors.md`` and the trajectories' figure.

    python benchmarks/accuracy/regulariser_regimes.py [--rounds 40] [--seeds 5]
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks import common
from benchmarks.accuracy import regimes

#: the shrinking's β: the authors' default, and where τ_l leaves min_tau and reaches max_tau
BETAS = (0.03, 0.3, 3.0)
VARIANTS = {
    "fedavg": ["method=fedavg"],
    "feduv": ["method=feduv"],
    "fedrcl": ["method=fedrcl"],
    **{f"fedlws β={b:g}": ["method=fedlws", f"shrink.beta={b:g}"] for b in BETAS},
}


def shrink_factors(record: dict) -> dict:
    """The round's τ_l and γ_l per layer, as two lists (empty without shrinking)."""
    extra = record.get("extra", {})
    layers = sorted(int(k.rsplit(".", 1)[1]) for k in extra if k.startswith("shrink.gamma."))
    return {
        "taus": [extra[f"shrink.tau.{layer}"] for layer in layers],
        "gammas": [extra[f"shrink.gamma.{layer}"] for layer in layers],
    }


def factors_table(rows: list[dict]) -> list[str]:
    """Per regime and β: how much FedLWS shrinks (the module docstring, part 2)."""
    from fedimb.app.configuration.compose import compose

    min_tau = float(compose(["shrink=fedlws"]).shrink.min_tau)
    lines = [
        "| local SGD | β | layer-rounds at min_tau | mean τ_l | mean 1 − γ_l per round "
        "| classifier's Π γ over the run |",
        "|---|---|---|---|---|---|",
    ]
    for regime in regimes.REGIMES:
        for beta in BETAS:
            name = f"fedlws β={beta:g}"
            mine = [r for r in rows if (r["regime"], r["method"]) == (regime, name)]
            taus = np.array([t for r in mine for t in r["taus"]])
            gammas = np.array([g for r in mine for g in r["gammas"]])
            runs = {}
            for r in mine:
                runs[r["seed"]] = runs.get(r["seed"], 1.0) * r["gammas"][-1]
            lines.append(
                f"| {regime} | {beta:g} | {100 * np.mean(np.isclose(taus, min_tau)):.0f}% "
                f"| {taus.mean():.3f} | {1 - gammas.mean():.1e} "
                f"| {np.mean(list(runs.values())):.3f} |"
            )
    return lines


def main() -> None:
    args = regimes.parse_arguments(__doc__, "regulariser_regimes")
    rows = regimes.trajectories(VARIANTS, args.rounds, args.seeds, extra=shrink_factors)
    points = [{k: v for k, v in r.items() if k not in ("taus", "gammas")} for r in rows]
    trajectory = regimes.trajectory_table(rows, list(VARIANTS), args.seeds)
    factors = factors_table(rows)
    common.publish_in_docs("regulariser_regimes", trajectory, data=points)
    common.publish_in_docs("fedlws_factors", factors)
    regimes.write_results_table(
        args,
        "regulariser_regimes",
        "FedUV, FedRCL and FedLWS beside FedAvg under two local optimisers",
        trajectory,
        ["FedLWS's factors over every round and seed of its runs above.", "", *factors],
    )


if __name__ == "__main__":
    main()
