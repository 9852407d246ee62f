"""The application layer: configuration, the round loop, the Flower apps."""
