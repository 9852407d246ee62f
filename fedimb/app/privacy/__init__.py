"""Differential privacy: Flower's wrappers on the server and on the clients, and what
the clients reveal."""
