"""The one local federation a matrix test module (faults, attacks) runs its deployment cells on."""

from __future__ import annotations


class MatrixFederation:
    """Started at the first deployment cell, stopped with the module (:meth:`close`)."""

    def __init__(self, out):
        self.out = out
        self.federation = None

    def federation_for(self, runtime: str):
        """The local federation for a deployment cell, None for the other runtimes."""
        if runtime == "deployment" and self.federation is None:
            from fedimb.cli.federation.local import LocalFederation

            self.federation = LocalFederation(self.out / "federation", 3).start()
        return self.federation if runtime == "deployment" else None

    def close(self) -> None:
        if self.federation is not None:
            self.federation.stop()
