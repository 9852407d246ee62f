"""The benchmark pages show figures their scripts draw: every figure a page shows exists and
is small, every table with a figure is shown beside it, and ``python -m benchmarks.figures``
redraws every figure from the data files alone (never from a Markdown table)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from benchmarks import figures
from benchmarks.accuracy.compare_methods import method_rows, round_rows
from benchmarks.common import DOCS_FIGURES, DOCS_TABLES
from fedimb.cli.results.run_records import RunRecord

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
#: a benchmark table a page includes (``--8<-- "<table>.md"``; a path is a listing)
INCLUDE = re.compile(r'^--8<-- "([^"/]+)\.md"\s*$', re.M)
#: the pages holding benchmark tables
TABLE_PAGES = sorted(
    p for p in DOCS.rglob("*.md") if DOCS_TABLES not in p.parents and INCLUDE.search(p.read_text())
)
IMAGE = re.compile(r"!\[[^\]]*\]\(([^)\s]*img/bench/[^)\s]+\.png)\)")
MAX_BYTES = 150_000


def shown(page: Path) -> list[Path]:
    """The benchmark figures ``page`` shows, as files."""
    return [(page.parent / target).resolve() for target in IMAGE.findall(page.read_text())]


def test_the_table_pages_are_found():
    names = {p.relative_to(DOCS).as_posix() for p in TABLE_PAGES}
    assert {
        "benchmarks/performance.md",
        "benchmarks/accuracy.md",
        "benchmarks/synthetic.md",
        "faults.md",
    } <= names


@pytest.mark.parametrize("page", TABLE_PAGES, ids=lambda p: p.relative_to(DOCS).as_posix())
def test_every_table_page_shows_a_figure_and_each_exists(page):
    images = shown(page)
    assert images, f"{page.relative_to(REPO)} holds benchmark tables but shows no figure"
    missing = [str(i.relative_to(REPO)) for i in images if not i.is_file()]
    assert missing == [], "figures the page shows that docs/img/bench/ lacks"


@pytest.mark.parametrize("page", TABLE_PAGES, ids=lambda p: p.relative_to(DOCS).as_posix())
def test_a_table_with_a_figure_shows_it_on_its_page(page):
    names = {i.stem for i in shown(page)}
    tables = INCLUDE.findall(page.read_text())
    lacking = [t for t in tables if t in figures.DRAWN and t not in names]
    assert lacking == [], f"{page.relative_to(REPO)} includes these tables but not their figures"
    data = [
        t
        for t in tables
        if (DOCS_TABLES / "data" / f"{t}_rounds.csv").is_file() and f"{t}_rounds" not in names
    ]
    assert data == [], "per-round curves drawn for these tables are not shown"


def test_every_figure_in_the_docs_is_shown_and_small():
    shown_anywhere = {i for page in TABLE_PAGES for i in shown(page)}
    for png in sorted(DOCS_FIGURES.glob("*.png")):
        assert png.resolve() in shown_anywhere, f"{png.name} is shown on no page"
        assert png.stat().st_size < MAX_BYTES, f"{png.name} is {png.stat().st_size} bytes"


def test_the_module_redraws_every_figure_from_the_data_alone(tmp_path):
    # the data files without a single Markdown table beside them: no figure reads a table
    shutil.copytree(DOCS_TABLES / "data", tmp_path / "tables" / "data")
    assert figures.main(["--tables", str(tmp_path / "tables"), "--out", str(tmp_path / "out")]) == 0
    drawn = sorted(p.name for p in (tmp_path / "out").glob("*.png"))
    assert drawn == sorted(p.name for p in DOCS_FIGURES.glob("*.png"))


def test_every_figure_drawn_by_name_has_its_data_file():
    missing = [
        name for name in figures.DRAWN if not (DOCS_TABLES / "data" / f"{name}.csv").is_file()
    ]
    assert missing == []


def test_an_unknown_figure_is_a_one_line_error(capsys):
    with pytest.raises(SystemExit) as stop:
        figures.main(["--out", "/nonexistent", "no_such_figure"])
    assert stop.value.code == 2
    assert "no data file draws no_such_figure" in capsys.readouterr().err


def test_per_round_data_draws_curves_with_bands(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    rows = (
        ["method,round,mean,std,runs"]
        + [f"{m},{r},{0.1 * r:.4f},0.0100,3" for m in ("fedavg", "scaffold") for r in range(4)]
        + ["local,0,0.2000,,1"]
    )
    (data / "cmp_rounds.csv").write_text("\n".join(rows) + "\n")
    assert figures.names(tmp_path) == ["cmp_rounds"]
    assert (
        figures.redraw("cmp_rounds", tmp_path, tmp_path / "out")
        == tmp_path / "out" / "cmp_rounds.png"
    )
    assert (tmp_path / "out" / "cmp_rounds.png").stat().st_size > 0


def run(seed: int, accuracies: dict[int, float]) -> RunRecord:
    rows = [
        {"round": r, "split": "test", "metric": "accuracy", "value": v}
        for r, v in accuracies.items()
    ]
    return RunRecord(f"run{seed}", {}, seed, {}, rows)


def test_a_comparison_writes_mean_and_sample_std_per_round_of_the_rounds_all_runs_reached():
    rows = round_rows(
        {
            "fedavg": [run(0, {0: 0.1, 1: 0.5, 2: 0.7}), run(1, {0: 0.1, 1: 0.7})],
            "local": [run(0, {0: 0.2})],
        }
    )
    assert rows == [
        {"method": "fedavg", "round": 0, "mean": "0.1000", "std": "0.0000", "runs": 2},
        {"method": "fedavg", "round": 1, "mean": "0.6000", "std": "0.1414", "runs": 2},
        {"method": "local", "round": 0, "mean": "0.2000", "std": "", "runs": 1},
    ]


def test_a_comparison_writes_each_methods_final_and_best_accuracy_for_its_figure():
    def summary(seed: int, final: float, best: float | None) -> RunRecord:
        return RunRecord(
            f"run{seed}", {}, seed, {"final_accuracy": final, "best_accuracy": best}, []
        )

    rows = method_rows(
        {"fedavg": [summary(0, 0.5, 0.6), summary(1, 0.7, 0.8)], "local": [summary(0, 0.2, None)]}
    )
    assert rows[0] == pytest.approx(
        {
            "method": "fedavg",
            "runs": 2,
            "final_accuracy": 60.0,
            "final_accuracy_std": 14.142135623730951,
            "best_accuracy": 70.0,
        }
    )
    # one run has no spread, and no best accuracy is not a best accuracy of 0
    assert rows[1] == {
        "method": "local",
        "runs": 1,
        "final_accuracy": 20.0,
        "final_accuracy_std": None,
        "best_accuracy": None,
    }


def test_a_table_whose_figure_is_drawn_from_data_is_not_published_without_it(tmp_path, monkeypatch):
    from benchmarks import common

    monkeypatch.setattr(common, "DOCS_TABLES", tmp_path)
    with pytest.raises(ValueError, match="the figure of perf_methods is drawn from its data"):
        common.publish_in_docs("perf_methods", ["| method |", "|---|"], script="x.py")
    assert not (tmp_path / "perf_methods.md").exists()  # nothing written
