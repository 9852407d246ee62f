"""The edge tooling's pieces that need no container engine (``make test-edge`` runs the
rest): the base image archive, the wheel platform, the set-up errors."""

from __future__ import annotations

import hashlib
import io
import json
import sys
import tarfile

import pytest

from edge.federation import EdgeFederation
from edge.host import EdgeSetupError, check_arch, run
from edge.rootfs import image_archive
from edge.wheels import TORCH, platform_args


def test_the_base_image_archive_names_the_roots_architecture(tmp_path):
    root = tmp_path / "root"
    (root / "usr" / "bin").mkdir(parents=True)
    (root / "usr" / "bin" / "python3").write_text("#!/bin/sh\n")
    archive = image_archive(root, "arm64", "fedimb-root:bookworm-arm64", tmp_path)
    with tarfile.open(archive) as tar:
        manifest = json.load(tar.extractfile("manifest.json"))[0]
        config = json.load(tar.extractfile(manifest["Config"]))
        layer = tar.extractfile(manifest["Layers"][0]).read()
    assert manifest["RepoTags"] == ["fedimb-root:bookworm-arm64"]
    assert (config["architecture"], config["os"]) == (
        "arm64",
        "linux",
    )  # docker import would say amd64
    assert config["rootfs"]["diff_ids"] == [f"sha256:{hashlib.sha256(layer).hexdigest()}"]
    with tarfile.open(fileobj=io.BytesIO(layer)) as inner:
        assert "./usr/bin/python3" in inner.getnames()


def test_wheels_are_fetched_for_the_devices_platform_and_torch_is_a_cpu_build():
    args = platform_args("arm64")
    assert "--only-binary=:all:" in args and "manylinux_2_28_aarch64" in args and "cp311" in args
    assert not any("x86_64" in a for a in args)
    assert TORCH["arm64"][0] == "torch==2.9.1"  # the newest CPU-only aarch64 torch on PyPI


def test_set_up_failures_are_one_line(tmp_path):
    with pytest.raises(
        EdgeSetupError, match="unknown architecture 'riscv64' \\(choose from: arm64, amd64\\)"
    ):
        check_arch("riscv64")
    with pytest.raises(EdgeSetupError, match="'no-such-tool' is not installed"):
        run(["no-such-tool"], "checking")
    with pytest.raises(EdgeSetupError, match=r"^probing failed \(.*\): the last line$"):
        run(
            [sys.executable, "-c", "import sys; print('first'); sys.exit('the last line')"],
            "probing",
        )


def test_a_container_node_finds_its_key_and_ca_where_they_are_mounted(tmp_path):
    fed = EdgeFederation(tmp_path, 2, secure=True, images={0: object()})
    assert fed.node_args(0) == [
        "--root-certificates",
        "/certs/ca.crt",
        "--auth-supernode-private-key",
        "/certs/node-0",
    ]
    assert fed.node_args(1) == [
        "--root-certificates",
        str(tmp_path / "certs" / "ca.crt"),
        "--auth-supernode-private-key",
        str(tmp_path / "certs" / "node-1"),
    ]
