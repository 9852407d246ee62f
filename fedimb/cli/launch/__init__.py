"""Starting a run: Hydra's task, the preflight, the runtime's process, and following a
deployed run to its end."""
