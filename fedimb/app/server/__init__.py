"""The server side of a run: the ServerApp, its round loop, checkpoints and the strategy's
context."""
