"""Deliberate faults and attacks, for the fault and attack matrices."""
