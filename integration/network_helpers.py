"""Helpers of the network integration tests: free pod CIDRs (IPv4, IPv6), bridge names, pods."""

from __future__ import annotations

import json
import random
import subprocess
from pathlib import Path
from typing import Any

import pytest
from lightkube.models.core_v1 import Pod

from asynckubelet.manifests import load_manifests_text
from integration.harness import BUSYBOX_IMAGE


def free_cidr() -> str:
    """A random /24 of 10.200.0.0-10.250.255.0 that no host route covers."""
    taken = subprocess.run(["ip", "-4", "route"], capture_output=True, text=True).stdout
    for _ in range(100):
        cidr = f"10.{random.randint(200, 250)}.{random.randint(0, 255)}.0/24"
        if cidr.split("/")[0].rsplit(".", 1)[0] + "." not in taken:
            return cidr
    raise AssertionError("no free /24 found")


def free_cidr_v6() -> str:
    """A random ULA /64 that no host route covers."""
    taken = subprocess.run(["ip", "-6", "route"], capture_output=True, text=True).stdout
    for _ in range(100):
        cidr = f"fd00:ac1:{random.randint(1, 0xFFFF):x}:{random.randint(1, 0xFFFF):x}::/64"
        if cidr.split("::")[0] not in taken:
            return cidr
    raise AssertionError("no free /64 found")


def pod_from(text: str, *, node: str) -> Pod:
    """A pod from YAML at the privileged level (hostPort, hostNetwork)."""
    manifests = load_manifests_text(
        text.replace("BUSYBOX", BUSYBOX_IMAGE), node_name=node, pod_security="privileged"
    )
    return manifests.pods[0]


def cni_conflist(*, name: str, bridge: str, subnet: str, data_dir: Path) -> dict[str, Any]:
    """The project's default CNI configuration list with a test's own name, bridge, subnet
    and host-local data directory."""
    shipped = Path(__file__).resolve().parent.parent / "asynckubelet" / "cni"
    doc: dict[str, Any] = json.loads((shipped / "10-asynckubelet.conflist").read_text())
    doc["name"] = name
    doc["plugins"][0]["bridge"] = bridge
    doc["plugins"][0]["ipam"]["ranges"] = [[{"subnet": subnet}]]
    doc["plugins"][0]["ipam"]["dataDir"] = str(data_dir)
    return doc


def bridge_name(node: str) -> str:
    return f"akb{node[-10:]}"


def node_address() -> str:
    """The node's own IPv4 address: the source this machine picks for an outside route.

    Nothing is sent; the kernel only answers which of its interface addresses it would use.
    """
    out = subprocess.run(
        ["ip", "-4", "-o", "route", "get", "192.0.2.200"], capture_output=True, text=True
    ).stdout
    words = out.split()
    if "src" not in words:
        pytest.skip("the node has no IPv4 source address")
    return words[words.index("src") + 1]
