"""Where FedLoGe's personal models lose to FedAvg + FT on the personalised leaderboard:
each part of the personal model scored apart, on the same clients (docs/methods.md).

The set-up is the leaderboard's ``dir01_personal`` (mnist5k, Dirichlet α = 0.1, 20
clients, 2 local epochs, 20 rounds, each client's own test split and validation share),
each method as its tuning there chose it (its tuned experiment in the leaderboard's
record), FedLoGe also at FedAvg + FT's learning rate; seeds 0 to ``--seeds`` − 1. At the
last round every client scores on its own test split, classes absent from its training
data masked where a row says so (as LA-FR masks them):

- FedLoGe (:class:`MeasuredFedLoGeClient`): its personal model (the local head plus the
  LA-FR auxiliary head, masked), the local head alone, the received auxiliary head, and
  that head unmasked (the received model as it stands); once more at its own rate with
  SSE-C's columns of norm 1 instead of the authors' 0.1 (``sse_norm=1.0 sse_lr=0.01``,
  the repository's other builder, docs/methods.md);
- FedAvg + FT (:class:`MeasuredFedAvgFTClient`): its personal model (the received model
  fine-tuned for one local budget), the received model, and the received model masked.

Rows: the mean over clients of each seed, then the mean over seeds with its 95% t
interval. Writes ``<out>/table.md`` and ``docs/tables/fedloge_personal.md``.

    python benchmarks/accuracy/fedloge_personal.py [--seeds 3]
"""

from __future__ import annotations

import copy
import sys
from pathlib import Path

import numpy as np
import torch
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks import common
from benchmarks.accuracy import leaderboard_record
from clients.fedavg_ft import FedAvgFTClient
from clients.fedloge import MASKED_LOGIT, FedLoGeClient
from fedimb.app.runtimes.in_process import InProcessFederation
from fedimb.cli.results.run_records import flatten_config
from fedimb.core import protocol

SETUP = "dir01_personal"  # the personalised leaderboard's set-up (leaderboard_suites)

#: one dict per client and evaluation round of the measured clients
MEASURED: list[dict] = []


def tuned_experiment(method: str) -> list[str]:
    """The leaderboard's tuned experiment of ``method`` on :data:`SETUP`, from its record, as
    overrides: the groups its defaults list chooses and every value it sets (the set-up's
    settings, the tuned ones), less Hydra's."""
    for step in leaderboard_record.read_steps(leaderboard_record.RECORD, SETUP):
        if step["step"] == "tune" and step["method"] == method:
            experiment = yaml.safe_load(step["files"][f"conf/experiment/{method}_tuned.yaml"])
            groups = [
                f"{key.removeprefix('override /')}={value}"
                for entry in experiment.pop("defaults")
                if isinstance(entry, dict)
                for key, value in entry.items()
            ]
            experiment.pop("hydra", None)
            values = [f"{key}={value}" for key, value in flatten_config(experiment).items()]
            return [*groups, *(v for v in values if not v.startswith("tune."))]
    raise SystemExit(f"the leaderboard's record has no tuning of {method} on {SETUP}")


def rate(overrides: list[str]) -> float:
    return float(next(o for o in overrides if o.startswith("train.lr=")).partition("=")[2])


class _Scores:
    """Accuracies on the client's own test split, with its absent classes masked or not."""

    def __init__(self, client):
        self.x, self.y = (t.to(client.device) for t in client.data.local_test())
        counts = np.asarray(client.data.label_counts)
        self.absent = torch.as_tensor(counts == 0, device=client.device)

    @torch.no_grad()
    def accuracy(self, logits_of, masked: bool) -> float:
        logits = logits_of(self.x)
        if masked:
            logits = logits.masked_fill(self.absent, MASKED_LOGIT)
        return float((logits.argmax(dim=1) == self.y).float().mean())


def _record(client, config, scores: dict[str, float]) -> None:
    MEASURED.append(
        {
            "method": type(client).__name__,
            "round": int(config[protocol.SERVER_ROUND]),
            "client": client.data.partition_id,
            **scores,
        }
    )


class MeasuredFedLoGeClient(FedLoGeClient):
    """FedLoGe's client; its personal evaluation also scores the personal model's parts."""

    def personal_model(self, parameters, config):
        personal = super().personal_model(parameters, config)  # sets the received model
        received, local, scores = self.model.eval(), self.local_head(config), _Scores(self)
        _record(
            self,
            config,
            {
                "personal model": scores.accuracy(personal, masked=False),  # masks itself
                "local head": scores.accuracy(lambda x: local(received.encoder(x)), True),
                "received auxiliary head": scores.accuracy(received, masked=True),
                "received model, unmasked": scores.accuracy(received, masked=False),
            },
        )
        return personal


class MeasuredFedAvgFTClient(FedAvgFTClient):
    """FedAvg + FT's client; its personal evaluation also scores the received model."""

    def personal_model(self, parameters, config):
        self.set_parameters(parameters)
        received, scores = copy.deepcopy(self.model).eval(), _Scores(self)
        personal = super().personal_model(parameters, config).eval()
        _record(
            self,
            config,
            {
                "personal model": scores.accuracy(personal, masked=False),
                "received model, masked": scores.accuracy(received, masked=True),
                "received model, unmasked": scores.accuracy(received, masked=False),
            },
        )
        return personal


def run(overrides: list[str], client: type, seed: int) -> dict[str, float]:
    """One run; the last round's scores, each the mean over clients."""
    MEASURED.clear()
    fed = InProcessFederation(
        [*overrides, f"method.client._target_={__name__}.{client.__name__}", f"seed={seed}"]
    )
    rounds = int(fed.cfg.num_rounds)
    for r in range(1, rounds + 1):
        fed.round(r)
    last = [m for m in MEASURED if m["round"] == rounds]
    names = [k for k in last[0] if k not in ("method", "round", "client")]
    return {name: float(np.mean([m[name] for m in last])) for name in names}


def table(results: dict[tuple[str, float], list[dict[str, float]]]) -> list[str]:
    """A row per method, rate and score; Δ: seed by seed against FedAvg + FT's personal
    model (the leaderboard's reference)."""
    reference = results[next(key for key in results if key[0] == "fedavg_ft")]
    lines = [
        "| method | learning rate | scored on each client's test split | % [95% t interval] "
        "| Δ vs FedAvg + FT's personal model (points) |",
        "|---|---|---|---|---|",
    ]
    for (method, lr), runs in results.items():
        for name in runs[0]:
            values = [r[name] for r in runs]
            delta = common.paired(values, [r["personal model"] for r in reference])
            lines.append(f"| {method} | {lr:.3f} | {name} | {common.interval(values)} | {delta} |")
    return lines


def main() -> None:
    parser = common.argument_parser(__doc__)
    parser.add_argument("--out", type=Path, default=common.REPO / "results" / "fedloge_personal")
    parser.add_argument("--seeds", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(1)
    fedloge, fedavg_ft = tuned_experiment("fedloge"), tuned_experiment("fedavg_ft")
    unit_columns = ["method.strategy.sse_lr=0.01", "method.strategy.sse_norm=1.0"]
    plan = [
        ("fedloge", MeasuredFedLoGeClient, fedloge),
        ("fedloge", MeasuredFedLoGeClient, [*fedloge, f"train.lr={rate(fedavg_ft)}"]),
        ("fedloge, unit SSE-C columns", MeasuredFedLoGeClient, [*fedloge, *unit_columns]),
        ("fedavg_ft", MeasuredFedAvgFTClient, fedavg_ft),
    ]
    results: dict[tuple[str, float], list[dict[str, float]]] = {}
    for label, client, overrides in plan:
        lr = rate(overrides[::-1])  # the last train.lr given
        for seed in range(args.seeds):
            print(f"{label} lr {lr:.3f} seed {seed}", flush=True)
            results.setdefault((label, lr), []).append(run(overrides, client, seed))
    lines = table(results)
    common.publish_in_docs("fedloge_personal", lines)
    common.publish_table(
        args.out / "table.md",
        [
            "# FedLoGe's personal model, part by part, beside FedAvg + FT",
            "",
            f"dir01_personal, last round (20), seeds 0-{args.seeds - 1}. "
            f"Machine: {common.machine()}.",
            "",
            *lines,
            "",
            f"Command: `python benchmarks/accuracy/fedloge_personal.py --seeds {args.seeds}`",
        ],
    )


if __name__ == "__main__":
    # run as the module the configuration names, so that the measured clients' scores land
    # in the MEASURED this main reads
    from benchmarks.accuracy import fedloge_personal

    fedloge_personal.main()
