"""What a device needs: an arm64 SuperNode from the edge image (under QEMU user emulation
on an x86_64 host, so every time here is the emulator's) beside a native SuperNode in a
TLS federation; FedAvg on mnist5k, 2 clients, 1 local epoch. Client 0 runs on the arm64
node; the native reference is client 0 of an all-native federation with the same seed
(the same data and work).

Measures the image's size, each node's start-up (process start to its ClientApp launcher
serving, i.e. torch and Flower imported), each client's phases per round and its peak
memory (``timing_by_client`` in the run's events: the ClientApp process's own peak
resident memory; under QEMU it includes the emulator's) and the container's peak memory
(all its processes, from its cgroup). Writes ``<out>/edge_node.md`` and ``.json``, and the
measurements (without the caption) to ``docs/tables/perf_edge_node.md``.

    python benchmarks/perf/edge_node.py [--rounds 3] [--arch arm64]
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks import common
from edge.federation import ContainerNode, ContainerSpec, EdgeFederation
from edge.host import container_engine
from edge.image import build_image, default_cache, image_size_mb

PHASES = ("start", "imports", "data", "model", "train", "serialise")
READY = "serving ClientApp tasks"  # the node worker's first line: torch and Flower imported


def seconds_until(log: Path, text: str, since: float, timeout: float = 600) -> float:
    """Seconds from ``since`` until ``text`` appears in ``log``."""
    while time.monotonic() - since < timeout:
        if log.exists() and text in log.read_text(errors="replace"):
            return time.monotonic() - since
        time.sleep(0.2)
    raise SystemExit(f"{log} never said {text!r}")


def measure(spec: ContainerSpec | None, rounds: int, workdir: Path) -> dict:
    """One run; node 0 from the image with ``spec``, native without."""
    started = time.monotonic()
    fed = EdgeFederation(workdir, 2, secure=True, images={0: spec} if spec else {})
    with fed:
        ready = seconds_until(
            workdir / ("node0.log" if spec else "node0-worker.log"), READY, started
        )
        result = common.run_fedimb(
            *fed.runtime_overrides(),
            "num_clients=2",
            f"num_rounds={rounds}",
            "train.local_epochs=1",
            "dropout=none",
            "seed=0",
            f"output.root={workdir / 'out'}",
        )
        node = fed.nodes[0]
        container_peak = node.peak_memory_mb() if isinstance(node, ContainerNode) else None
    if result.returncode != 0:
        raise SystemExit(result.stderr[-2000:])
    run_dir = Path(result.stdout.strip().splitlines()[-1])
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    rounds_ = [e for e in events if e.get("event") == "round" and e["round"] > 0]
    return {
        "ready": ready,
        "container_peak_mb": container_peak,
        "client0": [r["timing_by_client"]["0"] for r in rounds_],
        "round_seconds": [r["seconds"] for r in rounds_],
    }


def table(emulated: dict, native_run: dict, arch: str, image_mb: float) -> list[str]:
    arm, native = emulated["client0"], native_run["client0"]
    lines = [
        f"# An {arch} SuperNode under emulation beside a native one",
        "",
        f"FedAvg, mnist5k, 2 clients, 1 local epoch, TLS; {common.machine()}. Client 0 on the "
        f"{arch} node, under QEMU user emulation (its times are the emulator's, not a device's), "
        "against client 0 of an all-native run with the same seed.",
        "",
        f"- image `fedimb-edge:{arch}`: {image_mb:.0f} MB",
        f"- start-up, process start to the ClientApp launcher serving (torch and Flower imported): "
        f"{arch} emulated {emulated['ready']:.1f} s, native {native_run['ready']:.1f} s",
        f"- peak memory of the {arch} node's container (SuperNode, launcher and ClientApps, QEMU "
        f"included): {emulated['container_peak_mb'] or float('nan'):.0f} MB",
        "",
        f"| round | phase | {arch} emulated (s) | native (s) | ratio |",
        "|---|---|---|---|---|",
    ]
    for i, (a, n) in enumerate(zip(arm, native), start=1):
        for phase in PHASES:
            if phase in a and phase in n and (a[phase] > 0 or n[phase] > 0):
                ratio = f"{a[phase] / n[phase]:.1f}" if n[phase] > 1e-4 else "–"
                lines.append(f"| {i} | {phase} | {a[phase]:.2f} | {n[phase]:.2f} | {ratio} |")
        lines.append(
            f"| {i} | ClientApp peak memory (MB) | {a.get('peak_memory_mb', float('nan')):.0f} | "
            f"{n.get('peak_memory_mb', float('nan')):.0f} | |"
        )
    lines += [
        "",
        "Round wall times (s), with the arm64 node: "
        + ", ".join(f"{s:.1f}" for s in emulated["round_seconds"])
        + "; all native: "
        + ", ".join(f"{s:.1f}" for s in native_run["round_seconds"]),
        "",
    ]
    return lines


def range_rows(emulated: dict, native_run: dict, arch: str) -> list[dict]:
    """The figure's data: the start-up, and each phase's smallest and largest seconds over
    the rounds, of client 0 on each node."""
    rows = []
    for device, run in ((f"{arch}, emulated", emulated), ("native", native_run)):
        rows.append(
            {"phase": "start-up", "device": device, "low": run["ready"], "high": run["ready"]}
        )
        for phase in PHASES:
            seconds = [c[phase] for c in run["client0"] if phase in c]
            if seconds and max(seconds) > 0:
                rows.append(
                    {"phase": phase, "device": device, "low": min(seconds), "high": max(seconds)}
                )
    return rows


def main() -> None:
    parser = common.argument_parser(__doc__)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--arch", default="arm64")
    parser.add_argument("--out", type=Path, default=common.REPO / "results" / "perf")
    args = parser.parse_args()
    cache = default_cache()
    with container_engine(cache) as engine, tempfile.TemporaryDirectory() as workdir:
        tag = build_image(engine, args.arch, cache)
        emulated = measure(
            ContainerSpec(engine, tag, args.arch), args.rounds, Path(workdir) / "emulated"
        )
        native = measure(None, args.rounds, Path(workdir) / "native")
        image_mb = image_size_mb(engine, tag)
    lines = table(emulated, native, args.arch, image_mb)
    lines.append("Command: `python benchmarks/perf/edge_node.py " + " ".join(sys.argv[1:]) + "`")
    common.publish_table(args.out / "edge_node.md", lines)
    common.publish_in_docs(
        "perf_edge_node",
        common.part(lines, "- image"),
        data=range_rows(emulated, native, args.arch),
    )
    (args.out / "edge_node.json").write_text(
        json.dumps({"emulated": emulated, "native": native, "image_mb": image_mb}, indent=1)
    )


if __name__ == "__main__":
    main()
