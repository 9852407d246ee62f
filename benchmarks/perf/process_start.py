"""What a fresh client process pays before it trains: a deployed SuperNode starts one per
message (Flower's subprocess isolation), the simulation one per Ray actor.

Each measurement is a new Python process that times, in order: importing torch, importing
fedimb's ClientApp module, loading mnist5k (``experiment_data``) and creating the first
optimizer (``torch.optim`` imports ``torch._dynamo`` on first use). The data load is timed
with an empty fedimb cache (first process on a machine: the embedded digits are read and
split with scikit-learn) and with the cache the first process leaves (the split read from
disk, no scikit-learn). Writes ``<out>/process_start.md`` and its table to
``docs/tables/perf_process_start.md``.

    python benchmarks/perf/process_start.py [--repeats 3] [--out results/perf]
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks import common

PHASES = ("import torch", "import the ClientApp module", "load mnist5k", "first optimizer")

# run in a fresh interpreter; prints one JSON object of seconds per phase
PROBE = """
import json, sys, time
t = time.perf_counter(); seconds = {}
import torch
seconds["import torch"] = time.perf_counter() - t; t = time.perf_counter()
import fedimb.app.nodes.client_app
from fedimb.app.configuration import compose as config
from fedimb.app.configuration.build import experiment_data
seconds["import the ClientApp module"] = time.perf_counter() - t; t = time.perf_counter()
experiment_data(config.compose(["dataset=mnist5k", "num_clients=20"]))
seconds["load mnist5k"] = time.perf_counter() - t; t = time.perf_counter()
torch.optim.SGD(torch.nn.Linear(2, 2).parameters(), lr=0.1)
seconds["first optimizer"] = time.perf_counter() - t
seconds["scikit-learn imported"] = "sklearn" in sys.modules
print(json.dumps(seconds))
"""


def probe(cache: Path) -> dict:
    env = {**os.environ, "FEDIMB_CACHE": str(cache)}
    done = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=common.REPO, env=env, capture_output=True, text=True
    )
    if done.returncode != 0:
        raise SystemExit(f"the probe process failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = common.argument_parser(__doc__)
    parser.add_argument("--repeats", type=int, default=3, help="processes per cache state")
    parser.add_argument("--out", type=Path, default=common.REPO / "results" / "perf")
    args = parser.parse_args()
    runs: dict[str, list[dict]] = {"empty cache": [], "cache filled": []}
    for _ in range(args.repeats):
        with tempfile.TemporaryDirectory() as cache:
            runs["empty cache"].append(probe(Path(cache)))
            runs["cache filled"].append(probe(Path(cache)))
    lines = [
        "# Start of a fresh client process",
        "",
        f"Median of {args.repeats} processes per row, seconds. Machine: {common.machine()}.",
        "",
        "| fedimb cache | " + " | ".join(PHASES) + " | total | scikit-learn imported |",
        "|---|" + "---|" * (len(PHASES) + 2),
    ]
    points = []  # the figure's: the median seconds of each phase, per cache state
    for state, results in runs.items():
        medians = [float(np.median([r[phase] for r in results])) for phase in PHASES]
        points += [
            {"cache": state, "phase": phase, "seconds": m} for phase, m in zip(PHASES, medians)
        ]
        sklearn = sorted({str(r["scikit-learn imported"]).lower() for r in results})
        lines.append(
            f"| {state} | "
            + " | ".join(f"{m:.2f}" for m in medians)
            + f" | {sum(medians):.2f} | {'/'.join(sklearn)} |"
        )
    lines += ["", f"Command: `python benchmarks/perf/process_start.py --repeats {args.repeats}`"]
    common.publish_results(args.out / "process_start.md", "perf_process_start", lines, data=points)


if __name__ == "__main__":
    main()
