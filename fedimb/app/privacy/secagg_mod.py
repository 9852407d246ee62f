"""The clients' half of ``secagg=secaggplus``: Flower's own ``secaggplus_mod``, which answers
the SecAgg+ stages (keys, shares, the masked model, unmasking) and trains the client only in
the stage that collects the masked vectors.

The mod rounds every value stochastically with numpy's global generator. Here that
generator is seeded for the rounding by the run's seed, the round and the client, and put
back afterwards, so that a seeded run repeats and the client's own code sees the generator
as it left it."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from flwr.app import Context, Message, MessageType
from flwr.client.mod import secaggplus_mod
from flwr.compat.common import recorddict_compat as compat

from fedimb.app.configuration import transport
from fedimb.app.privacy import secagg
from fedimb.core import protocol

Next = Callable[[Message, Context], Message]


def secagg_mod(msg: Message, ctxt: Context, call_next: Next) -> Message:
    """The ClientApp's mod: ``secaggplus_mod`` where the run asks for SecAgg+, else the
    message passed on (its configuration is decoded as the ClientApp's ``client_fn`` does)."""
    cfg = transport.from_run_config(ctxt.run_config, check=False)
    return seeded_secaggplus(msg, ctxt, call_next) if secagg.enabled(cfg) else call_next(msg, ctxt)


def rounding_seed(config: dict, ctxt: Context) -> int:
    """The seed of one client's rounding in one round: the run's seed, the round and the
    client (the one the server assigned, else the node's partition, else the node)."""
    client = config.get(protocol.ASSIGNED_PARTITION, ctxt.node_config.get("partition-id"))
    client = ctxt.node_id if client is None else client
    words = [int(config[protocol.SEED]), int(config[protocol.SERVER_ROUND])]
    sequence = np.random.SeedSequence([*words, int(client) % 2**63, 0x5EC])
    return int(sequence.generate_state(1)[0])


def seeded_secaggplus(msg: Message, ctxt: Context, call_next: Next) -> Message:
    """``secaggplus_mod`` around ``call_next``, its rounding seeded (:func:`rounding_seed`);
    a message other than a fit instruction passes as the mod passes it."""
    if msg.metadata.message_type != MessageType.TRAIN:
        return call_next(msg, ctxt)
    saved: list = []

    def trained(message: Message, context: Context) -> Message:
        reply = call_next(message, context)
        config = compat.recorddict_to_fitins(message.content, keep_input=True).config
        saved.append(np.random.get_state())
        np.random.seed(rounding_seed(dict(config), context))
        return reply

    try:
        return secaggplus_mod(msg, ctxt, trained)
    finally:
        if saved:
            np.random.set_state(saved[0])
