"""The ``cni`` backend: the standard CNI plugin binaries, run as the CNI specification says.

People already run the reference plugins (``bridge``, ``host-local``, ``portmap``, ...);
this backend runs them the way containerd and CRI-O do, so any network configuration list
that works there works here. Per pod: ``ADD`` through the list in order, each plugin
getting the previous plugin's result as ``prevResult``, the ``runtimeConfig`` of the
capabilities it declares (``portMappings``), and the pod in ``CNI_ARGS``; ``DEL`` through
the list in reverse; ``CHECK`` on demand.

The exact configuration and arguments of every attachment are cached on disk *before*
``ADD`` runs and the result after each plugin (libcni's ``cniCacheV1`` layout), so ``DEL``
after a restart, after a crash half-way through ``ADD`` or after the configuration changed
runs with what ``ADD`` ran with, and later plugins (``firewall``) learn the addresses
their rules name. A plugin's error JSON (``code``, ``msg``, ``details``) becomes a
:class:`~asynckubelet.errors.NetworkError` quoting it.
"""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
from loguru import logger

from asynckubelet import errors
from asynckubelet.network import PodNetwork, PodNetworkRequest, PortMapping, SandboxExtra
from asynckubelet.network.iptables import IPTables

DEFAULT_CONF_DIR = Path("/etc/cni/net.d")
PROJECT_CONF_DIR = Path(__file__).resolve().parent.parent.parent / "cni"
DEFAULT_PLUGIN_DIRS = (Path("/opt/cni/bin"), Path("/usr/lib/cni"))
DEFAULT_CACHE_DIR = Path("/var/lib/asynckubelet/cni")
IFNAME = "eth0"
SUPPORTED_VERSIONS = ("0.3.0", "0.3.1", "0.4.0", "1.0.0")
_TMP_ID = re.compile(r"-([0-9a-f]{64})-[^-]+\.tmp$")


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


def load_config(conf_dirs: Sequence[Path]) -> NetworkConfigList:
    """The first configuration (in name order) of the first directory that has one."""
    for folder in conf_dirs:
        if not folder.is_dir():
            continue
        for path in sorted(folder.iterdir()):
            if path.suffix in (".conflist", ".conf", ".json"):
                return parse_config(path.read_bytes(), source=str(path))
    where = ", ".join(str(d) for d in conf_dirs)
    raise errors.NetworkError(f"no CNI network configuration found in {where}")


def _version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split(".") if p.isdigit())


@dataclass(frozen=True)
class CNIConfig:
    conf_dirs: tuple[Path, ...] = (DEFAULT_CONF_DIR, PROJECT_CONF_DIR)
    plugin_dirs: tuple[Path, ...] = DEFAULT_PLUGIN_DIRS
    cache_dir: Path = DEFAULT_CACHE_DIR
    ifname: str = IFNAME
    timeout: float | None = 60.0
    sandbox_exists: Callable[[str], Awaitable[bool]] | None = field(default=None, compare=False)
    """Whether a sandbox still runs, for the start-up sweep; None: no sweep."""


class CNIPlugin:
    """Runs a CNI network configuration list for every pod sandbox."""

    name = "cni"

    def __init__(self, config: CNIConfig | None = None) -> None:
        self.config = config or CNIConfig()
        self._network: NetworkConfigList | None = None

    def sandbox_network_mode(self, *, host_network: bool) -> str:
        return "host" if host_network else "none"

    def sandbox_extra(
        self, *, host_network: bool, port_mappings: tuple[PortMapping, ...]
    ) -> SandboxExtra:
        return SandboxExtra()

    @property
    def network(self) -> NetworkConfigList:
        if self._network is None:
            self._network = load_config(self.config.conf_dirs)
        return self._network

    async def start(self) -> None:
        """Load the configuration and DEL what sandboxes that no longer run left."""
        await anyio.to_thread.run_sync(lambda: self.network)
        await self.sweep()

    async def status(self) -> tuple[bool, str]:
        try:
            network = await anyio.to_thread.run_sync(lambda: self.network)
        except errors.NetworkError as e:
            return False, str(e)
        for plugin in network.plugins:
            if self._find(str(plugin["type"])) is None:
                dirs = ":".join(str(d) for d in self.config.plugin_dirs)
                return False, f"CNI plugin {plugin['type']!r} not found in {dirs}"
        return True, ""

    # -- the cache ------------------------------------------------------------------------

    def _cache_path(self, network: str, sandbox_id: str) -> Path:
        return self.config.cache_dir / "results" / f"{network}-{sandbox_id}-{self.config.ifname}"

    def _write_cache(self, path: Path, entry: Mapping[str, Any]) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp")
        with open(tmp, "w") as f:
            json.dump(entry, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)

    def _cached(self, sandbox_id: str) -> list[tuple[Path, dict[str, Any]]]:
        folder = self.config.cache_dir / "results"
        if not folder.is_dir():
            return []
        found = []
        for path in folder.iterdir():
            if path.name.startswith("."):
                continue
            try:
                entry = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
            if isinstance(entry, dict) and entry.get("containerId") == sandbox_id:
                found.append((path, entry))
        return found

    def cached_sandboxes(self) -> set[str]:
        folder = self.config.cache_dir / "results"
        if not folder.is_dir():
            return set()
        ids = set()
        for path in folder.iterdir():
            if path.name.startswith("."):
                half_written = _TMP_ID.search(path.name)
                if half_written:
                    ids.add(half_written.group(1))
                continue
            try:
                entry = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
            if isinstance(entry, dict) and isinstance(entry.get("containerId"), str):
                ids.add(entry["containerId"])
        return ids

    def _drop_half_written(self, sandbox_id: str) -> None:
        """Temporary files a process killed while writing this sandbox's entry left."""
        folder = self.config.cache_dir / "results"
        if folder.is_dir():
            for path in folder.glob(f".*-{sandbox_id}-*.tmp"):
                path.unlink(missing_ok=True)

    # -- running plugins ------------------------------------------------------------------

    def _find(self, kind: str) -> Path | None:
        if "/" in kind or not kind:
            return None
        for folder in self.config.plugin_dirs:
            candidate = folder / kind
            if candidate.is_file() and os.access(candidate, os.X_OK):
                return candidate
        return None

    async def _exec(
        self,
        plugin: Mapping[str, Any],
        *,
        command: str,
        sandbox_id: str,
        netns: str,
        cni_args: str,
    ) -> dict[str, Any] | None:
        kind = str(plugin["type"])
        binary = self._find(kind)
        if binary is None:
            dirs = ":".join(str(d) for d in self.config.plugin_dirs)
            raise errors.NetworkError(f"CNI plugin {kind!r} not found in {dirs}")
        env = {
            "PATH": os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin"),
            "CNI_COMMAND": command,
            "CNI_CONTAINERID": sandbox_id,
            "CNI_NETNS": netns,
            "CNI_IFNAME": self.config.ifname,
            "CNI_ARGS": cni_args,
            "CNI_PATH": ":".join(str(d) for d in self.config.plugin_dirs),
        }
        stdin = json.dumps(plugin).encode()
        try:
            with anyio.fail_after(self.config.timeout):
                proc = await anyio.run_process(
                    [str(binary)], input=stdin, env=env, check=False, stderr=subprocess.PIPE
                )
        except TimeoutError as e:
            raise errors.NetworkError(f"CNI plugin {kind} {command} timed out") from e
        except OSError as e:
            raise errors.NetworkError(f"CNI plugin {kind} {command}: {e}") from e
        out = proc.stdout.decode(errors="replace").strip()
        if proc.returncode != 0:
            raise errors.NetworkError(_plugin_error(kind, command, out, proc.stderr))
        if command != "ADD" or not out:
            return None
        try:
            result = json.loads(out)
        except ValueError as e:
            raise errors.NetworkError(f"CNI plugin {kind} {command}: result is not JSON") from e
        if not isinstance(result, dict):
            raise errors.NetworkError(f"CNI plugin {kind} {command}: result is not an object")
        return result

    @staticmethod
    def _plugin_conf(
        network: NetworkConfigList,
        plugin: Mapping[str, Any],
        *,
        prev: Mapping[str, Any] | None,
        capability_args: Mapping[str, Any],
    ) -> dict[str, Any]:
        conf = dict(plugin)
        conf["name"] = network.name
        conf["cniVersion"] = network.cni_version
        if prev is not None:
            conf["prevResult"] = prev
        wanted = plugin.get("capabilities") or {}
        runtime = {k: v for k, v in capability_args.items() if wanted.get(k)}
        if runtime:
            conf["runtimeConfig"] = runtime
        conf.pop("capabilities", None)
        return conf

    # -- pods -----------------------------------------------------------------------------

    async def setup_pod(self, request: PodNetworkRequest) -> PodNetwork:
        sid = request.sandbox_id
        if not request.netns_path:
            raise errors.NetworkError(
                f"the cni backend needs the network namespace of sandbox {sid[:12]}"
            )
        network = await anyio.to_thread.run_sync(lambda: self.network)
        cni_args = _cni_args(request)
        capability_args: dict[str, Any] = {}
        if request.port_mappings:
            capability_args["portMappings"] = [
                {
                    "hostPort": p.host_port,
                    "containerPort": p.container_port,
                    "protocol": p.protocol.lower(),
                    "hostIP": p.host_ip,
                }
                for p in request.port_mappings
            ]
        path = self._cache_path(network.name, sid)
        entry: dict[str, Any] = {
            "kind": "cniCacheV1",
            "containerId": sid,
            "config": base64.b64encode(network.raw).decode(),
            "ifName": self.config.ifname,
            "networkName": network.name,
            "netns": request.netns_path,
            "cniArgs": [kv.split("=", 1) for kv in cni_args.split(";")],
            "capabilityArgs": capability_args,
            "result": None,
        }
        await anyio.to_thread.run_sync(self._write_cache, path, entry)
        try:
            prev: dict[str, Any] | None = None
            for plugin in network.plugins:
                conf = self._plugin_conf(
                    network, plugin, prev=prev, capability_args=capability_args
                )
                result = await self._exec(
                    conf, command="ADD", sandbox_id=sid, netns=request.netns_path, cni_args=cni_args
                )
                if result is not None:
                    prev = result
                    entry["result"] = prev
                    await anyio.to_thread.run_sync(self._write_cache, path, entry)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await self._delete(sid, best_effort=True)
            raise
        return PodNetwork(ips=_ips(prev))

    async def check_pod(self, *, sandbox_id: str) -> None:
        """CNI ``CHECK`` of every cached attachment (cniVersion 0.4.0 and later)."""
        for _, entry in await anyio.to_thread.run_sync(self._cached, sandbox_id):
            network = parse_config(base64.b64decode(entry["config"]))
            if _version_tuple(network.cni_version) < (0, 4, 0):
                continue
            for plugin in network.plugins:
                conf = self._plugin_conf(
                    network,
                    plugin,
                    prev=entry.get("result"),
                    capability_args=entry.get("capabilityArgs") or {},
                )
                await self._exec(
                    conf,
                    command="CHECK",
                    sandbox_id=sandbox_id,
                    netns=str(entry.get("netns") or ""),
                    cni_args=_args_text(entry),
                )

    async def teardown_pod(self, *, sandbox_id: str) -> None:
        await self._delete(sandbox_id, best_effort=False)

    async def _delete(self, sandbox_id: str, *, best_effort: bool) -> None:
        """DEL every cached attachment of the sandbox, then drop its cache entry.

        ``best_effort`` (after a failed ADD): a failing DEL is logged and the entry dropped
        all the same, since the configuration that failed may never DEL cleanly.
        """
        with anyio.CancelScope(shield=True):
            for path, entry in await anyio.to_thread.run_sync(self._cached, sandbox_id):
                network = parse_config(base64.b64decode(entry["config"]), source=str(path))
                netns = str(entry.get("netns") or "")
                if netns and not await anyio.Path(netns).exists():
                    netns = ""
                prev = entry.get("result")
                for plugin in reversed(network.plugins):
                    conf = self._plugin_conf(
                        network,
                        plugin,
                        prev=prev if _version_tuple(network.cni_version) >= (0, 4, 0) else None,
                        capability_args=entry.get("capabilityArgs") or {},
                    )
                    try:
                        await self._exec(
                            conf,
                            command="DEL",
                            sandbox_id=sandbox_id,
                            netns=netns,
                            cni_args=_args_text(entry),
                        )
                    except errors.NetworkError as e:
                        if not best_effort:
                            raise
                        logger.warning("cni: DEL after a failed ADD: {}", e)
                if not netns:
                    await self._remove_orphan_rules(sandbox_id)
                await anyio.to_thread.run_sync(path.unlink)
            await anyio.to_thread.run_sync(self._drop_half_written, sandbox_id)

    async def _remove_orphan_rules(self, sandbox_id: str) -> None:
        """The NAT rules plugins tag with the container id but only remove while the
        namespace exists (the bridge plugin's ``ipMasq``): gone with it, they are found by
        their comment and removed here."""
        tables = IPTables()
        if not tables.available():
            return
        tag = f'id: "{sandbox_id}"'
        for chain in ("POSTROUTING",):
            for rule in await tables.rules(chain, table="nat"):
                if not any(tag in word for word in rule):
                    continue
                await tables.delete_rule(chain, rule, table="nat")
                target = rule[rule.index("-j") + 1] if "-j" in rule else ""
                if target.startswith("CNI-"):
                    await tables.delete_chain(target, table="nat")

    async def get_pod_network_status(self, *, sandbox_id: str) -> PodNetwork | None:
        for _, entry in await anyio.to_thread.run_sync(self._cached, sandbox_id):
            if entry.get("result"):
                return PodNetwork(ips=_ips(entry["result"]))
        return PodNetwork()

    async def sweep(self) -> list[str]:
        """DEL every cached attachment whose sandbox no longer runs; returns their ids."""
        check = self.config.sandbox_exists
        if check is None:
            return []
        gone = []
        for sid in sorted(await anyio.to_thread.run_sync(self.cached_sandboxes)):
            if not await check(sid):
                await self.teardown_pod(sandbox_id=sid)
                gone.append(sid)
        return gone


def _cni_args(request: PodNetworkRequest) -> str:
    return ";".join(
        [
            "IgnoreUnknown=1",
            f"K8S_POD_NAMESPACE={request.namespace}",
            f"K8S_POD_NAME={request.pod_name}",
            f"K8S_POD_INFRA_CONTAINER_ID={request.sandbox_id}",
            f"K8S_POD_UID={request.uid}",
        ]
    )


def _args_text(entry: Mapping[str, Any]) -> str:
    pairs = entry.get("cniArgs") or []
    return ";".join("=".join(p) for p in pairs if isinstance(p, list) and len(p) == 2)


def _ips(result: Mapping[str, Any] | None) -> tuple[str, ...]:
    if not result:
        return ()
    found = []
    interfaces = result.get("interfaces") or []
    for ip in result.get("ips") or []:
        address = str(ip.get("address", "")).split("/")[0]
        index = ip.get("interface")
        if isinstance(index, int) and 0 <= index < len(interfaces):
            if interfaces[index].get("name") == "lo":
                continue
        if address and not address.startswith("127."):
            found.append(address)
    return tuple(found)


def _plugin_error(kind: str, command: str, out: str, stderr: bytes) -> str:
    try:
        doc = json.loads(out)
    except ValueError:
        doc = None
    if isinstance(doc, dict) and "msg" in doc:
        text = f"CNI plugin {kind} {command} failed (code {doc.get('code')}): {doc['msg']}"
        if doc.get("details"):
            text += f": {doc['details']}"
        return text
    detail = (out or stderr.decode(errors="replace")).strip()
    return f"CNI plugin {kind} {command} failed: {detail or 'no output'}"


__all__ = [
    "DEFAULT_CACHE_DIR",
    "DEFAULT_CONF_DIR",
    "DEFAULT_PLUGIN_DIRS",
    "PROJECT_CONF_DIR",
    "CNIConfig",
    "CNIPlugin",
    "NetworkConfigList",
    "load_config",
    "parse_config",
]
