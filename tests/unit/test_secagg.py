"""``secagg=secaggplus``: Flower's SecAgg+ as a round's fit step. The configuration check
refuses, one line each, what SecAgg+ cannot run; in process (over the loopback Grid) the
server receives only masked vectors and the method's strategy only the mean, which equals
FedAvg's within the quantisation error; a node that leaves mid-protocol above the
reconstruction threshold costs its model only, below it the round keeps the global model."""

from __future__ import annotations

import numpy as np
import pytest
from flwr.common import bytes_to_ndarray, parameters_to_ndarrays
from flwr.common.secure_aggregation.secaggplus_constants import RECORD_KEY_CONFIGS, Key

from fedimb.app.configuration import compose as config
from fedimb.app.configuration.keys import group_choices
from fedimb.app.privacy import secagg
from fedimb.app.privacy.secagg_table import secagg_table
from fedimb.app.runtimes.in_process import InProcessFederation
from fedimb.core import protocol
from fedimb.core.errors import ConfigError

#: four clients of the digits data set, one local epoch, every client every round
RUN = [
    "dataset=digits",
    "partition=iid",
    "num_clients=4",
    "dropout=none",
    "train.local_epochs=1",
    "runtime=in_process",
]
SECAGG = [*RUN, "secagg=secaggplus"]


# --------------------------------------------------------------- the refusals
@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (["method=scaffold"], "method 'scaffold' sends the server control_delta"),
        (["method=rebafl"], "method 'rebafl' sends the server prototypes_classes"),
        (["method=feddyn"], "method 'feddyn' does not average the client models"),
        (["method=fedconcat"], "method 'fedconcat' does not average the client models"),
        (["method=lg_fedavg"], "method 'lg_fedavg' has no global model"),
        (["method=qffl"], "method 'qffl' weights the client models by what the clients report"),
        (["method=grpfed"], "method 'grpfed' weights the client models by what the clients"),
        (["normalize=latent_cosine"], "sends the server latent_mean besides its model"),
        (["method=fedlws"], "shrink=fedlws computes its factors from every client's model"),
        (["aggregation=median"], "aggregation=median needs every client's model"),
        (["aggregation.max_update_norm=1.0"], "aggregation.max_update_norm clips each"),
        (["privacy=dp_server_fixed"], "privacy=dp_server_fixed clips every client's update on"),
        (["privacy=dp_server_adaptive"], "privacy=dp_server_adaptive clips every client's"),
        (["num_clients=1"], "needs at least 2 clients per round, and the run samples 1"),
        (["secagg.num_shares=2"], "secagg.num_shares must be at least 3 as an integer"),
        (["secagg.num_shares=1.5"], "secagg.num_shares must be an integer or a fraction"),
        (["secagg.reconstruction_threshold=3"], "must be below secagg.num_shares (3)"),
        (
            ["secagg.num_shares=7", "secagg.reconstruction_threshold=5"],
            "reconstruction_threshold=5 exceeds the 4 clients a round samples",
        ),
        (["secagg.modulus_range=1000"], "secagg.modulus_range must be a power of 2 above"),
        (["secagg.quantization_range=2147483648"], "overflows modulus_range / quantization_range"),
        (["secagg.clipping_range=0"], "secagg.clipping_range must be > 0"),
        (["secagg.timeout=-1"], "secagg.timeout must be a number of seconds > 0 or null"),
        (["+secagg.shares=3"], "unknown key 'secagg.shares'"),
        (
            ["runtime=simulation", "runtime.nodes=2", "runtime.client_state=disk"],
            "lends its 2 nodes to 4 clients",
        ),
    ],
)
def test_what_secagg_cannot_run_is_refused_in_one_line(overrides, expected):
    with pytest.raises(ConfigError) as err:
        config.compose([*SECAGG, *overrides])
    assert expected in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize(
    "overrides",
    [
        ["method=fedavg"],
        ["method=fedprox"],
        ["method=fedlc"],
        ["method=fedrs"],
        ["method=bsm_fedavg"],
        ["method=fedavgm"],
        ["privacy=dp_client_fixed"],
        ["privacy=dp_client_adaptive"],
        ["runtime=simulation"],
        ["secagg.num_shares=0.5", "secagg.reconstruction_threshold=0.5"],
    ],
)
def test_methods_on_fedavgs_server_and_client_side_clipping_run(overrides):
    cfg = config.compose([*SECAGG, *overrides])
    assert secagg.enabled(cfg)


def test_the_docs_table_is_the_methods_declarations():
    """docs/tables/secagg_methods.md is what benchmarks/perf/secagg.py --table-only writes
    from the declarations (rewritten here where out of date: tests.generated), one row per
    method, each refusal the check's own words."""
    from benchmarks.common import DOCS_TABLES
    from tests.generated import keep_current

    table = secagg_table()
    header = "<!-- written by benchmarks/perf/secagg.py; rerun it to update -->"
    keep_current(DOCS_TABLES / "secagg_methods.md", "\n".join([header, "", *table]) + "\n")
    rows = {line.split("|")[1].strip(): line.split("|")[2].strip() for line in table[2:]}
    assert list(rows) == group_choices("method")
    assert rows["fedavg"] == rows["fedprox"] == rows["fedlc"] == "runs"
    assert rows["scaffold"].startswith("refused: it sends the server control_delta")


# --------------------------------------------------------- what the server holds
def quantisation_bound(settings: secagg.SecAggPlusSettings, sizes: list[int]) -> float:
    """The most one entry of SecAgg+'s mean can differ from FedAvg's (weights n_k / Σ n):
    every client's weighted value (d_k · p, d_k = round(n_k / M · Q) / Q) is rounded to a
    step of 2C/Q (stochastically: less than one step), the server divides the sum by Σ d_k,
    and the weights d_k / Σ d differ from n_k / Σ n (the values are within ±C)."""
    c, q, m = settings.clipping_range, settings.quantization_range, settings.max_weight
    d = np.round(np.asarray(sizes) / m * q) / q
    n = np.asarray(sizes, dtype=np.float64)
    rounding = 2 * c / q * len(sizes) / d.sum()
    weighting = c * np.abs(d / d.sum() - n / n.sum()).sum()
    return float(rounding + weighting)


class Spied:
    """A node's client whose fit results are kept: what each client computed."""

    def __init__(self, client, trained: dict):
        self.client, self.trained = client, trained

    def __getattr__(self, name):
        return getattr(self.client, name)

    def fit(self, ins):
        res = self.client.fit(ins)
        self.trained[int(ins.config[protocol.ASSIGNED_PARTITION])] = (
            parameters_to_ndarrays(res.parameters),
            res.num_examples,
        )
        return res


def spied_federation(overrides: list[str]):
    """A SecAgg+ federation whose clients' own models, every reply the server receives and
    every result its strategy's aggregate_fit gets are recorded."""
    fed = InProcessFederation([*SECAGG, "num_rounds=1", *overrides])
    trained: dict = {}
    for node in fed.nodes:
        make = node.make_client
        node.make_client = lambda n, make=make: Spied(make(n), trained)
    grid, received = fed.server.secure_fit.grid, []
    send = grid.send_and_receive

    def recorded(messages, *, timeout=None):
        replies = list(send(messages, timeout=timeout))
        received.extend(replies)
        return replies

    grid.send_and_receive = recorded
    aggregated: list = []
    aggregate_fit = fed.strategy.aggregate_fit

    def spy(server_round, results, failures):
        aggregated.extend(parameters_to_ndarrays(res.parameters) for _, res in results)
        return aggregate_fit(server_round, results, failures)

    fed.strategy.aggregate_fit = spy
    return fed, trained, received, aggregated


def fedavg(trained: dict) -> list[np.ndarray]:
    sizes = np.array([n for _, n in trained.values()], dtype=np.float64)
    models = [m for m, _ in trained.values()]
    return [
        sum(w * m[i].astype(np.float64) for w, m in zip(sizes / sizes.sum(), models))
        for i in range(len(models[0]))
    ]


def biggest_gap(a: list[np.ndarray], b: list[np.ndarray]) -> float:
    return max(float(np.abs(x.astype(np.float64) - y).max()) for x, y in zip(a, b))


def test_the_server_holds_masked_vectors_and_the_mean_never_one_model():
    fed, trained, received, aggregated = spied_federation([])
    record = fed.round(1)
    assert record["clients"]["succeeded"] == 4 and record["extra"]["secagg.summed"] == 4
    assert len(trained) == 4
    settings = secagg.settings_of(fed.cfg)
    step = 2 * settings.clipping_range / settings.quantization_range
    # no reply carries a model array, and every masked vector looks nothing like the
    # client's quantised model (a value off by at most one step would be the model itself)
    assert all(
        not record.array_records or not any(record.array_records.values())
        for record in (reply.content for reply in received)
    )
    masked = [
        [
            bytes_to_ndarray(b)
            for b in reply.content.config_records[RECORD_KEY_CONFIGS][Key.MASKED_PARAMETERS]
        ]
        for reply in received
        if Key.MASKED_PARAMETERS in reply.content.config_records[RECORD_KEY_CONFIGS]
    ]
    assert len(masked) == 4
    for model, n in trained.values():
        ratio = round(n / settings.max_weight * settings.quantization_range)
        weight = ratio / settings.quantization_range
        quantised = [
            (
                np.clip(a * weight, -settings.clipping_range, settings.clipping_range)
                + settings.clipping_range
            )
            / step
            for a in model
        ]
        for vector in masked:
            assert int(vector[0][0]) != ratio  # the weight is masked too
            close = np.concatenate(
                [
                    (np.abs(v.astype(np.float64) - q) <= 1).ravel()
                    for v, q in zip(vector[1:], quantised)
                ]
            )
            assert close.mean() < 0.01
    # the strategy gets one mean per surviving client: FedAvg's within the bound, and no model
    bound = quantisation_bound(settings, [n for _, n in trained.values()])
    assert len(aggregated) == 4
    assert all(
        biggest_gap(a, [x.astype(np.float64) for x in aggregated[0]]) == 0 for a in aggregated
    )
    assert biggest_gap(aggregated[0], fedavg(trained)) <= bound
    for model, _ in trained.values():
        assert biggest_gap(aggregated[0], [m.astype(np.float64) for m in model]) > 100 * bound
    new = parameters_to_ndarrays(fed.parameters)
    assert [a.dtype for a in new] == [m.dtype for m in next(iter(trained.values()))[0]]


def test_a_node_that_leaves_mid_protocol_above_the_threshold_costs_only_its_model():
    """Client 1 fails in the stage that collects the masked vectors (after it shared its
    keys): its neighbours' shares rebuild its masks, and the mean is the other three's."""
    fed, trained, _, _ = spied_federation(["fault.kind=raise", "fault.clients=[1]"])
    record = fed.round(1)
    assert record["clients"]["succeeded"] == 3 and record["clients"]["errors"] == 1
    assert any(m.startswith("client 1 on node 1: left SecAgg+") for m in record["messages"])
    assert sorted(trained) == [0, 2, 3]
    bound = quantisation_bound(secagg.settings_of(fed.cfg), [n for _, n in trained.values()])
    assert biggest_gap(parameters_to_ndarrays(fed.parameters), fedavg(trained)) <= bound


def test_a_round_left_below_the_threshold_keeps_the_global_model_with_a_note():
    fed, _, _, _ = spied_federation(["fault.kind=raise", "fault.clients=[0,1,2]"])
    before = parameters_to_ndarrays(fed.parameters)
    record = fed.round(1)
    assert record["clients"]["succeeded"] == 0 and record["clients"]["errors"] == 3
    stopped = [m for m in record["messages"] if m.startswith("secagg=secaggplus stopped")]
    assert len(stopped) == 1 and "global model kept" in stopped[0]
    assert biggest_gap(parameters_to_ndarrays(fed.parameters), before) == 0


def test_a_seeded_secure_round_repeats_to_the_last_bit():
    first = InProcessFederation([*SECAGG, "num_rounds=1"])
    second = InProcessFederation([*SECAGG, "num_rounds=1"])
    first.round(1), second.round(1)
    a, b = parameters_to_ndarrays(first.parameters), parameters_to_ndarrays(second.parameters)
    assert all(np.array_equal(x, y) for x, y in zip(a, b))


def test_a_summed_reply_the_method_rejects_keeps_the_global_model():
    """Client 2 claims more samples than it holds: the method rejects its reply, but its
    weighted model is in the masked sum, so the round keeps the global model."""
    fed, trained, _, _ = spied_federation(["fault.kind=huge_num_examples", "fault.clients=[2]"])
    before = parameters_to_ndarrays(fed.parameters)
    record = fed.round(1)
    assert record["clients"]["rejected"] == 1 and record["extra"]["secagg.summed"] == 4
    assert any(
        "the masked sum holds their models: global model kept" in m for m in record["messages"]
    )
    assert biggest_gap(parameters_to_ndarrays(fed.parameters), before) == 0


def test_a_lone_client_is_no_failure_and_client_side_dp_noises_the_mean():
    """Dropout leaves one client of two (Flower's workflow needs two): the round keeps the
    model and counts no failure. Under client-side fixed clipping the mean is noised."""
    lone = InProcessFederation(
        [*SECAGG, "num_clients=2", "dropout=bernoulli", "dropout.p=0.5", "num_rounds=8"]
    )
    records = [lone.round(r) for r in range(1, 9)]
    single = [r for r in records if r["clients"]["sampled"] - r["clients"]["dropped"] == 1]
    assert single, "no round with one available client: change the seed"
    for record in single:
        assert record["clients"]["errors"] == 0 and record["clients"]["succeeded"] == 0
        assert any("needs at least 2 clients in a round" in m for m in record["messages"])
    private = InProcessFederation(
        [*SECAGG, "num_rounds=1", "privacy=dp_client_fixed", "privacy.noise_multiplier=0.1"]
    )
    record = private.round(1)
    assert record["clients"]["succeeded"] == 4 and record["extra"]["privacy.noise_std"] > 0
