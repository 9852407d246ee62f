"""Key files of a secure deployment are owner-only from the moment they exist."""

from __future__ import annotations

import os
import stat

import pytest

from fedimb.cli.federation.security import make_certificates, make_node_keys

SECRETS = ["ca.key", "server.key", "node-0", "node-1"]


def mode(path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


@pytest.fixture
def open_umask():
    """A umask that lets every new file be world-readable and writable."""
    previous = os.umask(0)
    yield
    os.umask(previous)


def test_keys_are_created_0600_without_a_chmod_afterwards(tmp_path, open_umask, monkeypatch):
    # a key that is made 0600 only after it was written was readable by others meanwhile
    monkeypatch.setattr(os, "chmod", lambda *args, **kwargs: None)
    monkeypatch.setattr(os, "fchmod", lambda *args, **kwargs: None)
    make_certificates(tmp_path)
    make_node_keys(tmp_path, 2)
    assert {name: oct(mode(tmp_path / name)) for name in SECRETS} == {
        name: "0o600" for name in SECRETS
    }
    assert b"PRIVATE KEY" in (tmp_path / "node-0").read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [
            "ca.crt",
            "ca.key",
            "server.pem",
            "server.key",
            "node-0",
            "node-0.pub",
            "node-1",
            "node-1.pub",
        ]
    )


def test_a_link_planted_where_a_key_goes_is_replaced_not_written_through(tmp_path):
    elsewhere = tmp_path / "readable-by-all"
    elsewhere.write_text("")
    out = tmp_path / "certs"
    out.mkdir()
    for name in ("server.key", "node-0"):
        (out / name).symlink_to(elsewhere)
    make_certificates(out)
    make_node_keys(out, 1)
    assert elsewhere.read_text() == ""
    for name in ("server.key", "node-0"):
        assert not (out / name).is_symlink() and mode(out / name) == 0o600


def test_the_local_federations_superlink_listens_on_loopback_only(tmp_path, monkeypatch):
    # its one port serves the Control API, which this Flower build does not authenticate
    from fedimb.cli.federation import processes

    started = []
    monkeypatch.setattr(
        processes.ManagedProcess, "__init__", lambda self, args, *rest: started.append(args)
    )
    superlink = processes.SuperLink(tmp_path / "superlink.log", simulation=False)
    args = started[0]
    assert args[args.index("--host") + 1] == "127.0.0.1" and superlink.address.startswith(
        "127.0.0.1:"
    )
