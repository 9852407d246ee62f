"""An older run folder's configuration is brought up to date once, in one step: today's
defaults for its choices under its saved values, the old meanings of keys it lacked,
and its own search spaces and unknown options kept as saved."""

from __future__ import annotations

import pytest
import yaml
from omegaconf import OmegaConf

from fedimb.app.configuration.compose import compose
from fedimb.app.configuration.upgrade import MIGRATIONS, upgrade
from fedimb.app.server.checkpoint import checkpoint_path, experiment_key
from fedimb.cli.rundir.reader import run_folder_config


def saved(overrides: list[str]) -> dict:
    data = OmegaConf.to_container(compose(overrides))
    assert isinstance(data, dict)
    return data


@pytest.mark.parametrize(
    "overrides",
    [
        [],
        ["method=rebafl", "runtime=simulation", "dropout=persistent"],
        ["method=scaffold", "runtime=in_process", "aggregation=centered_clip"],
        ["method=fedconcat_id", "partition=pathological"],
        ["method=fedprox", "privacy=dp_server_fixed", "tracking=tensorboard"],
        ["method=fedloge"],
    ],
)
def test_a_configuration_of_today_is_left_as_it_is(overrides):
    fresh = saved(overrides)
    assert OmegaConf.to_container(upgrade(fresh)) == fresh


def test_keys_written_before_version_1_keep_their_old_meaning():
    older = saved(["runtime=simulation"])
    del older["config_version"], older["influence"]
    for key in ("client_ids", "client_state", "nodes"):
        del older["runtime"][key]
    upgraded = upgrade(older)
    assert upgraded.config_version == compose([]).config_version
    # what a runtime without these settings meant: nodes that name their client, state in
    # memory, nodes=auto; not today's simulation defaults (assigned, auto)
    assert (upgraded.runtime.client_ids, upgraded.runtime.client_state) == ("claimed", "memory")
    assert upgraded.runtime.nodes == "auto"
    assert upgraded.influence == compose([]).influence  # a section that did not exist yet
    assert set(MIGRATIONS[1]) >= {"runtime.client_ids", "runtime.client_state"}


def test_a_fedloge_run_of_version_1_keeps_the_sse_c_it_was_built_with():
    # before version 2 the SSE-C builder had no sse_lr / sse_norm: it ran Adam at 0.01
    # towards unit columns, which today's defaults (1e-4, 0.1) no longer are
    older = saved(["method=fedloge"])
    older["config_version"] = 1
    del older["method"]["strategy"]["sse_lr"], older["method"]["strategy"]["sse_norm"]
    upgraded = upgrade(older)
    assert (upgraded.method.strategy.sse_lr, upgraded.method.strategy.sse_norm) == (0.01, 1.0)
    today = compose(["method=fedloge"]).method.strategy
    assert (today.sse_lr, today.sse_norm) == (1.0e-4, 0.1)
    other = saved(["method=fedavg"])
    other["config_version"] = 1
    assert "sse_lr" not in upgrade(other).method.strategy  # only where fedloge declares it


def test_a_migration_adds_only_keys_its_runtime_declares_today():
    older = saved(["runtime=in_process"])
    del older["config_version"], older["runtime"]["client_ids"]
    upgraded = upgrade(older)
    assert upgraded.runtime.client_ids == "claimed"
    assert "nodes" not in upgraded.runtime and "rejoin_timeout" not in upgraded.runtime


def test_a_key_missing_from_a_version_1_configuration_gets_todays_default():
    current = saved(["runtime=simulation"])
    del current["runtime"]["client_ids"]
    assert upgrade(current).runtime.client_ids == compose([]).runtime.client_ids


def test_a_section_whose_option_is_unknown_today_is_kept_as_saved():
    older = saved([])
    older["method"] = {"name": "retired", "lr": 0.3}
    upgraded = upgrade(older)
    assert OmegaConf.to_container(upgraded.method) == {"name": "retired", "lr": 0.3}


def test_search_spaces_stay_the_users_key_for_key():
    older = saved([])
    older["tune"]["search"] = {}
    older["method"]["search"] = {"train.local_epochs": [1, 2]}
    upgraded = upgrade(older)
    assert OmegaConf.to_container(upgraded.tune.search) == {}
    assert OmegaConf.to_container(upgraded.method.search) == {"train.local_epochs": [1, 2]}


def test_a_partition_file_is_not_read_to_upgrade_its_run(tmp_path):
    older = saved([])
    older["partition"] = {"name": "file", "path": str(tmp_path / "gone.json"), "clients": [[0]]}
    upgraded = upgrade(older)
    assert OmegaConf.to_container(upgraded.partition) == older["partition"]


def test_resume_reads_an_older_run_folder_up_to_date(tmp_path):
    older = saved(["runtime=in_process"])
    del older["config_version"], older["influence"], older["validation"]
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(older))
    cfg = run_folder_config(tmp_path, ["num_rounds=7"])
    assert cfg.num_rounds == 7 and cfg.config_version == compose([]).config_version
    assert cfg.validation == compose([]).validation and cfg.influence == compose([]).influence


def test_an_older_run_resumes_from_the_checkpoint_its_run_wrote(tmp_path):
    older = saved(["runtime=in_process"])
    del older["config_version"], older["influence"], older["checkpoint"]["experiment"]
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(older))
    cfg = run_folder_config(tmp_path, ["fault.kind=none"])
    written_by_its_run = experiment_key(OmegaConf.create(older))
    assert experiment_key(cfg) != written_by_its_run  # the upgrade completed the config
    assert checkpoint_path(cfg).name.startswith(f"{written_by_its_run}-")
    # the resumed run's config.yaml keeps that name for the next resume
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(OmegaConf.to_container(cfg)))
    assert run_folder_config(tmp_path).checkpoint.experiment == written_by_its_run
