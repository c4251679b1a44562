"""CNI network configuration lists: libcni's ``conf.go``.

A list is read from the first configuration file (in name order) of the first directory
that has one, and checked for what the ``cni`` backend relies on: a name, a supported
``cniVersion``, and plugins that each name their type. A single-plugin ``.conf`` reads as
a list of one. The project ships its own default list inside the package.
"""

from __future__ import annotations

import importlib.resources
import ipaddress
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

from asynckubelet import errors

DEFAULT_CONF_DIR = Path("/etc/cni/net.d")
PROJECT_CONF_DIR: Traversable = importlib.resources.files("asynckubelet").joinpath("cni")
"""The project's default configuration list, shipped inside the package."""
SUPPORTED_VERSIONS = ("0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0")
GC_VERSION = "1.1.0"
"""The CNI version that brought ``STATUS`` and ``GC``."""


@dataclass(frozen=True)
class NetworkConfigList:
    name: str
    cni_version: str
    plugins: tuple[Mapping[str, Any], ...]
    raw: bytes
    source: str = ""


def parse_config(data: bytes, *, source: str = "") -> NetworkConfigList:
    """A ``.conflist`` (or a single-plugin ``.conf``), checked for what we rely on."""
    try:
        doc = json.loads(data)
    except ValueError as e:
        raise errors.NetworkError(f"CNI configuration {source}: not JSON: {e}") from e
    if not isinstance(doc, dict):
        raise errors.NetworkError(f"CNI configuration {source}: not a JSON object")
    if "plugins" not in doc and "type" in doc:
        single = dict(doc)
        doc = {
            "cniVersion": doc.get("cniVersion", ""),
            "name": doc.get("name"),
            "plugins": [single],
        }
        data = json.dumps(doc).encode()
    name = doc.get("name")
    version = doc.get("cniVersion")
    plugins = doc.get("plugins")
    if not isinstance(name, str) or not name:
        raise errors.NetworkError(f"CNI configuration {source}: name: required")
    if version not in SUPPORTED_VERSIONS:
        raise errors.NetworkError(
            f"CNI configuration {source}: cniVersion {version!r} is not one of "
            f"{', '.join(SUPPORTED_VERSIONS)}"
        )
    if not isinstance(plugins, list) or not plugins:
        raise errors.NetworkError(f"CNI configuration {source}: plugins: at least one required")
    for i, plugin in enumerate(plugins):
        if not isinstance(plugin, dict) or not isinstance(plugin.get("type"), str):
            raise errors.NetworkError(f"CNI configuration {source}: plugins[{i}].type: required")
    return NetworkConfigList(name, str(version), tuple(plugins), data, source)


def load_config(conf_dirs: Sequence[Path | Traversable]) -> NetworkConfigList:
    """The first configuration (in name order) of the first directory that has one."""
    for folder in conf_dirs:
        if not folder.is_dir():
            continue
        for path in sorted(folder.iterdir(), key=lambda p: p.name):
            if Path(path.name).suffix in (".conflist", ".conf", ".json"):
                return parse_config(path.read_bytes(), source=str(path))
    where = ", ".join(str(d) for d in conf_dirs)
    raise errors.NetworkError(f"no CNI network configuration found in {where}")


def version_tuple(version: str) -> tuple[int, ...]:
    """``1.0.0`` -> ``(1, 0, 0)``, for comparing CNI versions."""
    return tuple(int(p) for p in version.split(".") if p.isdigit())


def supports_gc(network_version: str, plugin_versions: Sequence[str]) -> bool:
    """Whether ``STATUS`` and ``GC`` may go to a plugin: the list is 1.1.0 or later and the
    plugin's ``VERSION`` lists 1.1.0 (a plugin that does not know them fails on them)."""
    wanted = version_tuple(GC_VERSION)
    return version_tuple(network_version) >= wanted and any(
        version_tuple(v) == wanted for v in plugin_versions
    )


def _gateway_ranges(bridge: Mapping[str, Any] | None) -> Iterator[tuple[Any, Mapping[str, Any]]]:
    """(subnet, range entry) of each ``host-local`` range of a ``bridge`` plugin that
    makes its bridge the pods' gateway (``isGateway``); none for any other."""
    if bridge is None or not bridge.get("isGateway"):
        return
    ipam = bridge.get("ipam") or {}
    ranges = ipam.get("ranges") or ([[{"subnet": ipam["subnet"]}]] if ipam.get("subnet") else [])
    for rng in ranges:
        for entry in rng if isinstance(rng, list) else []:
            if not isinstance(entry, dict):
                continue
            try:
                yield ipaddress.ip_network(str(entry.get("subnet")), strict=False), entry
            except ValueError:
                continue


def bridge_gateway(bridge: Mapping[str, Any] | None) -> str | None:
    """The IPv4 gateway a ``bridge`` plugin gives its bridge (its ``host-local`` range's
    ``gateway``, else the range's first address); None when it is no gateway."""
    for subnet, entry in _gateway_ranges(bridge):
        try:
            if subnet.version != 4:
                continue
            if entry.get("gateway"):
                return str(ipaddress.IPv4Address(str(entry["gateway"])))
            return str(next(subnet.hosts()))
        except (ValueError, StopIteration):
            continue
    return None


def bridge_subnets(bridge: Mapping[str, Any] | None) -> tuple[str, ...]:
    """The pod ranges (both families) behind a ``bridge`` plugin that is their gateway."""
    return tuple(dict.fromkeys(str(subnet) for subnet, _ in _gateway_ranges(bridge)))


__all__ = [
    "DEFAULT_CONF_DIR",
    "GC_VERSION",
    "PROJECT_CONF_DIR",
    "SUPPORTED_VERSIONS",
    "NetworkConfigList",
    "bridge_gateway",
    "bridge_subnets",
    "load_config",
    "parse_config",
    "supports_gc",
    "version_tuple",
]
