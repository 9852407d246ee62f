"""SCAFFOLD client (Karimireddy et al., ICML 2020, Algorithm 1, option II).

Every local step uses the corrected gradient g(y) − c_i + c. Option II sets
c_i⁺ = c_i − c + (x − y)/(K·η_l). Under plain SGD, (x − y)/(K·η_l) is the mean of the
K corrected gradients, so c_i⁺ is exactly the mean of the K uncorrected local gradients
(including the L2 term of weight decay, which the optimiser adds to the gradient). We
compute c_i⁺ in that form: it is option II to rounding error under plain SGD, and it
stays a gradient estimate under Adam or momentum, where (x − y)/(K·η_l) is not one
(Adam moves every coordinate by about η_l per step whatever its gradient, which makes
the control variates swamp the gradients). The client keeps c_i⁺ in ``Context.state``
and returns Δc_i = c_i⁺ − c_i as named payloads. c_i starts at zero.
"""

from __future__ import annotations

import numpy as np
import torch

from clients.base import BaseClient
from fedimb import payload
from fedimb.training import TrainConfig

STATE = "scaffold_control"


class ScaffoldClient(BaseClient):
    """Control-variate corrected local training."""

    def before_training(self, config):
        arrays = payload.unpack(config)
        params = self.controlled_parameters()
        self.server_control = [torch.as_tensor(arrays[f"control.{j}"], device=self.device) for j in range(len(params))]
        stored = self.load_state(STATE)
        self.client_control = (
            [torch.as_tensor(stored[f"c{j}"], device=self.device) for j in range(len(params))]
            if stored else [torch.zeros_like(p) for p in params]
        )
        self.correction = [c - ci for c, ci in zip(self.server_control, self.client_control)]
        self.weight_decay = TrainConfig.from_mapping(config).weight_decay
        self.gradient_sum = [torch.zeros_like(p) for p in params]

    def controlled_parameters(self) -> list[torch.nn.Parameter]:
        return [p for p in self.model.parameters() if p.requires_grad]

    @torch.no_grad()
    def after_backward(self):
        for p, total, correction in zip(self.controlled_parameters(), self.gradient_sum, self.correction):
            if p.grad is None:
                continue
            total.add_(p.grad)
            if self.weight_decay:
                total.add_(p, alpha=self.weight_decay)
            p.grad.add_(correction)

    @torch.no_grad()
    def after_training(self, config, result):
        if result.steps == 0:
            new_control = list(self.client_control)
        else:
            new_control = [total / result.steps for total in self.gradient_sum]
        self.save_state(STATE, {f"c{j}": c.cpu().numpy() for j, c in enumerate(new_control)})
        return payload.pack({
            f"control_delta.{j}": (new - old).cpu().numpy().astype(np.float32)
            for j, (new, old) in enumerate(zip(new_control, self.client_control))
        })
