"""SCAFFOLD client (Karimireddy et al., ICML 2020, Algorithm 1).

**Local step** (line 10): y ← y − η_l·(g_i(y) − c_i + c), in two parts: the optimiser
steps on the plain gradient g_i(y) (with its weight decay and momentum), then the
parameters move by −η_l·(c − c_i). Under plain SGD this is the paper's step exactly;
under momentum the correction never enters the momentum buffer, so it is neither
amplified by up to 1/(1 − β) nor carried into later steps, and weight decay never acts
on it.

**Control variate** c_i⁺ (line 12), setting ``control``; ``auto`` is
``option2_normalised`` under SGD and ``gradient_mean`` under Adam (how each rule fares
is measured in docs/benchmarks/accuracy.md, the stability matrix):

- ``option2_normalised``: option II with the displacement measured per momentum-weighted
  step. The optimiser's share of the displacement is (x − y_i) − K·η_l·(c − c_i) =
  η_l·Σ_j w_j·g_j, whose weights sum to a_i = Σ_{k=1..K} (1 − β^k)/(1 − β) (FedNova's
  normaliser), so c_i⁺ = ((x − y_i)/η_l − K·(c − c_i)) / a_i is the momentum-weighted
  mean of the raw local gradients; under plain SGD a_i = K and this is option II exactly.
- ``option2``: c_i⁺ = c_i − c + (x − y_i)/(K·η_l) literally: under momentum c_i is the
  momentum-amplified mean step, i.e. SCAFFOLD at an effective step η_l/(1 − β).
- ``option1``: c_i⁺ = g_i(x), the gradient of the local objective (plus weight decay's
  L2 term) at the server model, from one extra pass over the local data (training
  mode, buffers restored).
- ``gradient_mean``: c_i⁺ = the mean of the K raw mini-batch gradients, with the
  correction added to the gradient *before* the optimiser step, so that Adam normalises
  correction and gradient together (under SGD momentum amplifies the correction too).

The client keeps c_i⁺ in its client state (c_i starts at zero) and returns
Δc_i = c_i⁺ − c_i as named payloads ``control_delta.<j>``.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from clients.base import BaseClient
from clients.base_settings import setting
from fedimb.app.faults.attacks import HUGE_COUNT, HUGE_FLOAT
from fedimb.app.faults.method_attacks import FIT, MethodAttack, replaced
from fedimb.core import payload, protocol
from fedimb.core.aggregate import fednova_normaliser
from fedimb.core.errors import one_of
from fedimb.core.schema import DOWN, MODEL, UP, PayloadSpec
from fedimb.core.training import TrainConfig, batch_indices

STATE = "scaffold_control"
CONTROLS = ("auto", "option2_normalised", "option2", "option1", "gradient_mean")

#: the largest control-variate change a client may report per entry: c estimates the
#: gradient of the local loss, whose entries no honest client sees near 1e6; beyond it
#: one client would steer every client's correction
CONTROL_BOUND = 1e6
#: the server control variate c and each client's change Δc_i, per trainable parameter j
CONTROL = "control.<j>"
CONTROL_DELTA = "control_delta.<j>"
PAYLOADS = protocol.BASE_PAYLOADS + (
    PayloadSpec(CONTROL, DOWN, "float", MODEL),
    PayloadSpec(CONTROL_DELTA, UP, "float", MODEL, bound=CONTROL_BOUND, required=True),
)


def huge_control(metrics: dict, num_examples: int, variant: str, scale: float):
    """``scaffold_huge``: every control delta 3e38 (``delta``), or 10^12 samples (``n``)."""
    if variant == "n":
        return metrics, HUGE_COUNT
    prefix = CONTROL_DELTA.split("<j>")[0]
    deltas = {
        name: np.full_like(array, HUGE_FLOAT)
        for name, array in payload.unpack(metrics).items()
        if name.startswith(prefix)
    }
    return replaced(metrics, deltas), num_examples


def resolve_control(control: str, optimizer: str) -> str:
    """The c_i⁺ rule ``control`` names; ``auto`` is ``gradient_mean`` under Adam and
    ``option2_normalised`` under SGD (see the module docstring)."""
    if control != "auto":
        return control
    return "gradient_mean" if optimizer == "adam" else "option2_normalised"


class ScaffoldClient(BaseClient):
    """Control-variate corrected local training."""

    attacks = {"scaffold_huge": MethodAttack(FIT, huge_control, variants=("delta", "n"))}

    @dataclasses.dataclass(frozen=True)
    class Settings:
        control: str = setting(one_of(*CONTROLS))  # the c_i⁺ rule (module docstring)

    def before_training(self, config):
        hp = TrainConfig.from_mapping(config)
        self.control = resolve_control(self.settings_of(config).control, hp.optimizer)
        self.lr, self.weight_decay, self.batch_size = hp.lr, hp.weight_decay, hp.batch_size
        self.momentum = hp.momentum if hp.optimizer == "sgd" else 0.0
        arrays = payload.unpack(config)
        params = self.controlled_parameters()
        self.server_control = [
            torch.as_tensor(arrays[protocol.indexed(CONTROL, j)], device=self.device)
            for j in range(len(params))
        ]
        stored = self.load_state(STATE)
        self.client_control = (
            [torch.as_tensor(stored[f"c{j}"], device=self.device) for j in range(len(params))]
            if stored
            else [torch.zeros_like(p) for p in params]
        )
        self.correction = [c - ci for c, ci in zip(self.server_control, self.client_control)]
        self.start = [p.detach().clone() for p in params]
        self.gradient_sum = (
            [torch.zeros_like(p) for p in params] if self.control == "gradient_mean" else None
        )
        self.gradient_at_start = self.local_gradient() if self.control == "option1" else None

    def controlled_parameters(self) -> list[torch.nn.Parameter]:
        return [p for p in self.model.parameters() if p.requires_grad]

    @torch.no_grad()
    def after_backward(self):
        if self.control != "gradient_mean":
            return
        for p, total, correction in zip(
            self.controlled_parameters(), self.gradient_sum, self.correction
        ):
            if p.grad is None:
                continue
            total.add_(p.grad)
            if self.weight_decay:
                total.add_(p, alpha=self.weight_decay)
            p.grad.add_(correction)

    @torch.no_grad()
    def after_step(self):
        if self.control == "gradient_mean":
            return
        for p, correction in zip(self.controlled_parameters(), self.correction):
            p.add_(correction, alpha=-self.lr)

    def local_gradient(self) -> list[torch.Tensor]:
        """g_i(x): the gradient of the local objective at the current model over all
        local data (sample-weighted mean of mini-batch gradients), plus weight decay's
        L2 term; the model's buffers (e.g. BatchNorm statistics) are left unchanged."""
        params = self.controlled_parameters()
        buffers = [b.detach().clone() for b in self.model.buffers()]
        totals = [torch.zeros_like(p) for p in params]
        self.model.train()
        generator = torch.Generator().manual_seed(0)  # the order does not change the sum
        for idx in batch_indices(self.data.indices, self.batch_size, generator):
            self.model.zero_grad(set_to_none=True)
            loss = self.loss(self.data.x[idx].to(self.device), self.data.y[idx].to(self.device))
            loss.backward()
            with torch.no_grad():
                for total, p in zip(totals, params):
                    if p.grad is not None:
                        total.add_(p.grad, alpha=len(idx))
        self.model.zero_grad(set_to_none=True)
        with torch.no_grad():
            for b, saved in zip(self.model.buffers(), buffers):
                b.copy_(saved)
            n = max(self.data.num_examples, 1)
            return [total / n + self.weight_decay * p for total, p in zip(totals, params)]

    @torch.no_grad()
    def new_control(self, steps: int) -> list[torch.Tensor]:
        """c_i⁺ by the configured rule (see the module docstring)."""
        if self.control == "option1":
            return self.gradient_at_start
        if steps == 0:
            return list(self.client_control)
        if self.control == "gradient_mean":
            return [total / steps for total in self.gradient_sum]
        if self.control == "option2_normalised":
            per_step = fednova_normaliser(steps, self.momentum)  # a_i; = K under plain SGD
            return [
                ((x - p) / self.lr - steps * (c - ci)) / per_step
                for ci, c, x, p in zip(
                    self.client_control,
                    self.server_control,
                    self.start,
                    self.controlled_parameters(),
                )
            ]
        scale = 1.0 / (steps * self.lr)
        return [
            ci - c + (x - p) * scale
            for ci, c, x, p in zip(
                self.client_control, self.server_control, self.start, self.controlled_parameters()
            )
        ]

    @torch.no_grad()
    def after_training(self, config, result):
        new_control = self.new_control(result.steps)
        self.save_state(STATE, {f"c{j}": c.cpu().numpy() for j, c in enumerate(new_control)})
        return payload.pack(
            {
                protocol.indexed(CONTROL_DELTA, j): (new - old).cpu().numpy().astype(np.float32)
                for j, (new, old) in enumerate(zip(new_control, self.client_control))
            }
        )
