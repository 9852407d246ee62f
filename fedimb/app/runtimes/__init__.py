"""What differs between runtimes: one process, the simulation's node pool, the deployed Grid."""
