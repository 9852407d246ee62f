"""Attacks on what only one method reads, declared beside that method's payloads: its
client class's ``attacks``, a :class:`MethodAttack` by ``fault.kind``. The framework's
attacks (:mod:`fedimb.app.faults.attacks`) touch what every method's clients send; the
run's method adds its own (SCAFFOLD's control deltas, ReBaFL's and FedNH's prototypes,
the label counts Astraea and FedConcat plan with, the losses q-FFL, AFL and GRP-FED weigh
with). The crafts several methods share are here: :data:`LOSS_ATTACKS` and
:func:`label_count_attack`."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
from omegaconf import DictConfig, OmegaConf

from fedimb.app.configuration.components import import_class
from fedimb.app.configuration.keys import CONF_DIR
from fedimb.core import payload, protocol

FIT, PROPERTIES = "fit", "properties"
HUGE_LOSS = 1e40
HUGE_LABEL_COUNT = 1e15


@dataclass(frozen=True)
class MethodAttack:
    """An attack on what one method's clients report, declared by its client class
    (``attacks``). ``craft(values, num_examples, variant, scale)`` returns the crafted
    (values, num_examples) from the honest ones: the fit result's metrics (``on`` =
    ``fit``) or the properties answer (``properties``; its count is not used).
    ``variants``: its forms, the first the default."""

    on: str
    craft: Callable[[dict, int, str, float], tuple[dict, int]]
    variants: tuple[str, ...] = ("",)
    default_scale: float = 1.0


def method_attacks(cfg: DictConfig) -> Mapping[str, MethodAttack]:
    """The attacks the run's method declares (its client class's ``attacks``)."""
    return client_attacks(str(cfg.method.client._target_))


def client_attacks(target: str) -> Mapping[str, MethodAttack]:
    return getattr(import_class(target), "attacks", {})


def declaring_methods() -> dict[str, list[str]]:
    """Every method attack and the methods whose client declares it (from
    ``conf/method/``; a variant that names no client of its own is left out)."""
    found: dict[str, list[str]] = {}
    for path in sorted((CONF_DIR / "method").glob("*.yaml")):
        target = OmegaConf.select(OmegaConf.load(path), "client._target_")
        for kind in client_attacks(target) if target else ():
            found.setdefault(kind, []).append(path.stem)
    return found


def _losses(metrics: dict, value: Callable[[float], float]) -> dict:
    """``metrics`` with each loss a method weighs with replaced by ``value(loss)``."""
    keys = (protocol.TRAIN_LOSS, protocol.INITIAL_LOSS)
    return {**metrics, **{k: value(float(metrics[k])) for k in keys if k in metrics}}


def huge_losses(metrics: dict, num_examples: int, variant: str, scale: float):
    """``huge_loss``: every loss 1e40."""
    return _losses(metrics, lambda loss: HUGE_LOSS), num_examples


def scaled_losses(metrics: dict, num_examples: int, variant: str, scale: float):
    """``loss_skew``: every loss times ``scale`` (1.25 by default)."""
    return _losses(metrics, lambda loss: loss * scale), num_examples


#: the attacks of a method that weighs its clients by the losses they report
LOSS_ATTACKS = {
    "huge_loss": MethodAttack(FIT, huge_losses),
    "loss_skew": MethodAttack(FIT, scaled_losses, default_scale=1.25),
}


def label_count_attack(*names: str, variants: tuple[str, ...]) -> MethodAttack:
    """An attack on the label histograms ``names`` of the properties answer (a method
    that plans with them): one value more (``shape``), NaN, missing, or 1e15."""

    def craft(props: dict, num_examples: int, variant: str, scale: float):
        arrays = payload.unpack(props)
        present = [n for n in names if n in arrays]
        if variant == "missing":
            gone = {payload.PREFIX + n for n in present}
            return {k: v for k, v in props.items() if k not in gone}, num_examples
        crafted = {n: _crafted_counts(arrays[n], variant) for n in present}
        return {**props, **payload.pack(crafted)}, num_examples

    return MethodAttack(PROPERTIES, craft, variants=variants)


def replaced(metrics: dict, arrays: dict[str, np.ndarray]) -> dict:
    """``metrics`` with the named ``arrays`` packed in."""
    return {**metrics, **payload.pack(arrays)}


def _crafted_counts(counts: np.ndarray, variant: str) -> np.ndarray:
    if variant == "shape":
        return np.append(counts, counts[-1:])
    wrong = np.asarray(counts, dtype=np.float64).copy()
    wrong[0] = np.nan if variant == "nan" else HUGE_LABEL_COUNT
    return wrong
