"""When a tuning seed's run counts as diverged, so that a trial is scored on every seed it
runs and never on the seed that happened to hold (``tune.divergence`` in conf/config.yaml).

A learning rate at the edge of stability trains on one seed and blows up on the next; a
trial that chose it would send report seeds to chance. So a trial runs on each of
``tune.seeds`` and is diverged, scoring :data:`fedimb.cli.tune.trial.FAILED_OBJECTIVE`,
where any seed's run failed, has no finite objective, ends at chance (its objective within
``chance_margin`` of the validation share's majority class: a model that predicts one
class) or falls from its best (its objective and its last round's accuracy below
``(1 - drop)`` times its best validation accuracy: it learned, then lost it)."""

from __future__ import annotations

import dataclasses
from typing import Any

from fedimb.core.errors import is_int, is_number, require

#: what a trial may maximise (``tune.objective``): the global model's validation objective,
#: or the personal models' on the clients' own validation shares (personal set-ups), each
#: with the summary fields of its best and its last round's validation accuracy and of its
#: chance level (None: no chance level; a client's validation share under label skew has
#: its own)
OBJECTIVES = {
    "validation_objective": (
        "validation_best_accuracy",
        "final_validation_accuracy",
        "validation_chance",
    ),
    "personal_validation_objective": (
        "personal_validation_best_accuracy",
        "personal_validation_final_accuracy",
        None,
    ),
}


def tuning_objective(tune: Any) -> str:
    """``tune.objective``: a key of :data:`OBJECTIVES`."""
    objective = tune.get("objective")
    require(
        objective in OBJECTIVES,
        f"tune.objective must be one of {', '.join(OBJECTIVES)}, got {objective!r}",
    )
    return str(objective)


@dataclasses.dataclass(frozen=True)
class Divergence:
    """The rules of ``tune.divergence``."""

    chance_margin: float
    drop: float

    @classmethod
    def from_config(cls, tune: Any) -> Divergence:
        section = tune.get("divergence") or {}
        margin: Any = section.get("chance_margin")
        drop: Any = section.get("drop")
        require(
            is_number(margin) and 0 <= margin < 1,
            f"tune.divergence.chance_margin must be in [0, 1), got {margin!r}",
        )
        require(
            is_number(drop) and 0 < drop <= 1,
            f"tune.divergence.drop must be in (0, 1], got {drop!r}",
        )
        return cls(float(margin), float(drop))

    def reason(
        self, summary: dict[str, Any], window: int = 1, key: str = "validation_objective"
    ) -> str | None:
        """Why a completed run with a finite objective ``key`` diverged, or None. The
        objective is the mean of the last ``window`` validated rounds: it has fallen from
        the best where it and the last round's accuracy both lie below ``(1 - drop)``
        times the best (a run still climbing ends at its best), in a run of at least
        ``window`` rounds, whose window holds no round before training."""
        best_key, final_key, chance_key = OBJECTIVES[key]
        objective = float(summary[key])
        chance = summary.get(chance_key) if chance_key else None
        if is_number(chance) and objective <= chance + self.chance_margin:
            margin = self.chance_margin
            return f"at chance: {objective:.4f} <= majority class {chance:.4f} + {margin:g}"
        best, final = summary.get(best_key), summary.get(final_key)
        trained = summary.get("rounds") or 0
        floor = (1 - self.drop) * best if is_number(best) else None
        ended_low = floor is not None and (not is_number(final) or final < floor)
        if floor is not None and trained >= window and objective < floor and ended_low:
            return f"fell from its best: {objective:.4f} < (1 - {self.drop:g}) x {best:.4f}"
        return None


def tuning_seeds(tune: Any) -> list[int]:
    """``tune.seeds``: at least one, each a non-negative integer, none twice."""
    seeds = tune.get("seeds")
    require(
        seeds is not None
        and not isinstance(seeds, (str, int))
        and len(seeds) > 0
        and all(is_int(s) and s >= 0 for s in seeds)
        and len(set(seeds)) == len(seeds),
        f"tune.seeds must be a list of distinct integers >= 0, e.g. [100, 101], got {seeds!r}",
    )
    return [int(s) for s in seeds]


def seeds_text(seeds: list[int]) -> str:
    """``seed 100`` or ``seeds 100, 101``."""
    return f"seed{'s' if len(seeds) > 1 else ''} {', '.join(map(str, seeds))}"
