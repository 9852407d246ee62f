"""The experiment's configuration: composing, checking, saving and carrying it, and what it
builds."""
