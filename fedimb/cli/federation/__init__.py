"""Flower processes on this machine: SuperLink, SuperNodes, certificates, the flwr command."""
