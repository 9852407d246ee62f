"""SCAFFOLD client (Karimireddy et al., ICML 2020, Algorithm 1, option II).

Every local step uses the corrected gradient g(y) − c_i + c. After K steps,
c_i⁺ = c_i − c + (x − y)/(K·η_l); the client keeps c_i⁺ in ``Context.state`` and
returns Δc_i = c_i⁺ − c_i as named payloads. c_i starts at zero.
"""

from __future__ import annotations

import numpy as np
import torch

from clients.base import BaseClient
from fedimb import payload

STATE = "scaffold_control"


class ScaffoldClient(BaseClient):
    """Control-variate corrected local SGD."""

    def before_training(self, config):
        arrays = payload.unpack(config)
        params = [p for p in self.model.parameters() if p.requires_grad]
        self.server_control = [torch.as_tensor(arrays[f"control.{j}"], device=self.device) for j in range(len(params))]
        stored = self.load_state(STATE)
        self.client_control = (
            [torch.as_tensor(stored[f"c{j}"], device=self.device) for j in range(len(params))]
            if stored else [torch.zeros_like(p) for p in params]
        )
        self.correction = [c - ci for c, ci in zip(self.server_control, self.client_control)]
        self.start = [p.detach().clone() for p in params]

    @torch.no_grad()
    def after_backward(self):
        for p, correction in zip((p for p in self.model.parameters() if p.requires_grad), self.correction):
            if p.grad is not None:
                p.grad.add_(correction)

    @torch.no_grad()
    def after_training(self, config, result):
        params = [p for p in self.model.parameters() if p.requires_grad]
        if result.steps == 0:
            new_control = list(self.client_control)
        else:
            scale = 1.0 / (result.steps * float(config["lr"]))
            new_control = [ci - c + (x - y) * scale for ci, c, x, y in
                           zip(self.client_control, self.server_control, self.start, params)]
        self.save_state(STATE, {f"c{j}": c.cpu().numpy() for j, c in enumerate(new_control)})
        return payload.pack({
            f"control_delta.{j}": (new - old).cpu().numpy().astype(np.float32)
            for j, (new, old) in enumerate(zip(new_control, self.client_control))
        })
