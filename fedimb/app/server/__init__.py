"""The server side of a run: the ServerApp, its round loop, its checkpoints and what a
strategy needs from the run."""
