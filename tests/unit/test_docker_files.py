"""Static checks of docker/ (no Docker engine here): the files parse, base images and
dependencies are pinned, containers run as a non-root user, and the entry points are
the commands the native path runs."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import pytest
import yaml

from fedimb.cli.federation.processes import superlink_arguments, supernode_arguments

DOCKER = Path(__file__).resolve().parents[2] / "docker"
DOCKERFILES = sorted(DOCKER.glob("Dockerfile.*"))


def instructions(path: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of a Dockerfile, with continuation lines joined."""
    text = re.sub(r"\\\n", " ", path.read_text())
    result = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        keyword, _, rest = line.partition(" ")
        assert keyword.isupper(), f"{path.name}: cannot parse {line!r}"
        result.append((keyword, rest.strip()))
    return result


def exec_form(arguments: str) -> list[str]:
    value = json.loads(arguments)
    assert isinstance(value, list) and all(isinstance(v, str) for v in value)
    return value


def test_the_two_images_exist():  # the edge one serves NVIDIA Jetson too, with its build arguments
    assert [p.name for p in DOCKERFILES] == ["Dockerfile.edge", "Dockerfile.server"]


@pytest.mark.parametrize("path", DOCKERFILES, ids=lambda p: p.name)
def test_dockerfile_is_pinned_and_runs_as_non_root(path):
    steps = instructions(path)
    assert steps[0][0] in ("FROM", "ARG")
    base = resolve_args(
        steps, next(rest for keyword, rest in steps if keyword == "FROM").split()[0]
    )
    image, _, tag = base.partition(":")
    assert tag and tag != "latest" and re.search(r"\d", tag), (
        f"{path.name}: base image {base} is not pinned"
    )
    assert image == "flwr/base" and tag.startswith(
        "1.41."
    )  # Flower's official image, pyproject's Flower
    users = [rest for keyword, rest in steps if keyword == "USER"]
    assert users and users[-1] not in ("root", "0"), f"{path.name}: must end as a non-root user"
    # every pip install pins what it installs beyond the project itself
    for keyword, rest in steps:
        if keyword == "RUN" and "pip install" in rest:
            for spec in re.findall(r'"([A-Za-z][\w.-]*)([=<>!~]=?[^"]*)?"', rest):
                assert spec[1].startswith("=="), f"{path.name}: {spec[0]} is not pinned"


def resolve_args(steps: list[tuple[str, str]], text: str) -> str:
    """``text`` with ``${NAME}`` replaced by the defaults of the Dockerfile's ``ARG``s."""
    defaults = dict(
        rest.split("=", 1) for keyword, rest in steps if keyword == "ARG" and "=" in rest
    )
    return re.sub(r"\$\{(\w+)\}", lambda m: defaults[m.group(1)].strip('"'), text)


def test_edge_image_pins_torch_and_installs_pyprojects_dependencies():
    steps = instructions(DOCKER / "Dockerfile.edge")
    torch = resolve_args(steps, "${TORCH}").split()
    assert [spec.split("==")[0] for spec in torch] == ["torch", "torchvision"]
    assert all("==" in spec for spec in torch)
    pyproject = tomllib.loads((DOCKER.parent / "pyproject.toml").read_text())["project"][
        "dependencies"
    ]
    wanted = [re.sub(r"\[[^]]*\]", "", dep) for dep in pyproject if not dep.startswith("torch")]
    listed = [
        line
        for line in (DOCKER / "edge-requirements.txt").read_text().splitlines()
        if line and not line.startswith("#")
    ]
    assert listed == wanted  # the same ranges; Flower without its simulation extra (Ray)


def _entrypoint(path: Path) -> list[str]:
    steps = instructions(path)
    return exec_form(next(rest for keyword, rest in reversed(steps) if keyword == "ENTRYPOINT"))


def flags(args: list[str]) -> list[str]:
    return [a for a in args if a.startswith("--")]


def test_server_entrypoint_is_the_native_superlink_command():
    command = _entrypoint(DOCKER / "Dockerfile.server")
    assert command[:2] == ["fedimb", "superlink"]  # Flower's, its Control API the operator's
    native = superlink_arguments("0.0.0.0", 9093, simulation=False, extra_args=[])
    assert command[2 : 2 + len(native)] == native  # same flags, same order; then the state database
    steps = instructions(DOCKER / "Dockerfile.server")
    cmd = exec_form(next(rest for keyword, rest in steps if keyword == "CMD"))
    # secure by default: the TLS files and SuperNode authentication the native secure path uses
    assert flags(cmd) == [
        "--ssl-ca-certfile",
        "--ssl-certfile",
        "--ssl-keyfile",
        "--enable-supernode-auth",
    ]


def test_edge_entrypoint_is_the_native_supernode_command():
    command = _entrypoint(DOCKER / "Dockerfile.edge")
    assert command == [
        "fedimb",
        "supernode",
        "--port",
        "9094",
    ]  # flower-supernode with its warm launcher
    # compose adds the rest; together they are the native arguments
    node = yaml.safe_load((DOCKER / "compose.yaml").read_text())["services"]["supernode-0"]
    native = supernode_arguments(
        "superlink:9093",
        9094,
        {"partition-id": 0, "num-partitions": 3},
        ["--root-certificates", "/certs/ca.crt", "--auth-supernode-private-key", "/certs/node-0"],
    )
    assert sorted(flags(command[2:] + node["command"])) == sorted(flags(native))


def test_compose_starts_a_secure_federation():
    compose = yaml.safe_load((DOCKER / "compose.yaml").read_text())
    services = compose["services"]
    nodes = {k: v for k, v in services.items() if k.startswith("supernode-")}
    assert "superlink" in services and len(nodes) >= 3
    assert services["superlink"]["build"]["dockerfile"] == "docker/Dockerfile.server"
    superlink = services["superlink"]["command"]
    assert flags(superlink) == [  # TLS, the operator's address, the keys it admits
        "--ssl-ca-certfile",
        "--ssl-certfile",
        "--ssl-keyfile",
        "--operator",
        "--supernode-keys",
    ]
    listed = superlink[superlink.index("--supernode-keys") + 1 :]
    assert listed == [f"/certs/node-{i}.pub" for i in range(len(nodes))]
    mounted = [volume.split(":")[1] for volume in services["superlink"]["volumes"]]
    assert set(listed) <= set(mounted)
    gateway = compose["networks"]["default"]["ipam"]["config"][0]["gateway"]
    assert superlink[superlink.index("--operator") + 1] == gateway  # the host's connections
    for i, (_name, node) in enumerate(sorted(nodes.items())):
        assert node["build"]["dockerfile"] == "docker/Dockerfile.edge"
        args = node["command"]
        assert "--insecure" not in args
        assert args[args.index("--superlink") + 1] == "superlink:9093"
        assert args[args.index("--root-certificates") + 1] == "/certs/ca.crt"
        assert args[args.index("--auth-supernode-private-key") + 1] == f"/certs/node-{i}"
        assert f"partition-id={i}" in args[args.index("--node-config") + 1]
        assert node["depends_on"]["superlink"]["condition"] == "service_healthy"
    for service in services.values():
        image = service.get("image", "")
        assert image and not image.endswith(":latest") and ":" in image


def published_host(mapping: str) -> str:
    """The host address of a compose port mapping ``[HOST:]PUBLISHED:TARGET``, with a
    ``${VAR:-default}`` resolved to its default (what ``docker compose`` does without VAR)."""
    mapping = re.sub(r"\$\{\w+:-([^}]*)\}", r"\1", mapping)
    parts = mapping.rsplit(":", 2)
    return parts[0] if len(parts) == 3 else "0.0.0.0"  # no host: every interface


def test_compose_publishes_the_superlinks_port_on_loopback_only():
    # the port serves the Control API too, which answers the operator's addresses only
    services = yaml.safe_load((DOCKER / "compose.yaml").read_text())["services"]
    published = {
        name: [published_host(str(p)) for p in service.get("ports", [])]
        for name, service in services.items()
    }
    assert published.pop("superlink") == ["127.0.0.1"]
    assert not any(published.values()), published  # nothing else is published


def test_each_node_container_mounts_ca_crt_and_its_own_key_only():
    services = yaml.safe_load((DOCKER / "compose.yaml").read_text())["services"]
    nodes = sorted((k, v) for k, v in services.items() if k.startswith("supernode-"))
    for i, (name, node) in enumerate(nodes):
        mounts = sorted(volume.split(":")[:2] for volume in node["volumes"])
        assert mounts == [
            ["./certs/ca.crt", "/certs/ca.crt"],
            [f"./certs/node-{i}", f"/certs/node-{i}"],
        ], name
        assert all(volume.endswith(":ro") for volume in node["volumes"])
