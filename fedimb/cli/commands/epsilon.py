"""``fedimb epsilon key=value ...``: the (ε, δ) a differentially private configuration
will spend, round by round, without running it."""

from __future__ import annotations

from fedimb.cli.commands.overrides import parse_overrides
from fedimb.core.errors import ConfigError


def epsilon_main(argv: list[str]) -> int:
    """Print ε at δ after each planned round of a ``privacy=dp_*`` configuration and the
    round its ``privacy.max_epsilon`` stops it after. No training."""
    from fedimb.app.configuration.compose import compose
    from fedimb.app.privacy import account
    from fedimb.cli.launch.preflight import build_strategy

    example = (
        "privacy=dp_server_fixed privacy.noise_multiplier=1.0 num_clients=100 "
        "fraction_fit=0.1 num_rounds=50"
    )
    cfg = compose(parse_overrides("epsilon", epsilon_main, example, argv))
    if str(cfg.privacy.name) == "none":
        raise ConfigError("privacy=none spends no ε: choose privacy=dp_* to plan a budget")
    rounds = build_strategy(cfg).total_rounds()
    print(account.plan_line(cfg, rounds))
    spent = account.planned_epsilons(cfg, rounds)
    if spent:
        print("| round | ε |\n|---|---|")
        print("\n".join(f"| {r} | {e:.4g} |" for r, e in enumerate(spent, start=1)))
    return 0
