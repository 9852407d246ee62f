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

Three attacks of the Byzantine-robustness literature answer with honest-looking values:
``label_flip`` trains honestly on flipped labels (the client wrapper
:class:`~fedimb.app.faults.clients.LabelFlippingClient`); ``alie`` and ``ipm`` send models
crafted from the round's honest updates, made on the server by omniscient attackers
(:mod:`fedimb.app.faults.omniscient`; ``fault.scale``: ALIE's z, IPM's ε).
"""

from __future__ import annotations

import numpy as np
from omegaconf import DictConfig

from fedimb.core import events, payload, protocol
from fedimb.core.errors import ConfigError

#: attacks on the fit result (weights, number of examples, metrics)
FIT_KINDS = (
    "dtype_int64",
    "dtype_float16",
    "dtype_complex",
    "huge_num_examples",
    "huge_weights",
    "huge_loss",
    "latent_length",
    "prototype_mismatch",
    "prototype_count",
    "prototype_flip",
    "scaffold_huge",
    "forged_event",
    "forged_print",
    "loss_skew",
    "sign_flip",
)
#: attacks on the answer to the server's properties query
PROPERTIES_KINDS = ("astraea_counts", "fedconcat_counts", "claim_partition")
#: attacks on the training data: the client trains honestly on poisoned labels
DATA_KINDS = ("label_flip",)
#: attacks the server makes for the attackers from the round's honest updates
OMNISCIENT_KINDS = ("alie", "ipm")
KINDS = FIT_KINDS + PROPERTIES_KINDS + DATA_KINDS + OMNISCIENT_KINDS

#: the forms of the attacks that have several; the first is the default
VARIANTS = {
    "prototype_mismatch": ("classes", "2d"),  # one class more than vectors / a 2-D class array
    "scaffold_huge": ("delta", "n"),  # control deltas of 3e38 / num_examples 10**12
    "astraea_counts": ("shape", "nan", "missing", "huge"),
    "fedconcat_counts": ("shape", "missing"),
}
#: ``fault.scale`` when left null
DEFAULT_SCALE = {"sign_flip": 10.0, "loss_skew": 1.25, "ipm": 0.1}  # alie: z_max of the round
#: the methods an attack makes sense for (absent: every method)
METHODS = {
    "huge_loss": ("qffl", "afl", "grpfed", "grpfed_tuned"),
    "loss_skew": ("qffl", "afl", "grpfed", "grpfed_tuned"),
    "prototype_mismatch": ("rebafl",),
    "prototype_count": ("rebafl",),
    "prototype_flip": ("fednh",),
    "scaffold_huge": ("scaffold",),
    "astraea_counts": ("astraea", "astraea_aug", "astraea_sched"),
    "fedconcat_counts": ("fedconcat",),
}

HUGE_FLOAT = 3e38  # finite in float32 (its maximum is 3.4e38)
HUGE_COUNT = 10**12
HUGE_LOSS = 1e40
HUGE_CLASS_COUNT = 1e300
HUGE_LABEL_COUNT = 1e15
#: what the forged events claim
FORGED_ACCURACY = 0.999
FORGED_ARTIFACT = "partition"


def _floating(array: np.ndarray) -> bool:
    return np.issubdtype(array.dtype, np.floating)


def _payload_names(metrics: dict, suffix: str) -> list[str]:
    return sorted(name for name in payload.unpack(metrics) if name.endswith(suffix))


def _replace(metrics: dict, arrays: dict[str, np.ndarray]) -> dict:
    return {**metrics, **payload.pack(arrays)}


def crafted_fit(
    kind: str,
    variant: str,
    scale: float,
    received: list[np.ndarray],
    weights: list[np.ndarray],
    num_examples: int,
    metrics: dict,
) -> tuple[list[np.ndarray], int, dict]:
    """The attacker's fit result, made from its honest one (``received``: the global model)."""
    weights = [np.asarray(w) for w in weights]
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
    if kind in ("huge_loss", "loss_skew"):
        losses = {
            k: (HUGE_LOSS if kind == "huge_loss" else float(metrics[k]) * scale)
            for k in (protocol.TRAIN_LOSS, protocol.INITIAL_LOSS)
            if k in metrics
        }
        return weights, num_examples, {**metrics, **losses}
    if kind == "latent_length":
        return weights, num_examples, _crafted_latent(metrics)
    if kind == "prototype_mismatch":
        return weights, num_examples, _mismatched_prototypes(metrics, variant)
    if kind == "prototype_count":
        counts = {
            name: np.full(payload.unpack(metrics)[name].shape, HUGE_CLASS_COUNT)
            for name in _payload_names(metrics, "_counts")
        }
        return weights, num_examples, _replace(metrics, counts)
    if kind == "scaffold_huge":
        if variant == "n":
            return weights, HUGE_COUNT, metrics
        prefix = protocol.CONTROL_DELTA.split("<j>")[0]
        deltas = {
            name: np.full_like(array, HUGE_FLOAT)
            for name, array in payload.unpack(metrics).items()
            if name.startswith(prefix)
        }
        return weights, num_examples, _replace(metrics, deltas)
    if kind == "prototype_flip":  # FedNH's class means, sign-flipped: every bound still holds
        arrays = payload.unpack(metrics)
        flipped = {name: -arrays[name] for name in _payload_names(metrics, "_means")}
        return weights, num_examples, _replace(metrics, flipped)
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
    return _replace(metrics, {protocol.LATENT_MEAN: np.append(latent, latent[-1:])})


def _mismatched_prototypes(metrics: dict, variant: str) -> dict:
    """Prototype class arrays that do not match their vectors: one class more, or 2-D."""
    arrays = payload.unpack(metrics)
    crafted = {}
    for name in _payload_names(metrics, "_classes"):
        classes = arrays[name]
        crafted[name] = (
            np.arange(len(classes) + 1, dtype=classes.dtype)
            if variant == "classes"
            else np.stack([classes, classes])
        )
    return _replace(metrics, crafted)


def crafted_properties(kind: str, variant: str, claim, props: dict) -> dict:
    """The attacker's properties answer, made from its honest one."""
    if kind == "claim_partition":
        props = {k: v for k, v in props.items() if k != protocol.PARTITION_ID}
        return props if claim is None else {**props, protocol.PARTITION_ID: int(claim)}
    names = [protocol.LABEL_COUNTS] + (
        [protocol.LABEL_DISTRIBUTION] if kind == "fedconcat_counts" else []
    )
    arrays = payload.unpack(props)
    present = [n for n in names if n in arrays]
    if variant == "missing":
        return {k: v for k, v in props.items() if k not in {payload.PREFIX + n for n in present}}
    crafted = {n: _crafted_counts(arrays[n], variant) for n in present}
    return {**props, **payload.pack(crafted)}


def _crafted_counts(counts: np.ndarray, variant: str) -> np.ndarray:
    if variant == "shape":
        return np.append(counts, counts[-1:])
    wrong = np.asarray(counts, dtype=np.float64).copy()
    wrong[0] = np.nan if variant == "nan" else HUGE_LABEL_COUNT
    return wrong


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


def settings(fault: DictConfig) -> tuple[str, float, object]:
    """(variant, scale, claim) of an attack, defaults filled in."""
    kind = str(fault.kind)
    variant = fault.get("variant") or VARIANTS.get(kind, ("",))[0]
    scale = fault.get("scale")
    claim = fault.get("claim")
    return (
        str(variant),
        float(DEFAULT_SCALE.get(kind, 1.0) if scale is None else scale),
        None if claim in (None, "none") else claim,
    )


def check(
    fault: DictConfig,
    method: str | None = None,
    normalize: str | None = None,
    num_clients: int | None = None,
) -> None:
    """One-line errors for an attack that has no such form, or that the run's method (or
    its ``num_clients``) never gives the chance to make."""
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
    if variant is not None and str(variant) not in VARIANTS.get(kind, ()):
        forms = ", ".join(VARIANTS.get(kind, ())) or "none (leave it null)"
        raise ConfigError(
            f"fault.variant of fault.kind={kind} must be one of {forms}, got {variant!r}"
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
    if method is not None and kind in METHODS and method not in METHODS[kind]:
        raise ConfigError(
            f"fault.kind={kind} needs method {' or '.join(METHODS[kind])}, got {method!r}"
        )
    if kind == "latent_length" and normalize is not None and normalize != "latent_cosine":
        raise ConfigError(
            f"fault.kind=latent_length needs normalize=latent_cosine, got {normalize!r}"
        )
