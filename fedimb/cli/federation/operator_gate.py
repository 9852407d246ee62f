"""Who may use a SuperLink's APIs: SuperNodes reach the Fleet API from anywhere, every
other API answers the operator's addresses only.

Flower 1.41 serves the Fleet, Control and Runtime APIs on one HTTP port and
authenticates none of the last two: whoever reaches that port, holding nothing but
``ca.crt``, can register a SuperNode key of their own, submit, read and stop runs. This
ASGI gate sits in front of Flower's app (:mod:`fedimb.cli.federation.superlink`) and answers
``403`` to any request outside the Fleet API and the health check whose peer is not
one of the operator's networks. The peer is the TCP connection's address, as uvicorn
reports it; uvicorn rewrites it from ``X-Forwarded-For`` only for a proxy on 127.0.0.1.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
ASGIApp = Callable[[Scope, Callable, Callable], Awaitable[None]]

# paths a SuperNode needs: Flower's Fleet API and the health check
OPEN_PATHS = ("/v1/fleet/", "/health")
LOOPBACK = ("127.0.0.0/8", "::1/128")

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def operator_networks(addresses: Iterable[str]) -> tuple[Network, ...]:
    """Networks from addresses or CIDRs (``192.168.1.5``, ``10.0.0.0/24``); a bad one
    is a ValueError that names it."""
    networks = []
    for address in addresses:
        try:
            networks.append(ipaddress.ip_network(address.strip(), strict=False))
        except ValueError:
            raise ValueError(f"--operator {address!r} is no IP address or network") from None
    return tuple(networks)


def is_open(path: str) -> bool:
    return any(path == p.rstrip("/") or path.startswith(p) for p in OPEN_PATHS)


class OperatorGate:
    """ASGI middleware: requests outside :data:`OPEN_PATHS` from a peer outside
    ``networks`` get ``403``; everything else (and every lifespan event) passes."""

    def __init__(self, app: ASGIApp, networks: Iterable[Network]):
        self.app = app
        self.networks = tuple(networks)

    def is_operator(self, client: Any) -> bool:
        try:
            peer = ipaddress.ip_address(str(client[0]).split("%")[0])
        except (TypeError, IndexError, ValueError):
            return False
        if isinstance(peer, ipaddress.IPv6Address) and peer.ipv4_mapped is not None:
            peer = peer.ipv4_mapped
        return any(peer in network for network in self.networks)

    async def __call__(self, scope: Scope, receive: Callable, send: Callable) -> None:
        if (
            scope["type"] == "http"
            and not is_open(scope.get("path", ""))
            and not self.is_operator(scope.get("client"))
        ):
            await refuse(send)
            return
        await self.app(scope, receive, send)


async def refuse(send: Callable) -> None:
    body = b"this SuperLink answers its Control and Runtime APIs to the operator only\n"
    await send(
        {
            "type": "http.response.start",
            "status": 403,
            "headers": [
                (b"content-type", b"text/plain; charset=utf-8"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
