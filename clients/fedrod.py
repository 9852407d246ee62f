"""FedRoD client (Chen & Chao, "On Bridging Generic and Personalized Federated Learning
for Image Classification", ICLR 2022, §4; the linear-head variant).

The model is a shared body f(·; θ) with two heads on its features z = f(x):

- the generic head (G-head) h^G(z; ψ), trained with θ on the balanced risk L^BR: the
  balanced softmax (Ren et al., 2020) with this client's class counts n_c,
  −log( n_y·e^{g_y} / Σ_c n_c·e^{g_c} ), g = h^G(z) (§4). θ and ψ are what the
  client sends; the server averages them (FedAvg's server).
- the personal head (P-head) h^P(z; φ_m), a linear layer that never leaves the client
  (its client state), trained on the empirical risk of the combined logits,
  L^ER = CE(h^G(z) + h^P(z), y) (§4): the personal model predicts with g + p.

Per mini-batch one forward pass gives z and g; θ, ψ take a step on L^BR and φ a step on
L^ER with z and g fixed (detached), so L^ER moves only φ and the body learns only from the
balanced risk (the two gradients are taken at the same point), as the PFLlib
reimplementation does too (the authors' repository holds no code; FL-bench instead sums
L^BR with a cross-entropy of p alone, whose gradient reaches the body). The P-head uses
the run's optimiser and learning rate; its optimiser state is not kept between rounds.

Where the paper leaves a choice open, the reimplementations' convention (PFLlib, FL-bench):
the P-head starts as a copy of the run's initial G-head (setting ``personal_head_init``:
``initial_generic_head``; ``zeros`` starts the personal model as the generic one), and
classes a client does not hold get no probability in L^BR (log n_c = −∞).
The hypernetwork variant (a hypernetwork producing the P-head from the class counts,
FedRoD (hyper)) is not implemented.
"""

from __future__ import annotations

import dataclasses

import torch
from torch import nn

from clients.base import BaseClient, PersonalEvaluation
from clients.base_settings import setting
from fedimb.core.errors import one_of
from fedimb.core.losses import relaxed_balanced_softmax_loss
from fedimb.core.training import TrainConfig, make_optimizer

#: the P-head's weight and bias in its client state
STATE = "fedrod_personal_head"
WEIGHT, BIAS = "weight", "bias"
#: how the P-head starts (setting ``personal_head_init``)
INITIAL_GENERIC_HEAD, ZEROS = "initial_generic_head", "zeros"


def balanced_risk_loss(generic_logits: torch.Tensor, y: torch.Tensor, class_counts) -> torch.Tensor:
    """L^BR: the balanced softmax with the client's class counts (the relaxed one at eps 0)."""
    return relaxed_balanced_softmax_loss(generic_logits, y, class_counts, eps=0.0)


def personal_risk_loss(
    generic_logits: torch.Tensor, personal_logits: torch.Tensor, y: torch.Tensor
) -> torch.Tensor:
    """L^ER: cross-entropy of the combined logits g + p; g is held fixed."""
    return nn.functional.cross_entropy(generic_logits.detach() + personal_logits, y)


class PersonalizedModel(nn.Module):
    """Body + both heads: the logits h^G(z) + h^P(z) the personal model predicts with."""

    def __init__(self, encoder: nn.Module, generic_head: nn.Module, personal_head: nn.Module):
        super().__init__()
        self.encoder, self.head, self.personal_head = encoder, generic_head, personal_head

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        z = self.encoder(x)
        return self.head(z) + self.personal_head(z)


class FedRoDClient(PersonalEvaluation, BaseClient):
    """Balanced-risk body and G-head; a private P-head on the empirical risk."""

    @dataclasses.dataclass(frozen=True)
    class Settings:
        personal_head_init: str = setting(one_of(INITIAL_GENERIC_HEAD, ZEROS))

    def personal_head(self, config) -> nn.Linear:
        """h^P from its client state; before the client's first round as
        ``personal_head_init`` says."""
        head = nn.Linear(self.model.feature_dim, self.model.num_classes).to(self.device)
        stored = self.load_state(STATE)
        with torch.no_grad():
            if stored is not None:
                head.weight.copy_(torch.as_tensor(stored[WEIGHT]))
                head.bias.copy_(torch.as_tensor(stored[BIAS]))
            elif self.settings_of(config).personal_head_init == INITIAL_GENERIC_HEAD:
                head.load_state_dict(self.fresh_model().head.state_dict())
            else:
                head.weight.zero_()
                head.bias.zero_()
        return head

    def before_training(self, config):
        self.p_head = self.personal_head(config)
        self.p_optimizer = make_optimizer(
            self.p_head.parameters(), TrainConfig.from_mapping(config)
        )
        self.class_counts = self.data.label_counts
        self._batch = None

    def loss(self, x, y):
        z = self.model.encoder(x)
        generic_logits = self.model.head(z)
        self._batch = (z.detach(), generic_logits.detach(), y)
        return balanced_risk_loss(generic_logits, y, self.class_counts)

    def after_step(self):
        z, generic_logits, y = self._batch
        self.p_optimizer.zero_grad(set_to_none=True)
        personal_risk_loss(generic_logits, self.p_head(z), y).backward()
        self.p_optimizer.step()

    def after_training(self, config, result):
        self.save_state(
            STATE,
            {
                WEIGHT: self.p_head.weight.detach().cpu().numpy(),
                BIAS: self.p_head.bias.detach().cpu().numpy(),
            },
        )
        return {}

    def personal_model(self, parameters, config):
        self.set_parameters(parameters)
        return PersonalizedModel(self.model.encoder, self.model.head, self.personal_head(config))
