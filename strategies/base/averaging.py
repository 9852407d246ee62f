"""The server of every method that changes only the client: FedAvg's sample-weighted
mean of the local models, with personal evaluation for clients that have a personal
model. A method's own strategy module subclasses it in one line."""

from strategies.base import BaseStrategy, PersonalEvaluation


class AveragingStrategy(PersonalEvaluation, BaseStrategy):
    """FedAvg's server step (the base strategy unchanged)."""

    #: the next round starts from the aggregate alone, so its clients need not wait for
    #: this round's test (without personal evaluation, see the round loop)
    evaluation_overlaps_next_round = True
    #: its server step is the weighted average alone
    asynchronous = True
