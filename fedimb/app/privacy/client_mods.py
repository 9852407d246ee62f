"""The clients' half of client-side DP (``privacy=dp_client_fixed|dp_client_adaptive``):
Flower's own client mods, ``fixedclipping_mod`` and ``adaptiveclipping_mod``, which clip
the update a client returns to the norm its fit instruction names (and report whether
they clipped, adaptive).

The ClientApp (simulation, deployment) has one mod, :func:`privacy_mod`, which applies the
run's mod where its configuration asks for one and otherwise only passes the message on.
The in-process runtime has no messages: :func:`fit_through_mod` wraps a fit instruction
in a Flower message, lets the same mod handle it around the client's ``fit`` and unwraps
the reply, so every runtime clips with the same code."""

from __future__ import annotations

import time
from collections.abc import Callable

from flwr.app import Context, Message, MessageType, Metadata
from flwr.client.mod import adaptiveclipping_mod, fixedclipping_mod
from flwr.common import FitIns, FitRes
from flwr.compat.common import recorddict_compat as compat
from flwr.supercore.differential_privacy import KEY_NORM_BIT
from omegaconf import DictConfig

from fedimb.app.configuration import transport
from fedimb.app.privacy import (
    dp as privacy,  #: a Flower client mod: (message, context, the next handler) -> reply
)

Mod = Callable[[Message, Context, Callable[[Message, Context], Message]], Message]
#: the mod of each client-side variant
MODS: dict[str, Mod] = {
    "dp_client_fixed": fixedclipping_mod,
    "dp_client_adaptive": adaptiveclipping_mod,
}


def client_mod(cfg: DictConfig) -> Mod | None:
    """Flower's mod for the run's ``privacy`` option, or None where its clients clip nothing."""
    return MODS.get(privacy.privacy_name(cfg))


def privacy_mod(msg: Message, ctxt: Context, call_next) -> Message:
    """The ClientApp's mod: the run's clipping mod, if it has one (its configuration is
    decoded once per process, as the ClientApp's ``client_fn`` decodes it)."""
    mod = client_mod(transport.from_run_config(ctxt.run_config, check=False))
    return call_next(msg, ctxt) if mod is None else clipped(mod, msg, ctxt, call_next)


def clipped(mod: Mod, msg: Message, ctxt: Context, call_next) -> Message:
    """``mod`` around ``call_next``; where the client returns the very model it was sent,
    its reply as it is (nothing to clip: Flower's mods divide by the update's norm, zero
    here), with the adaptive mod's bit saying it was not clipped."""
    replies: list[Message] = []

    def remembered(message: Message, context: Context) -> Message:
        replies.append(call_next(message, context))
        return replies[-1]

    try:
        return mod(msg, ctxt, remembered)
    except ZeroDivisionError:
        if not replies:  # the client's own error
            raise
    reply = replies[-1]
    res = compat.recorddict_to_fitres(reply.content, keep_input=True)
    if mod is adaptiveclipping_mod:
        res.metrics[KEY_NORM_BIT] = False
    reply.content = compat.fitres_to_recorddict(res, keep_input=True)
    return reply


def _train_message(ins: FitIns) -> Message:
    """``ins`` as the train message a SuperNode would hand its ClientApp (built from its
    metadata, as Flower builds received messages: the public constructor needs the
    identity of a running SuperNode, which this process is not)."""
    metadata = Metadata(
        run_id=0,
        message_id="",
        src_node_id=0,
        dst_node_id=0,
        reply_to_message_id="",
        group_id="",
        created_at=time.time(),
        ttl=3600.0,
        message_type=MessageType.TRAIN,
    )
    content = compat.fitins_to_recorddict(ins, keep_input=True)
    return Message(content, metadata=metadata)  # type: ignore[call-overload]


def fit_through_mod(mod: Mod | None, fit: Callable[[FitIns], FitRes], ins: FitIns, ctxt: Context):
    """``fit(ins)``, through ``mod`` where there is one (the in-process runtime)."""
    if mod is None:
        return fit(ins)

    def call_next(message: Message, _: Context) -> Message:
        res = fit(compat.recorddict_to_fitins(message.content, keep_input=True))
        return Message(compat.fitres_to_recorddict(res, keep_input=True), reply_to=message)

    reply = clipped(mod, _train_message(ins), ctxt, call_next)
    return compat.recorddict_to_fitres(reply.content, keep_input=True)
