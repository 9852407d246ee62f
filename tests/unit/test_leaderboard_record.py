"""The leaderboard's record: finished steps as one JSON Lines file per set-up, restored
into a results folder byte for byte (the metrics cut to the accuracy rows)."""

from __future__ import annotations

import json

from benchmarks.accuracy import leaderboard_record as record

METRICS = "round,stage,split,metric,value\n1,train,test,accuracy,0.5\n1,train,test,loss,2.0\n"


def finished_run(out, setup="dir01", method="fedavg", seed=0, accuracy=0.5):
    folder = out / "runs" / setup / method / f"s{seed}"
    folder.mkdir(parents=True)
    (folder / "config.yaml").write_text("method:\n  name: fedavg\n")
    (folder / "summary.json").write_text(json.dumps({"completed": True, "final": accuracy}))
    (folder / "metrics.csv").write_text(METRICS)
    (folder / record.PLAN_FILE).write_text("{}")
    return folder


def finished_tuning(out, setup="dir01", method="fedavg"):
    folder = out / "tune" / setup / method
    (folder / "conf" / "experiment").mkdir(parents=True)
    (folder / "conf" / "experiment" / "fedavg_tuned.yaml").write_text("train:\n  lr: 0.1\n")
    (folder / "summary.json").write_text("{}")
    (folder / "leaderboard_done.json").write_text('{"plan": {}}')
    return folder


def test_finished_steps_are_recorded_and_restored_byte_for_byte(tmp_path):
    out, book, again = tmp_path / "out", tmp_path / "record", tmp_path / "again"
    run, tuning = finished_run(out), finished_tuning(out)
    unfinished = finished_run(out, seed=1)
    (unfinished / "summary.json").write_text('{"completed": false}')
    assert record.merge(out, book) == (0, 2)
    assert sorted(p.name for p in book.iterdir()) == ["dir01.jsonl"]
    assert len((book / "dir01.jsonl").read_text().splitlines()) == 2
    assert record.merge(again, book) == (2, 0)
    for folder in (run, tuning):
        twin = again / folder.relative_to(out)
        for path in folder.rglob("*"):
            if path.is_file():
                expected = path.read_text()
                if path.name == "metrics.csv":
                    expected = record.accuracy_rows(expected)
                assert (twin / path.relative_to(folder)).read_text() == expected
    assert "loss" not in (again / run.relative_to(out) / "metrics.csv").read_text()
    assert not (again / unfinished.relative_to(out)).exists()


def test_a_step_recorded_again_replaces_its_line(tmp_path):
    out, book = tmp_path / "out", tmp_path / "record"
    finished_run(out)
    finished_run(out, method="fedprox")
    record.record_report(out, book, "dir01", "fedavg", 0)
    record.record_report(out, book, "dir01", "fedprox", 0)
    summary = out / "runs" / "dir01" / "fedavg" / "s0" / "summary.json"
    summary.write_text(json.dumps({"completed": True, "final": 0.9}))
    record.record_report(out, book, "dir01", "fedavg", 0)
    steps = record.read_steps(book, "dir01")
    assert [(s["method"], s["seed"]) for s in steps] == [("fedavg", 0), ("fedprox", 0)]
    assert json.loads(steps[0]["files"]["summary.json"])["final"] == 0.9
    record.record_report(out, None, "dir01", "fedavg", 0)  # no record: nothing written


def test_steps_recorded_from_parallel_threads_all_keep_their_line(tmp_path):
    # the suite records its steps from a thread pool; each step reads, replaces its line
    # and writes the set-up's file, so unguarded writes lost or cut lines
    from concurrent.futures import ThreadPoolExecutor

    out, book = tmp_path / "out", tmp_path / "record"
    methods = [f"m{i}" for i in range(24)]
    for method in methods:
        finished_run(out, method=method)
    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(lambda m: record.record_report(out, book, "dir01", m, 0), methods))
    assert sorted(s["method"] for s in record.read_steps(book, "dir01")) == sorted(methods)
