"""Differential privacy: Flower's wrappers on the server and the clients, and what clients
reveal."""
