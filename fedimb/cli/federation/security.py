"""Certificates and node keys for a secure deployment (TLS + SuperNode authentication).

``fedimb certs`` writes, into one folder:

- ``ca.crt`` / ``ca.key``: a private certificate authority (ECDSA P-384, 10 years);
- ``server.pem`` / ``server.key``: the SuperLink's certificate, signed by the CA, valid
  for ``localhost``, ``127.0.0.1`` and every ``--host`` given (subjectAltNames);
- ``node-<i>`` / ``node-<i>.pub``: an ECDSA P-384 key pair per SuperNode in OpenSSH
  format, as ``flower-supernode --auth-supernode-private-key`` and
  ``flwr supernode register`` expect.

Keep ``ca.key``, ``server.key`` and the node private keys secret; nodes need ``ca.crt``
and their own private key only.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import ipaddress
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


def _write(path: Path, data: bytes, secret: bool = False) -> None:
    """Write ``path``; a ``secret`` goes into a temporary file created owner-only (0600)
    beside it, then renamed over ``path``: never readable by others, not even while it is
    written, never half-written, and a link planted at ``path`` is replaced, not followed."""
    if not secret:
        path.write_bytes(data)
        return
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")  # O_EXCL, mode 0600
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    )


def _san(hosts: Iterable[str]) -> x509.SubjectAlternativeName:
    names: list[x509.GeneralName] = []
    for host in dict.fromkeys(["localhost", "127.0.0.1", *hosts]):
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    return x509.SubjectAlternativeName(names)


def make_certificates(out: Path, hosts: Iterable[str] = (), days: int = 3650) -> dict[str, Path]:
    """CA and SuperLink certificate (with subjectAltNames for ``hosts``)."""
    out.mkdir(parents=True, exist_ok=True)
    now = dt.datetime.now(dt.UTC)
    ca_key = ec.generate_private_key(ec.SECP384R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "fedimb CA")])
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(ca_key, hashes.SHA384())
    )
    server_key = ec.generate_private_key(ec.SECP384R1())
    server_cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "fedimb SuperLink")]))
        .issuer_name(ca_name)
        .public_key(server_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=days))
        .add_extension(_san(hosts), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA384())
    )
    paths = {name: out / name for name in ("ca.crt", "ca.key", "server.pem", "server.key")}
    _write(paths["ca.crt"], ca_cert.public_bytes(serialization.Encoding.PEM))
    _write(paths["ca.key"], _pem_key(ca_key), secret=True)
    _write(paths["server.pem"], server_cert.public_bytes(serialization.Encoding.PEM))
    _write(paths["server.key"], _pem_key(server_key), secret=True)
    return paths


def make_node_keys(out: Path, count: int, prefix: str = "node") -> list[tuple[Path, Path]]:
    """``count`` ECDSA P-384 key pairs in OpenSSH format: (private, public) paths."""
    out.mkdir(parents=True, exist_ok=True)
    pairs = []
    for i in range(count):
        key = ec.generate_private_key(ec.SECP384R1())
        private = out / f"{prefix}-{i}"
        public = out / f"{prefix}-{i}.pub"
        _write(
            private,
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.OpenSSH,
                serialization.NoEncryption(),
            ),
            secret=True,
        )
        _write(
            public,
            key.public_key().public_bytes(
                serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
            )
            + b"\n",
        )
        pairs.append((private, public))
    return pairs
