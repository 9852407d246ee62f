"""``fedimb tune``: equal-budget tuning with Hydra's Optuna sweeper."""
