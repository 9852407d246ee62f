"""Every method on a GPU: does it train there, how fast against the same machine's CPU, and
does it reach the same accuracy.

For each method, the set-up of ``benchmarks/perf/methods.py`` (mnist5k, cnn28, 20 clients
with two classes each, all taking part, 1 local epoch, no dropout; multi-stage methods with
their YAML's ``smoke`` settings) runs in one process (``runtime=in_process``: no Ray) with
``device=cuda`` and with ``device=cpu`` (every core of the machine as torch threads). A
method that fails on either device is listed with its error line, not left out. The JSON
also keeps ``torch.cuda.max_memory_allocated`` after each method's CUDA run; the methods
share one process, so it is not a method's own footprint and the table leaves it out.

Two steps, since the GPU machine returns files but keeps no repository:

    python benchmarks/perf/gpu_methods.py --out DIR [--methods a,b] [--rounds 3]
    python benchmarks/perf/gpu_methods.py --publish DIR/gpu_methods.json

The first measures and writes ``DIR/gpu_methods.json``; the second writes
``docs/tables/gpu_methods.md`` and ``docs/img/bench/gpu_methods.png`` from it.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import platform
import sys
import time
import traceback
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks import common
from benchmarks.perf.measure import steady
from benchmarks.perf.methods import method_overrides
from fedimb.app.configuration.compose import group_choices
from fedimb.app.runtimes.in_process import InProcessFederation


def run_on(device: str, overrides: list[str], rounds: int) -> dict:
    """Seconds per round, final test accuracy and (CUDA) peak memory of ``rounds`` rounds."""
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    seconds, record = [], {}
    with contextlib.redirect_stdout(io.StringIO()):  # the strategy's progress events
        federation = InProcessFederation([*overrides, f"device={device}"])
        for server_round in range(1, rounds + 1):
            start = time.perf_counter()
            record = federation.round(server_round)
            if device == "cuda":
                torch.cuda.synchronize()
            seconds.append(time.perf_counter() - start)
    return {
        "seconds": steady(seconds),
        "accuracy": (record.get("test") or {}).get("accuracy"),
        "peak_mib": torch.cuda.max_memory_allocated() / 2**20 if device == "cuda" else None,
    }


def measure(method: str, rounds: int, seed: int) -> dict:
    """One method on both devices; an error is kept as its last line."""
    overrides = method_overrides(method, rounds, seed)
    least = int(next(o for o in overrides if o.startswith("num_rounds=")).split("=")[1])
    row: dict = {"method": method, "rounds": least}
    for device in ("cuda", "cpu"):
        try:
            row[device] = run_on(device, overrides, least)
        except Exception as error:  # a method that fails on a device is a finding
            traceback.print_exc()
            row[device] = {"error": f"{type(error).__name__}: {error}".splitlines()[0][:200]}
    return row


def machine_line() -> str:
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU"
    return (
        f"{gpu}; {platform.machine()}, {os.cpu_count()} CPUs (the CPU runs use "
        f"{torch.get_num_threads()} torch threads); torch {torch.__version__}"
    )


def cell(result: dict, key: str, form: str) -> str:
    if "error" in result:
        return "failed"
    value = result.get(key)
    return "-" if value is None else format(value, form)


def table_lines(data: dict) -> list[str]:
    rows = data["rows"]
    lines = [
        "| method | rounds | GPU s/round | CPU s/round | GPU speed-up | GPU accuracy | "
        "CPU accuracy |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        gpu, cpu = r["cuda"], r["cpu"]
        both = "error" not in gpu and "error" not in cpu
        speedup = f"{cpu['seconds'] / gpu['seconds']:.1f}x" if both else "-"
        lines.append(
            f"| {r['method']} | {r['rounds']} | {cell(gpu, 'seconds', '.3f')} | "
            f"{cell(cpu, 'seconds', '.3f')} | "
            f"{speedup} | "
            f"{cell(gpu, 'accuracy', '.4f')} | {cell(cpu, 'accuracy', '.4f')} |"
        )
    failures = [
        f"- `{r['method']}` on {device}: {r[device]['error']}"
        for r in rows
        for device in ("cuda", "cpu")
        if "error" in r[device]
    ]
    speedups = [
        r["cpu"]["seconds"] / r["cuda"]["seconds"]
        for r in rows
        if "error" not in r["cuda"] and "error" not in r["cpu"]
    ]
    return [
        "# Every method on a GPU and on the same machine's CPU",
        "",
        "mnist5k, cnn28, 20 clients with two classes each, all taking part, 1 local epoch, no "
        f"dropout, seed {data['seed']}, in one process; time per round is the median of rounds "
        f"2+; an accuracy of - means the last of those rounds ran no test (Astraea's "
        f"synchronisation rounds). Machine: {data['machine']}.",
        "",
        *lines,
        "",
        (
            f"{len(speedups)} of {len(rows)} methods ran on both devices; median GPU speed-up "
            f"{np.median(speedups):.1f}x (min {min(speedups):.1f}x, max {max(speedups):.1f}x)."
            if speedups
            else "No method ran on both devices."
        ),
        *(["", "Failures:", *failures] if failures else []),
        "",
        f"Command: `python benchmarks/perf/gpu_methods.py --out DIR --rounds {data['rounds']}` "
        "on the GPU machine, then `python benchmarks/perf/gpu_methods.py --publish "
        "DIR/gpu_methods.json`",
    ]


def figure_rows(data: dict) -> list[dict]:
    """The figure's data: seconds per round of every method on each device (empty where
    the method failed there)."""
    return [
        {
            "method": r["method"],
            **{
                f"{name}_seconds": r[device].get("seconds") if "error" not in r[device] else None
                for name, device in (("gpu", "cuda"), ("cpu", "cpu"))
            },
        }
        for r in data["rows"]
    ]


def publish(path: Path) -> None:
    """The docs' table (and, through :mod:`benchmarks.figures`, its figure) from ``path``."""
    data = json.loads(path.read_text())
    common.publish_results(
        common.REPO / "results" / "perf" / "gpu_methods.md",
        "gpu_methods",
        table_lines(data),
        data=figure_rows(data),
    )


def main() -> None:
    parser = common.argument_parser(__doc__)
    parser.add_argument("--methods", default=",".join(group_choices("method")))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=common.REPO / "results" / "perf")
    parser.add_argument("--publish", type=Path, help="write the docs' table from this JSON")
    args = parser.parse_args()
    if args.publish:
        publish(args.publish)
        return
    if not torch.cuda.is_available():
        parser.error("no CUDA device: run this on a machine with a GPU")
    torch.set_num_threads(os.cpu_count() or 1)
    rows = []
    for method in args.methods.split(","):
        started = time.perf_counter()
        rows.append(measure(method, args.rounds, args.seed))
        print(f"[gpu] {method}: {json.dumps(rows[-1])} ({time.perf_counter() - started:.0f} s)")
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "gpu_methods.json").write_text(
            json.dumps(
                {"machine": machine_line(), "rounds": args.rounds, "seed": args.seed, "rows": rows},
                indent=1,
            )
        )


if __name__ == "__main__":
    main()
