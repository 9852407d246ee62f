"""Search spaces of ``fedimb tune``: each syntax in the Optuna sweeper's form, the one-line
errors of the configuration's check, and every method's space at its bounds."""

from __future__ import annotations

import pytest

from fedimb.app.configuration.compose import compose, group_choices
from fedimb.app.configuration.search_space import check_search, parse_dimension, search_space
from fedimb.core.errors import ConfigError


@pytest.mark.parametrize(
    ("value", "override"),
    [
        ([0.001, 0.01, 0.1, 1], "choice(0.001, 0.01, 0.1, 1)"),
        (["sgd", "adam"], "choice('sgd', 'adam')"),
        ([True, None], "choice(true, null)"),
        ("log(0.001, 0.3)", "tag(log, interval(0.001, 0.3))"),
        ("float(0, 1)", "interval(0.0, 1.0)"),
        ("int(1, 5)", "int(interval(1, 5))"),
        (" int( 2 ,8 ) ", "int(interval(2, 8))"),
    ],
)
def test_each_syntax_becomes_the_sweepers_override(value, override):
    assert parse_dimension("k.x", value, "tune.search").sweep_override() == f"k.x={override}"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ([], r"^tune\.search\.k\.x must list at least one plain value"),
        ([[1, 2]], r"^tune\.search\.k\.x must list at least one plain value"),
        ("log(0.3)", r"^tune\.search\.k\.x must be a list of choices, log\(a, b\), float"),
        ("uniform(0, 1)", r"^tune\.search\.k\.x must be a list of choices"),
        (0.1, r"^tune\.search\.k\.x must be a list of choices"),
        ("float(1, 0.5)", r"^tune\.search\.k\.x: float\(a, b\) needs numbers a < b"),
        ("float(a, 1)", r"^tune\.search\.k\.x: float\(a, b\) needs numbers a < b"),
        ("log(0, 1)", r"^tune\.search\.k\.x: log\(a, b\) needs a > 0"),
        ("int(1.5, 3)", r"^tune\.search\.k\.x: int\(a, b\) needs integer bounds"),
    ],
)
def test_a_value_that_does_not_parse_gets_one_line(value, message):
    with pytest.raises(ConfigError, match=message) as err:
        parse_dimension("k.x", value, "tune.search")
    assert "\n" not in str(err.value)


def test_the_methods_search_joins_the_shared_one_and_wins_on_a_shared_key():
    cfg = compose(["method=fedprox", "dataset=digits"])
    cfg.method.search = {"method.client.mu": [0.5], "train.lr": "float(0.01, 0.02)"}
    assert [d.sweep_override() for d in search_space(cfg)] == [
        "train.lr=interval(0.01, 0.02)",
        "method.client.mu=choice(0.5)",
    ]


@pytest.mark.parametrize(
    ("key", "message"),
    [
        ("method.client.muu", r"^search key 'method\.client\.muu' is no key of the configuration"),
        ("seed", r"^seed cannot be searched"),
    ],
)
def test_the_check_refuses_a_key_the_configuration_lacks(key, message):
    cfg = compose(["method=fedprox", "dataset=digits"])
    cfg.method.search = {key: [1, 2]}
    with pytest.raises(ConfigError, match=message):
        check_search(cfg)


def test_a_bad_search_entry_stops_a_run_before_it_starts():
    with pytest.raises(ConfigError, match=r"^tune\.search\.train\.lr must be a list"):
        compose(["method=fedavg", "dataset=digits", "tune.search={train.lr: 3}"])


@pytest.mark.parametrize("method", group_choices("method"))
def test_every_method_declares_a_search_that_composes_at_its_bounds(method):
    base = [f"method={method}", "dataset=digits", "num_clients=10"]
    cfg = compose(base)
    assert "search" in cfg.method, f"conf/method/{method}.yaml declares no search"
    dimensions = search_space(cfg)
    for end in (0, -1):
        compose([*base, *(f"{d.key}={d.extremes()[end]}" for d in dimensions)])
