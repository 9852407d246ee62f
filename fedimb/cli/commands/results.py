"""``fedimb report``, ``fedimb compare`` and ``fedimb export``: the subcommands that read
finished runs.

The report is a comparison table and plot, the comparison statistics per set-up (t
intervals, paired tests against a reference method), the export one tidy table (all listed in
:data:`fedimb.cli.commands.table.SUBCOMMANDS`); each imports pandas and its work only when it is
called, so that ``fedimb --help`` stays quick.
"""

from __future__ import annotations

import argparse
from pathlib import Path


def split_list(text: str) -> list[str]:
    """The items of a comma-separated command-line value."""
    return [item for item in text.split(",") if item]


def report_main(argv: list[str]) -> int:
    """One comparison table (mean ± std over seeds) and accuracy-vs-round plot over every
    completed run in the given run or sweep folders, or in tables written by fedimb export."""
    from fedimb.cli.results.report import write_report

    parser = argparse.ArgumentParser(prog="fedimb report", description=report_main.__doc__)
    parser.add_argument(
        "folders",
        type=Path,
        nargs="+",
        help="run folders, sweep folders or any folder above them, or tables written by "
        "fedimb export (.parquet, .csv)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="where report.md and accuracy.png go (default: <first folder>/report, or report/ "
        "beside a first input that is a table)",
    )
    parser.add_argument("--title", default="Comparison")
    parser.add_argument(
        "--mean-over-rounds",
        default="",
        metavar="METRICS",
        help="comma-separated 'extra' metrics to add as columns averaged over rounds "
        "(e.g. mediator_kl)",
    )
    parser.add_argument(
        "--range-over-rounds",
        default="",
        metavar="PATTERNS",
        help="comma-separated 'extra' metrics or shell patterns whose smallest and largest "
        "value over every round of a row's runs become columns (e.g. q,contribution.*)",
    )
    parser.add_argument(
        "--per-run", action="store_true", help="also a table with every run's own numbers"
    )
    parser.add_argument(
        "--at-rounds",
        default="",
        metavar="ROUNDS",
        help="comma-separated rounds whose test accuracy and loss the per-run table shows "
        "(implies --per-run)",
    )
    parser.add_argument(
        "--keep-reruns",
        action="store_true",
        help="average in every rerun of a set-up and seed (by default only the newest run of "
        "each counts and the others are named in a warning)",
    )
    args = parser.parse_args(argv)
    try:
        at_rounds = [int(r) for r in split_list(args.at_rounds)]
    except ValueError:
        parser.error(f"--at-rounds takes comma-separated round numbers, got '{args.at_rounds}'")
    first = args.folders[0]
    out = args.out or (first.parent if first.is_file() else first) / "report"
    report = write_report(
        args.folders,
        out,
        args.title,
        split_list(args.mean_over_rounds),
        split_list(args.range_over_rounds),
        args.per_run,
        at_rounds,
        args.keep_reruns,
    )
    print(report.read_text())
    print(report.resolve())
    return 0


def compare_main(argv: list[str]) -> int:
    """Per set-up, each method's mean over seeds with its 95% t interval and its seed-paired
    difference to a reference method (paired t-test, Holm-corrected across methods), over
    every completed run in the given run or sweep folders."""
    from fedimb.cli.results.compare import comparable_runs, compare_found, comparison_markdown

    parser = argparse.ArgumentParser(prog="fedimb compare", description=compare_main.__doc__)
    parser.add_argument(
        "folders", type=Path, nargs="+", help="run folders, sweep folders or any folder above them"
    )
    parser.add_argument(
        "--against",
        default=None,
        metavar="METHOD",
        help="the reference method (default: fedavg where it ran)",
    )
    parser.add_argument(
        "--metric",
        default="final_accuracy",
        metavar="KEY",
        help="a numeric summary.json field, e.g. selected_test_accuracy or validation_objective "
        "(default: final_accuracy)",
    )
    parser.add_argument(
        "--markdown", type=Path, default=None, metavar="FILE", help="also write the tables here"
    )
    parser.add_argument(
        "--plot", type=Path, default=None, metavar="FILE", help="each method's mean and interval"
    )
    parser.add_argument(
        "--curves",
        type=Path,
        default=None,
        metavar="FILE",
        help="accuracy per round, mean over seeds with a 95%% t band",
    )
    args = parser.parse_args(argv)
    found = comparable_runs(args.folders)
    comparisons = compare_found(found, args.against, args.metric, args.folders)
    lines = [found.tally("left out")]
    if found.reruns:
        lines.append(found.rerun_warning("left out, the newest run of each seed pair kept"))
    text = "\n".join(lines) + "\n\n" + comparison_markdown(comparisons)
    print(text)
    if args.markdown:
        args.markdown.parent.mkdir(parents=True, exist_ok=True)
        args.markdown.write_text(text)
    if args.plot or args.curves:
        from fedimb.cli.results.compare_plots import curves_plot, interval_plot

        for path, draw in ((args.plot, interval_plot), (args.curves, curves_plot)):
            if path:
                path.parent.mkdir(parents=True, exist_ok=True)
                draw(comparisons, path)
                print(path.resolve())
    return 0


def export_main(argv: list[str]) -> int:
    """One tidy table (Parquet or CSV) of every completed run in the given run or sweep
    folders: a row per value of each run's metrics.csv, with the run's set-up as columns."""
    from fedimb.cli.results.export import export_runs

    parser = argparse.ArgumentParser(
        prog="fedimb export",
        description=export_main.__doc__,
        epilog="fedimb report reads the table back: fedimb report export.parquet",
    )
    parser.add_argument(
        "folders", type=Path, nargs="+", help="run folders, sweep folders or any folder above them"
    )
    parser.add_argument(
        "--format",
        dest="fmt",
        default=None,
        metavar="parquet|csv",
        help="file format (default: from the --out suffix, else parquet)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="the file to write (default: <first folder>/export.parquet, .csv with --format csv)",
    )
    args = parser.parse_args(argv)
    path, found, rows = export_runs(args.folders, args.out, args.fmt)
    print(found.tally("flagged (column rerun)"))
    if found.reruns:
        print(
            found.rerun_warning(
                "kept and flagged (rerun = true; table[~table['rerun']] holds the newest "
                "run of each set-up and seed)"
            )
        )
    print(f"{len(found.records)} runs, {rows} rows")
    print(path)
    return 0
