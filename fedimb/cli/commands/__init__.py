"""The subcommands of ``fedimb``: their table and their argument parsing."""
