"""``fedimb superlink``: SuperNodes reach the Fleet API from anywhere; the Control and
Runtime APIs answer the operator's addresses only; the keys it admits are read strictly."""

from __future__ import annotations

import pytest
from cryptography.hazmat.primitives.asymmetric.rsa import generate_private_key
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from fastapi import FastAPI
from fastapi.testclient import TestClient

from fedimb.cli.federation.operator_gate import LOOPBACK, OperatorGate, operator_networks
from fedimb.cli.federation.security import make_node_keys
from fedimb.cli.federation.superlink import bound_host, parse, read_public_key

PATHS = [
    "/v1/control/register-node",
    "/v1/control/start-run",
    "/v1/runtime/pull-messages",
    "/v1/fleet/activate-node",
    "/health",
]


def gated_app(*operators: str) -> FastAPI:
    app = FastAPI()

    @app.post("/{path:path}")
    @app.get("/{path:path}")
    def answer(path: str) -> dict:
        return {"served": path}

    app.add_middleware(OperatorGate, networks=operator_networks([*LOOPBACK, *operators]))
    return app


def status_codes(app: FastAPI, peer: str) -> dict[str, int]:
    client = TestClient(app, client=(peer, 50000))
    return {path: client.post(path).status_code for path in PATHS}


def test_a_stranger_reaches_the_fleet_api_and_the_health_check_only():
    assert status_codes(gated_app(), "192.0.2.77") == {
        "/v1/control/register-node": 403,
        "/v1/control/start-run": 403,
        "/v1/runtime/pull-messages": 403,
        "/v1/fleet/activate-node": 200,
        "/health": 200,
    }


@pytest.mark.parametrize("peer", ["127.0.0.1", "127.0.0.2", "::1", "::ffff:127.0.0.1"])
def test_loopback_is_the_operator(peer):
    assert set(status_codes(gated_app(), peer).values()) == {200}


def test_listed_networks_are_the_operator_and_their_neighbours_are_not():
    app = gated_app("10.93.0.1", "192.168.7.0/24")
    assert set(status_codes(app, "10.93.0.1").values()) == {200}
    assert set(status_codes(app, "192.168.7.200").values()) == {200}
    assert status_codes(app, "10.93.0.2")["/v1/control/register-node"] == 403


def test_a_forged_forwarding_header_does_not_make_an_operator():
    client = TestClient(gated_app(), client=("192.0.2.77", 50000))
    headers = {"X-Forwarded-For": "127.0.0.1", "X-Real-IP": "127.0.0.1"}
    assert client.post("/v1/control/register-node", headers=headers).status_code == 403


@pytest.mark.parametrize("peer", ["", "not-an-address", "unix-socket"])
def test_a_peer_without_an_ip_address_is_no_operator(peer):
    assert status_codes(gated_app(), peer)["/v1/control/start-run"] == 403


def test_bad_operator_addresses_are_one_line_errors(capsys):
    with pytest.raises(SystemExit):
        parse(["--operator", "server.lan"])
    assert "--operator 'server.lan' is no IP address or network" in capsys.readouterr().err


def test_the_bound_host_is_an_operator_and_bind_all_is_not():
    assert bound_host(["--host", "192.168.1.10", "--port", "9093"]) == "192.168.1.10"
    assert bound_host(["--host", "0.0.0.0"]) is None
    assert bound_host(["--port", "9093"]) is None
    ours, _ = parse(["--host", "192.168.1.10"])
    assert [str(n) for n in ours.networks] == ["127.0.0.0/8", "::1/128", "192.168.1.10/32"]


def test_listed_keys_turn_on_node_authentication_and_pass_the_rest_to_flower(tmp_path):
    (_, public), (_, other) = make_node_keys(tmp_path, 2)
    ours, flower_args = parse(
        ["--supernode-keys", str(public), str(other), "--host", "0.0.0.0", "--insecure"]
    )
    assert flower_args == ["--host", "0.0.0.0", "--insecure", "--enable-supernode-auth"]
    assert list(ours.keys) == [public, other]
    assert ours.keys[public].startswith(b"-----BEGIN PUBLIC KEY-----")
    _, flower_args = parse(["--enable-supernode-auth"])
    assert flower_args == ["--enable-supernode-auth"]  # not twice


def test_a_key_file_that_is_no_node_key_is_named(tmp_path, capsys):
    ((private, _),) = make_node_keys(tmp_path, 1)
    with pytest.raises(ValueError, match="node-0: no OpenSSH public key"):
        read_public_key(private)
    rsa = tmp_path / "rsa.pub"
    rsa.write_bytes(
        generate_private_key(public_exponent=65537, key_size=1024)
        .public_key()
        .public_bytes(Encoding.OpenSSH, PublicFormat.OpenSSH)
    )
    with pytest.raises(ValueError, match="rsa.pub: not a NIST elliptic-curve key"):
        read_public_key(rsa)
    with pytest.raises(SystemExit):
        parse(["--supernode-keys", str(tmp_path / "missing.pub")])
    assert "missing.pub: no OpenSSH public key" in capsys.readouterr().err
