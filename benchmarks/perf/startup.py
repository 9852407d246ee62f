"""How long a user waits for the first result: the wall time from starting ``fedimb`` to
its round-0 line (the server's first evaluation: every process is up), to its round-1 line
(the target: the first round's result) and to its exit, for the default experiment (20
clients, mnist5k, 5 local epochs, Bernoulli dropout) unless overrides say otherwise.

    python benchmarks/perf/startup.py [--repeats 3] [--runtimes simulation,in_process] [overrides ...]

Writes ``<out>/startup.md`` and ``.json`` (median, min and max over the repeats).
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from benchmarks.common import argument_parser, publish_table  # noqa: E402

MARKS = {"round 0": "round 0/", "round 1": "round 1/"}


def time_once(runtime: str, overrides: list[str], out: Path) -> dict[str, float]:
    """Seconds from the command to each mark and to its exit."""
    started = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "fedimb", f"runtime={runtime}", "num_rounds=2", *overrides, f"output.root={out}"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    seen: dict[str, float] = {}
    lines = []
    for line in proc.stdout:  # type: ignore[union-attr]
        lines.append(line.rstrip())
        for name, prefix in MARKS.items():
            if name not in seen and line.startswith(prefix):
                seen[name] = time.perf_counter() - started
    if proc.wait() != 0 or len(seen) < len(MARKS):
        raise SystemExit(f"{runtime}: the run failed:\n" + "\n".join(lines[-10:]))
    seen["exit"] = time.perf_counter() - started
    return seen


def main() -> None:
    parser = argument_parser(__doc__)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--runtimes", default="simulation,in_process")
    parser.add_argument("--out", type=Path, default=REPO / "results" / "perf")
    args, overrides = parser.parse_known_args()
    results = {}
    with tempfile.TemporaryDirectory() as workdir:
        for runtime in args.runtimes.split(","):
            runs = [time_once(runtime, overrides, Path(workdir) / runtime) for _ in range(args.repeats)]
            results[runtime] = {mark: [run[mark] for run in runs] for mark in runs[0]}
            print(runtime, {mark: round(float(np.median(v)), 2) for mark, v in results[runtime].items()}, flush=True)
    header = ["runtime", "command to round 0 (s)", "command to round 1 (s)", "command to exit (s)"]
    rows = [[runtime] + [_spread(times[mark]) for mark in ("round 0", "round 1", "exit")]
            for runtime, times in results.items()]
    described = " ".join(overrides) or "the defaults"
    lines = [
        "# From the command to the first result", "",
        f"`fedimb num_rounds=2` with {described}, {args.repeats} calls per runtime, median (min–max); "
        f"{platform.machine()}, {os.cpu_count()} CPUs.", "",
        "| " + " | ".join(header) + " |", "|" + "---|" * len(header),
        *("| " + " | ".join(row) + " |" for row in rows), "",
        "Command: `python benchmarks/perf/startup.py " + " ".join(sys.argv[1:]) + "`",
    ]
    publish_table(args.out / "startup.md", lines)
    (args.out / "startup.json").write_text(json.dumps(results, indent=1))


def _spread(values: list[float]) -> str:
    return f"{np.median(values):.1f} ({min(values):.1f}–{max(values):.1f})"


if __name__ == "__main__":
    main()
