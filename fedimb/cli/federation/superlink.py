"""``fedimb superlink``: Flower's SuperLink that admits the SuperNodes the operator
lists and answers its Control and Runtime APIs to the operator only.

It runs ``flower-superlink`` in this process with two additions, both made to Flower's
app before it serves a request:

- ``--supernode-keys FILE.pub ...`` registers exactly these public keys (OpenSSH format,
  as ``fedimb certs`` writes them) and turns on ``--enable-supernode-auth``: a node
  whose key is not listed is refused, and the keys are in place before any node connects.
- :class:`fedimb.cli.federation.operator_gate.OperatorGate` answers ``403`` to requests outside the
  Fleet API from peers outside ``--operator`` (default: loopback) and the address the
  SuperLink is bound to (its own ServerApp process connects there). So no key can be
  registered, and no run submitted, read or stopped, from another machine unless the
  operator named it.

Every other option is ``flower-superlink``'s (``flower-superlink --help``).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fedimb.cli.federation.operator_gate import LOOPBACK, OperatorGate, operator_networks


def read_public_key(path: Path) -> bytes:
    """A SuperNode's public key as Flower registers it; a file that is missing or holds
    no NIST elliptic-curve key in OpenSSH format is a ValueError naming it."""
    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from flwr.supercore.primitives.asymmetric import public_key_to_bytes, uses_nist_ec_curve

    try:
        key = serialization.load_ssh_public_key(path.read_bytes())
    except (OSError, ValueError, UnsupportedAlgorithm) as error:
        raise ValueError(f"{path}: no OpenSSH public key ({error})") from None
    if not (isinstance(key, ec.EllipticCurvePublicKey) and uses_nist_ec_curve(key)):
        raise ValueError(f"{path}: not a NIST elliptic-curve key (fedimb certs makes them)")
    return bytes(public_key_to_bytes(key))


def register_keys(app: Any, keys: dict[Path, bytes]) -> None:
    """Register ``keys`` in the SuperLink's state through Flower's own Control handler,
    as ``flwr supernode register`` would; a key already registered stays as it is."""
    from flwr.proto.control_pb2 import RegisterNodeRequest  # type: ignore[attr-defined]
    from flwr.superlink.servicer.control import control_handlers

    state = app.state.linkstate_factory.state()
    _, account = app.state.account_access_dep.authn_plugin.validate_tokens_in_metadata([])
    for path, key in keys.items():
        if state.get_node_id_by_public_key(key) is None:
            response = control_handlers.register_node(
                RegisterNodeRequest(public_key=key), account, state
            )
            print(f"[fedimb] registered {path.name} (node {response.node_id})", flush=True)


def bound_host(flower_args: Sequence[str]) -> str | None:
    """The ``--host`` among ``flower-superlink``'s arguments, unless it binds them all."""
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--host")
    host = parser.parse_known_args(list(flower_args))[0].host
    return None if host in (None, "0.0.0.0", "::", "[::]") else host.strip("[]")


def parse(argv: Sequence[str]) -> tuple[argparse.Namespace, list[str]]:
    parser = argparse.ArgumentParser(
        prog="fedimb superlink",
        description="flower-superlink that admits only the listed SuperNode keys and "
        "answers its Control and Runtime APIs to the operator's addresses only",
        epilog="Every other option is passed to flower-superlink (flower-superlink --help).",
    )
    parser.add_argument(
        "--operator",
        action="append",
        default=[],
        metavar="ADDRESS[/BITS]",
        help="address or network that may use the Control and Runtime APIs (repeatable; "
        "loopback and the bound --host always may)",
    )
    parser.add_argument(
        "--supernode-keys",
        nargs="+",
        type=Path,
        default=[],
        metavar="FILE.pub",
        help="the SuperNode public keys to admit (turns on --enable-supernode-auth)",
    )
    ours, flower_args = parser.parse_known_args(list(argv))
    host = bound_host(flower_args)
    try:
        ours.networks = operator_networks([*LOOPBACK, *([host] if host else []), *ours.operator])
        ours.keys = {path: read_public_key(path) for path in ours.supernode_keys}
    except ValueError as error:
        parser.error(str(error))
    if ours.keys and "--enable-supernode-auth" not in flower_args:
        flower_args.append("--enable-supernode-auth")
    return ours, flower_args


def superlink_main(argv: Sequence[str]) -> int:
    """Run Flower's SuperLink in this process, its app gated and its keys registered."""
    import flwr.superlink.main as flower_app
    from flwr.superlink.cli.flower_superlink import flower_superlink

    ours, flower_args = parse(argv)
    create_app = flower_app.create_app

    def gated_app(*args: Any, **kwargs: Any) -> Any:
        app = create_app(*args, **kwargs)
        register_keys(app, ours.keys)
        app.add_middleware(OperatorGate, networks=ours.networks)
        return app

    flower_app.create_app = gated_app
    sys.argv = ["flower-superlink", *flower_args]
    flower_superlink()
    return 0
