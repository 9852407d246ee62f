"""The experiment's configuration: composed, checked, saved, carried and upgraded, and
what it builds."""
