"""Crafted-client attacks, for the attack matrix (``benchmarks/attacks.py``) and its tests.

The same switch as the deliberate faults (:mod:`fedimb.app.faults.injection`): ``fault.kind`` names
the attack, ``fault.clients`` the attackers, ``fault.rounds`` the rounds of the fit
attacks (every round when empty). Unlike a fault, an attack answers with values that
decode but are wrong: the attacker's fit result, or its properties answer (identity and
label counts, asked when a node joins where nodes claim their clients, when a method
reads them where the server assigns them, and in a method's plan queries, whatever the
round).
``fault.variant`` picks one form of an attack with several, ``fault.scale`` the factor of
``sign_flip`` and ``loss_skew``, ``fault.claim`` the partition id ``claim_partition``
reports (``none``: no id at all). Each function below is pure, so a test checks the
crafted value without a run.

The attacks here touch what every method's clients send. An attack on what only one
method reads is declared beside that method's payloads: its client class's ``attacks``,
a :class:`~fedimb.app.faults.method_attacks.MethodAttack` by kind
(:mod:`fedimb.app.faults.method_attacks`).

Three attacks of the Byzantine-robustness literature answer with honest-looking values:
``label_flip`` trains honestly on flipped labels (the client wrapper
:class:`~fedimb.app.faults.clients.LabelFlippingClient`); ``alie`` and ``ipm`` send models
crafted from the round's honest updates, made on the server by omniscient attackers
(:mod:`fedimb.app.faults.omniscient`; ``fault.scale``: ALIE's z, IPM's ε).
"""

from __future__ import annotations

import numpy as np
from omegaconf import DictConfig

from fedimb.app.faults.method_attacks import MethodAttack, replaced
from fedimb.core import events, payload, protocol
from fedimb.core.errors import ConfigError

#: attacks on the fit result (weights, number of examples, metrics) of any method
FIT_KINDS = (
    "dtype_int64",
    "dtype_float16",
    "dtype_complex",
    "huge_num_examples",
    "huge_weights",
    "latent_length",
    "forged_event",
    "forged_print",
    "sign_flip",
)
#: attacks on the answer to the server's properties query of any method
PROPERTIES_KINDS = ("claim_partition",)
#: attacks on the training data: the client trains honestly on poisoned labels
DATA_KINDS = ("label_flip",)
#: attacks the server makes for the attackers from the round's honest updates
OMNISCIENT_KINDS = ("alie", "ipm")
KINDS = FIT_KINDS + PROPERTIES_KINDS + DATA_KINDS + OMNISCIENT_KINDS

#: ``fault.scale`` when left null
DEFAULT_SCALE = {"sign_flip": 10.0, "ipm": 0.1}  # alie: z_max of the round


HUGE_FLOAT = 3e38  # finite in float32 (its maximum is 3.4e38)
HUGE_COUNT = 10**12
#: what the forged events claim
FORGED_ACCURACY = 0.999
FORGED_ARTIFACT = "partition"


def _floating(array: np.ndarray) -> bool:
    return np.issubdtype(array.dtype, np.floating)


def crafted_fit(
    kind: str,
    variant: str,
    scale: float,
    received: list[np.ndarray],
    weights: list[np.ndarray],
    num_examples: int,
    metrics: dict,
    attack: MethodAttack | None = None,
) -> tuple[list[np.ndarray], int, dict]:
    """The attacker's fit result, made from its honest one (``received``: the global
    model); ``attack``: the method's own attack of that kind, where it is one."""
    weights = [np.asarray(w) for w in weights]
    if attack is not None:
        metrics, num_examples = attack.craft(metrics, num_examples, variant, scale)
        return weights, num_examples, metrics
    if kind == "dtype_int64":
        return [w.astype(np.int64) for w in weights], 1, metrics
    if kind in ("dtype_float16", "dtype_complex"):
        dtype = np.float16 if kind == "dtype_float16" else np.complex64
        return [w.astype(dtype) if _floating(w) else w for w in weights], num_examples, metrics
    if kind == "huge_num_examples":
        return weights, HUGE_COUNT, metrics
    if kind == "huge_weights":
        return (
            [np.full_like(w, HUGE_FLOAT) if _floating(w) else w for w in weights],
            num_examples,
            metrics,
        )
    if kind == "latent_length":
        return weights, num_examples, _crafted_latent(metrics)
    if kind == "sign_flip":
        return sign_flipped(received, weights, scale), num_examples, metrics
    raise ValueError(f"not a fit attack: {kind!r}")


def sign_flipped(
    received: list[np.ndarray], weights: list[np.ndarray], scale: float
) -> list[np.ndarray]:
    """A Byzantine update: w_global − scale · (w_client − w_global), per float array."""
    return [
        (g - scale * (w - g)).astype(w.dtype) if _floating(w) else w
        for g, w in zip(received, weights)
    ]


def _crafted_latent(metrics: dict) -> dict:
    """The mean latent one value longer than the model's (when the round asks for it)."""
    latent = payload.unpack(metrics).get(protocol.LATENT_MEAN)
    if latent is None:
        return metrics
    return replaced(metrics, {protocol.LATENT_MEAN: np.append(latent, latent[-1:])})


def crafted_properties(
    kind: str, variant: str, claim, props: dict, attack: MethodAttack | None = None
) -> dict:
    """The attacker's properties answer, made from its honest one; ``attack``: the
    method's own attack of that kind, where it is one."""
    if attack is not None:
        return attack.craft(props, 0, variant, 1.0)[0]
    if kind == "claim_partition":
        props = {k: v for k, v in props.items() if k != protocol.PARTITION_ID}
        return props if claim is None else {**props, protocol.PARTITION_ID: int(claim)}
    raise ValueError(f"not a properties attack: {kind!r}")


def forged_message(pid: int, server_round: int) -> str:
    """An exception message that carries event lines: a round event with a test accuracy
    of 0.999 and an artifact that would overwrite the run folder's partition.json."""
    forged_round = events.format_event(
        "round",
        round=server_round,
        test={"accuracy": FORGED_ACCURACY},
        clients={"succeeded": 3, "errors": 0, "rejected": 0},
    )
    forged_artifact = events.format_event("artifact", name=FORGED_ARTIFACT, data={"forged": True})
    return f"client {pid} fails\n{forged_round}\n{forged_artifact}\n"


def forged_output(pid: int, server_round: int) -> list[str]:
    """What ``forged_print`` prints and logs before it raises: the forged event lines,
    whole and after a carriage return (a reader that splits at ``\\r`` sees a line start)."""
    lines = forged_message(pid, server_round).splitlines()[1:]  # its two event lines
    return lines + [f"client {pid} at 50%\r{line}" for line in lines]


def settings(fault: DictConfig, attack: MethodAttack | None) -> tuple[str, float, object]:
    """(variant, scale, claim) of an attack (``attack``: the method's own, where it is
    one), defaults filled in."""
    kind = str(fault.kind)
    forms = attack.variants if attack is not None else ("",)
    default = attack.default_scale if attack is not None else DEFAULT_SCALE.get(kind, 1.0)
    scale = fault.get("scale")
    claim = fault.get("claim")
    return (
        str(fault.get("variant") or forms[0]),
        float(default if scale is None else scale),
        None if claim in (None, "none") else claim,
    )


def check(
    fault: DictConfig,
    attack: MethodAttack | None,
    normalize: str | None = None,
    num_clients: int | None = None,
) -> None:
    """One-line errors for an attack (``attack``: the method's own, where it is one) that
    has no such form, or that the run (its ``normalize``, its ``num_clients``) never
    gives the chance to make."""
    kind = str(fault.kind)
    clients = set(fault.get("clients") or [])
    if kind in DATA_KINDS and (fault.get("rounds") or fault.get("scale") is not None):
        raise ConfigError(
            f"fault.kind={kind} poisons the attackers' labels in every round and has no "
            "factor: leave fault.rounds empty and fault.scale null"
        )
    if kind == "alie" and fault.get("scale") is None and num_clients is not None:
        f = len({c for c in clients if c < num_clients})
        if f >= num_clients // 2 + 1:
            raise ConfigError(
                f"fault.kind=alie: z_max needs the attackers a minority, got {f} of "
                f"{num_clients} clients; set fault.scale (z) or name fewer fault.clients"
            )
    variant = fault.get("variant")
    forms = tuple(v for v in (attack.variants if attack is not None else ()) if v)
    if variant is not None and str(variant) not in forms:
        raise ConfigError(
            f"fault.variant of fault.kind={kind} must be one of "
            f"{', '.join(forms) or 'none (leave it null)'}, got {variant!r}"
        )
    scale = fault.get("scale")
    if scale is not None and not (
        isinstance(scale, (int, float))
        and not isinstance(scale, bool)
        and np.isfinite(scale)
        and scale > 0
    ):
        raise ConfigError(f"fault.scale must be a finite number > 0, got {scale!r}")
    claim = fault.get("claim")
    if kind == "claim_partition" and not (
        claim == "none" or (isinstance(claim, int) and not isinstance(claim, bool))
    ):
        raise ConfigError(
            f"fault.kind=claim_partition needs fault.claim: a partition id or none, got {claim!r}"
        )
    if kind == "latent_length" and normalize is not None and normalize != "latent_cosine":
        raise ConfigError(
            f"fault.kind=latent_length needs normalize=latent_cosine, got {normalize!r}"
        )
