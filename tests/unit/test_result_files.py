"""Result files are read defensively: ``fedimb report``, ``compare`` and ``export`` leave out
a run whose summary.json, metrics.csv or config.yaml is malformed (or drop the bad rows),
with one warning naming the file and the field and no traceback; a NaN is never averaged in;
a YAML alias bomb is refused at once; and a resumed run skips a mistyped round event."""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time

import pytest

from fedimb.app.configuration.compose import compose
from fedimb.cli.main import run as fedimb
from fedimb.cli.rundir.folder import RunRecorder
from fedimb.cli.rundir.reader import MalformedFile, read_yaml
from fedimb.core.errors import FedimbError
from fedimb.core.events import format_event, parse_event
from tests.run_events import start_event
from tests.unit.test_comparison import make_run

#: nine lines, a billion nodes for whoever walks what yaml.safe_load returns
ALIAS_BOMB = "\n".join(
    ['a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    + [f"{c}: &{c} [{', '.join([f'*{chr(ord(c) - 1)}'] * 9)}]" for c in "bcdefghi"]
    + ["method: {name: fedavg}"]
)


def _summary(run, **fields):
    path = run / "summary.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **fields}))


def _metrics_row(run, row):
    with open(run / "metrics.csv", "a") as fh:
        fh.write(row + "\n")


#: how each input is damaged, the file and the field the warning names, and the fedavg row
#: of the report (the damaged run left out, its bad rows dropped, or its NaN not averaged)
MALFORMED = {
    "string accuracy": (
        lambda run: _summary(run, final_accuracy="high"),
        "summary.json",
        "final_accuracy",
        "| fedavg | 1 | 70.00 (n = 1) |",
    ),
    "text in metrics.csv": (
        lambda run: _metrics_row(run, "3,train,test,accuracy,lots"),
        "metrics.csv",
        "value",
        "| fedavg | 2 | 60.00 ± 14.14 |",
    ),
    "5 MB csv field": (
        lambda run: _metrics_row(run, "3,train,test,accuracy," + "9" * 5_000_000),
        "metrics.csv",
        "field larger than field limit",
        "| fedavg | 2 | 60.00 ± 14.14 |",
    ),
    "NaN accuracy": (
        lambda run: _summary(run, final_accuracy=float("nan")),
        "summary.json",
        "final_accuracy",
        "| fedavg | 2 | 70.00 (n = 1) (1 not a number, left out) |",
    ),
}


def runs_with(tmp_path, damage):
    """Two fedavg runs (seeds 0 and 1, final accuracy 0.5 and 0.7), the first damaged."""
    root = tmp_path / "runs"
    damage(make_run(root, "s0", seed=0, final=0.5))
    make_run(root, "s1", seed=1, final=0.7)
    return root


def command(capsys, *args):
    """``fedimb ARGS`` in this process: (exit code, stdout, stderr). An exception other
    than fedimb's one-line errors (exit code 2) fails the test, as its traceback would."""
    try:
        code = fedimb(list(args))
    except FedimbError as err:
        print(f"fedimb: error: {err}", file=sys.stderr)
        code = 2
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("case", list(MALFORMED))
def test_report_leaves_out_or_drops_what_is_malformed_with_one_warning(case, tmp_path, capsys):
    damage, file, field, row = MALFORMED[case]
    root = runs_with(tmp_path, damage)
    code, out, err = command(capsys, "report", str(root), "--out", str(tmp_path / "out"))
    assert code == 0 and "Traceback" not in err
    (warning,) = err.splitlines()
    assert warning.startswith(f"fedimb: warning: {root / 's0' / file}") and field in warning
    assert row in out and "nan" not in out.lower().replace("n/a", "")


@pytest.mark.parametrize("case", list(MALFORMED))
def test_compare_and_export_read_the_same_files_as_defensively(case, tmp_path, capsys):
    damage, file, field, _ = MALFORMED[case]
    root = runs_with(tmp_path, damage)
    code, out, err = command(capsys, "compare", str(root))
    assert code == 0 and "Traceback" not in err
    assert f"{root / 's0' / file}" in err and field in err
    assert "| nan" not in out
    if case == "NaN accuracy":
        assert "| fedavg | 1 (1 not a number, left out) | 70.00 |" in out
    code, out, err = command(capsys, "export", str(root), "--out", str(tmp_path / "t.csv"))
    assert code == 0 and "Traceback" not in err
    assert f"{root / 's0' / file}" in err and field in err


def test_a_string_accuracy_in_every_run_is_one_line_and_exit_code_2(tmp_path, capsys):
    root = tmp_path / "runs"
    _summary(make_run(root, "s0"), final_accuracy="high")
    code, _, err = command(capsys, "report", str(root))
    assert code == 2 and err.splitlines()[-1].startswith("fedimb: error: no completed runs")


def test_an_alias_bomb_is_refused_at_once(tmp_path):
    (tmp_path / "config.yaml").write_text(ALIAS_BOMB)
    began = time.monotonic()
    with pytest.raises(MalformedFile, match=r"config\.yaml: yaml: line 2: an alias"):
        read_yaml(tmp_path / "config.yaml")
    assert time.monotonic() - began < 1


def _six_gigabytes():
    resource.setrlimit(resource.RLIMIT_AS, (6 << 30, 6 << 30))


@pytest.mark.parametrize("subcommand", ["report", "compare", "export"])
def test_a_run_folder_with_an_alias_bomb_is_left_out_quickly(subcommand, tmp_path):
    root = runs_with(tmp_path, lambda run: (run / "config.yaml").write_text(ALIAS_BOMB))
    out = ["--out", str(tmp_path / ("t.csv" if subcommand == "export" else "out"))]
    done = subprocess.run(
        [sys.executable, "-m", "fedimb", subcommand, str(root)]
        + ([] if subcommand == "compare" else out),
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=_six_gigabytes,  # today's code would walk a billion nodes
    )
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert done.stderr.strip() == (
        f"fedimb: warning: {root / 's0' / 'config.yaml'}: yaml: line 2: an alias (*) (run left out)"
    )


def test_a_mistyped_round_event_is_skipped_on_resume_with_its_field(tmp_path):
    events = [
        start_event(num_parameters=100, num_clients=3, num_rounds=1),
        format_event("round", round=0, stage="train", test={"accuracy": 0.1}),
        format_event("round", round="one", stage="train", test={"accuracy": 0.5}),
        format_event("round", round=1, stage="train", test={"accuracy": "high"}),
        format_event("round", round=1, stage="train", bytes={"up": [1]}, test={"accuracy": 0.4}),
        format_event("end", rounds=1, seconds=2.0),
    ]
    path = tmp_path / "events.jsonl"
    path.write_text("\n".join(json.dumps(parse_event(line)) for line in events) + "\n")
    warnings: list[str] = []
    cfg = compose(["dataset=digits", "num_clients=3", "num_rounds=1", "runtime=in_process"])
    recorder = RunRecorder(tmp_path, cfg, echo=warnings.append, resume=True)
    assert [r["round"] for r in recorder.rounds] == [0]
    assert warnings == [
        f"[fedimb] warning: skipped 3 damaged lines of {path} (lines 3 (field 'round'), "
        "4 (field 'test.accuracy'), 5 (field 'bytes.up'))"
    ]
    assert recorder.finish()["final_accuracy"] == 0.1  # no traceback writing the run folder
