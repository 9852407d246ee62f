"""The figures of docs/benchmarks/performance.md, docs/gpu.md and docs/edge.md: timings."""

from __future__ import annotations

from functools import partial

import numpy as np

from benchmarks.figures.drawing import (
    canvas,
    finish,
    grouped_bars,
    legend_below,
    log_log,
    stacked_bars,
    time_bars,
)
from benchmarks.figures.reading import floats
from benchmarks.figures.registry import drawn_from

#: timing figures of two bars per row: size, the column naming a row, legend label -> column
TIME_BARS = {
    "perf_fedavg": (
        (8.5, 3.2),
        "setting",
        {"rounds 2+ (s per round)": "seconds_per_round", "first round (s)": "first_round_seconds"},
        {"xlabel": "seconds", "title": "FedAvg: fedimb against a plain PyTorch loop"},
    ),
    "perf_methods": (
        (7, 7.5),
        "method",
        {
            "fedimb (Flower simulation)": "fedimb_seconds",
            "the same rounds in one process": "one_process_seconds",
        },
        {"xlabel": "seconds per round (rounds 2+)", "title": "Every method: seconds per round"},
    ),
    "perf_methods_recent": (
        (7, 3.2),
        "method",
        {
            "fedimb (Flower simulation)": "fedimb_seconds",
            "the same rounds in one process": "one_process_seconds",
        },
        {
            "xlabel": "seconds per round (rounds 2+)",
            "title": "The 2022–2025 methods: seconds per round",
        },
    ),
    "gpu_methods": (
        (7, 7.5),
        "method",
        {"GPU": "gpu_seconds", "the same machine's CPU": "cpu_seconds"},
        {"xlabel": "seconds per round (rounds 2+)", "title": "Every method: GPU against CPU"},
    ),
}


for _name, (_size, _names, _bars, _settings) in TIME_BARS.items():
    drawn_from(_name)(partial(time_bars, size=_size, names=_names, bars=_bars, **_settings))


@drawn_from("perf_scale")
def perf_scale(rows):
    """Start-up, round 1, seconds per round and peak memory against the number of virtual
    clients. Rows of benchmarks/perf/scale.py."""
    fig, (time_ax, memory_ax) = canvas(1, 2, figsize=(9, 3.8))
    clients = floats(rows, "clients")
    for key, name in (
        ("startup_seconds", "start-up"),
        ("round1_seconds", "round 1"),
        ("seconds_per_round", "rounds 2+, per round"),
    ):
        time_ax.plot(clients, floats(rows, key), "o-", label=name)
    log_log(time_ax, "virtual clients (10% sampled per round)", "seconds", clients)
    time_ax.legend(fontsize=8)
    memory_ax.plot(clients, floats(rows, "peak_memory_mb"), "o-", color="tab:purple")
    log_log(
        memory_ax,
        "virtual clients (10% sampled per round)",
        "peak memory, all processes (MiB)",
        clients,
    )
    memory_ax.set(yscale="linear", ylim=(0, None))
    fig.suptitle("Many virtual clients (Flower simulation)")
    return fig


@drawn_from("synthetic_scale")
def synthetic_scale(rows):
    """Round 1, seconds per round and peak memory against the number of devices, a line
    per runtime, method and sample size. Rows of benchmarks/perf/synthetic_scale.py."""
    fig, axes = canvas(1, 3, figsize=(11, 3.8))
    devices = floats(rows, "devices")
    keys = (
        ("round1_seconds", "round 1 (s)"),
        ("seconds_per_round", "seconds per round, rounds 2+"),
        ("peak_memory_mb", "peak memory, all processes (MiB)"),
    )
    for ax, (key, ylabel) in zip(axes, keys):
        series = lambda r: (r["runtime"], r["method"], r["sampled"])  # noqa: E731
        for run in dict.fromkeys(series(r) for r in rows):
            chosen = [i for i, r in enumerate(rows) if series(r) == run]
            ax.plot(
                devices[chosen],
                floats([rows[i] for i in chosen], key),
                "o-" if run[1] == "fedavg" else "s--",
                label=f"{run[0]}, {run[1]}, {run[2]} sampled",
            )
        log_log(ax, "devices", ylabel, devices)
    axes[-1].set(yscale="linear", ylim=(0, None))
    legend_below(axes[1], 4)
    fig.suptitle("Many devices on Synthetic")
    return fig


@drawn_from("perf_deployment")
def perf_deployment(rows):
    """Round 1 and later rounds' seconds per number of SuperNodes, a bar per measured code.
    Rows of benchmarks/perf/deployment.py."""
    fig, axes = canvas(1, 2, figsize=(8, 3.4))
    nodes = list(dict.fromkeys(r["nodes"] for r in rows))
    for ax, (key, ylabel) in zip(
        axes, (("round1", "round 1 (seconds)"), ("later", "seconds per round, rounds 2+"))
    ):
        series = {
            code: (
                floats(
                    [r for n in nodes for r in rows if (r["nodes"], r["code"]) == (n, code)], key
                ),
                None,
            )
            for code in dict.fromkeys(r["code"] for r in rows)
        }
        grouped_bars(ax, nodes, series)
        ax.set(xlabel="SuperNodes", ylabel=ylabel)
    axes[-1].legend(title="code", fontsize=8)
    fig.suptitle("Deployment on loopback: round latency")
    return fig


@drawn_from("perf_breakdown_3clients", "perf_breakdown_10clients")
def perf_breakdown(rows):
    """The server's phases of a round stacked, per runtime for round 1 and rounds 2+. Rows
    of benchmarks/perf/breakdown.py."""
    columns = list(dict.fromkeys(r["column"] for r in rows))
    seconds = {(r["column"], r["phase"]): r for r in rows}
    phases = {
        "discover": "discover",
        "waiting for the last reply": "last_reply",
        "aggregate": "aggregate",
        "test": "test",
        "checkpoint": "checkpoint",
    }
    _, ax = canvas(figsize=(7.5, 0.9 + 0.45 * len(columns)))
    stacked_bars(
        ax,
        columns,
        {
            name: floats([seconds[c, phase] for c in columns], "seconds")
            for name, phase in phases.items()
        },
    )
    return finish(
        ax, 5, xlabel="seconds (server side of a round)", title="Where a round's time goes"
    )


def startup_bars(rows, names: list[str]):
    """Command to round 0, round 0 to round 1, round 1 to exit: differences of the medians."""
    marks = np.stack([floats(rows, k) for k in ("round0", "round1", "exit")], axis=1)
    _, ax = canvas(figsize=(8.5, 1.5 + 0.45 * len(rows)))
    stacked_bars(
        ax,
        names,
        {
            "command to round 0": marks[:, 0],
            "round 1": marks[:, 1] - marks[:, 0],
            "round 1 to exit": marks[:, 2] - marks[:, 1],
        },
    )
    xlabel = "seconds from the command\n(medians; each part is the difference of two medians)"
    return finish(ax, 3, xlabel=xlabel, title="From the command to the first result")


@drawn_from("perf_startup")
def perf_startup(rows):
    """The runtimes' start-up, a bar per runtime and measured code. Rows of
    benchmarks/perf/startup.py."""
    return startup_bars(rows, [f"{r['runtime']}, {r['code']}" for r in rows])


@drawn_from("perf_startup_floor")
def perf_startup_floor(rows):
    """The simulation's start-up against Flower's alone. Rows of benchmarks/perf/startup.py."""
    return startup_bars(rows, [r["runtime"] for r in rows])


@drawn_from("perf_startup_steps")
def perf_startup_steps(rows):
    """The simulation's wait for round 1, step by step (the "of which" rows left out, as
    they split a step). Rows of benchmarks/perf/startup.py."""
    steps = [r for r in rows if not r["step"].startswith("...")]
    _, ax = canvas(figsize=(8, 2.8))
    stacked_bars(ax, ["simulation"], {r["step"]: np.array([float(r["seconds"])]) for r in steps})
    xlabel = "seconds from the command to round 1 (median of each step)"
    return finish(ax, 2, xlabel=xlabel, title="Start-up, step by step")


@drawn_from("perf_process_start")
def perf_process_start(rows):
    """A fresh client process's phases stacked, per state of the cache. Rows of
    benchmarks/perf/process_start.py."""
    states = list(dict.fromkeys(r["cache"] for r in rows))
    seconds = {(r["cache"], r["phase"]): r for r in rows}
    phases = list(dict.fromkeys(r["phase"] for r in rows))
    _, ax = canvas(figsize=(7, 2.6))
    stacked_bars(
        ax, states, {p: floats([seconds[s, p] for s in states], "seconds") for p in phases}
    )
    return finish(ax, 4, xlabel="seconds", title="A fresh client process before it trains")


@drawn_from("perf_edge_node")
def perf_edge_node(rows):
    """Each phase's range over rounds on the emulated node against the native one. Rows of
    benchmarks/perf/edge_node.py."""
    phases = list(dict.fromkeys(r["phase"] for r in rows))
    devices = list(dict.fromkeys(r["device"] for r in rows))
    fig, ax = canvas(figsize=(8, 3.4))
    places = np.arange(len(phases))
    for offset, device, colour in zip((-0.12, 0.12), devices, ("tab:red", "tab:blue")):
        for i, phase in enumerate(phases):
            chosen = [r for r in rows if (r["phase"], r["device"]) == (phase, device)]
            if chosen:
                ax.plot(
                    [float(chosen[0]["low"]), float(chosen[0]["high"])],
                    [i + offset] * 2,
                    "-o",
                    color=colour,
                    lw=3,
                    markersize=5,
                    label=device if i == 0 else None,
                )
    ax.set_yticks(places, phases, fontsize=8)
    ax.invert_yaxis()
    ax.set(
        xscale="log",
        xlabel="seconds (log scale; a line spans the table's range over rounds 1–3)",
        title="An arm64 edge node under QEMU",
    )
    ax.grid(axis="x", alpha=0.3, which="both")
    legend_below(ax, 2)
    return fig
