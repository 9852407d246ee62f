"""The round's accounting: server phases, reply times and traffic in the round's log."""

from __future__ import annotations

import numpy as np
from flwr.common import Code, FitIns, FitRes, Status, ndarrays_to_parameters

from strategies.base.accounting import RoundAccounting, parameters_nbytes
from strategies.base.round_log import RoundLog


def ticking(*ticks: float):
    """A clock that reads ``ticks`` in turn."""
    return iter(ticks).__next__


def test_phases_and_replies_are_timed_where_the_strategy_says():
    log = RoundLog(1, "train")
    books = RoundAccounting(log, clock=ticking(10.0, 12.5, 12.5, 14.0))
    with books.phase("discover"):
        pass
    with books.phase("select"):
        pass
    books.count_replies([15.0, 18.0, 16.0])
    assert log.timing == {"discover": 2.5, "select": 1.5, "first_reply": 1.0, "last_reply": 4.0}


def test_a_phase_that_raises_is_timed_too():
    log = RoundLog(1, "train")
    try:
        with RoundAccounting(log, clock=ticking(1.0, 3.0)).phase("aggregate"):
            raise RuntimeError
    except RuntimeError:
        pass
    assert log.timing == {"aggregate": 2.0}


def test_no_reply_times_without_instructions_or_replies():
    log = RoundLog(1, "train")
    books = RoundAccounting(log)
    books.count_replies([1.0])  # no select phase ended this round
    with books.phase("select"):
        pass
    books.count_replies([])
    assert set(log.timing) == {"select"}


def test_traffic_and_client_phases_are_counted():
    log = RoundLog(1, "train")
    books = RoundAccounting(log)
    parameters = ndarrays_to_parameters([np.zeros((3, 4), np.float32)])
    books.count_sent(FitIns(parameters, {"server_round": 1}))
    res = FitRes(Status(Code.OK, ""), parameters, 5, {"train_loss": 0.5, "timing.train": 2.0})
    metrics = books.count_received(7, res)
    assert metrics == {"train_loss": 0.5}
    assert log.client_timing == {7: {"train": 2.0}}
    assert log.bytes_down > parameters_nbytes(parameters) > 0
    assert log.bytes_up > parameters_nbytes(parameters)
