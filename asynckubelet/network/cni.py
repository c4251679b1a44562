"""The ``cni`` backend: the standard CNI plugin binaries, run as the CNI specification says.

People already run the reference plugins (``bridge``, ``host-local``, ``portmap``, ...);
this backend runs them the way containerd and CRI-O do, so any network configuration list
that works there works here. Per pod: ``ADD`` through the list in order, each plugin
getting the previous plugin's result as ``prevResult``, the ``runtimeConfig`` of the
capabilities it declares (``portMappings``; ``dns``, the pod's resolv.conf settings;
``ips``, the addresses the pod asks for), and the pod in ``CNI_ARGS``; ``DEL`` through the
list in reverse; ``CHECK`` on demand. A list with two ``host-local`` ranges (IPv4 and
IPv6) gives dual-stack pods, IPv4 first.

The CNI 1.1 verbs go only where they are understood: a plugin's ``VERSION`` answer (asked
once per binary) must list 1.1.0, and the list must be 1.1.0 or later. ``STATUS`` then
tells whether the network is ready; at start-up, after ``DEL`` of every cached attachment
whose sandbox is gone (libcni's order), ``GC`` names the attachments still valid
(``cni.dev/valid-attachments``) so plugins can drop what no cache remembers.

Agents of several Docker engines may share the cache directory and the plugins' state
(one bridge, one ``host-local`` range): every cache entry names the engine that made it,
a sweep only releases its own engine's gone sandboxes, and ``GC`` counts the other
engines' attachments as valid.

The exact configuration and arguments of every attachment are cached on disk *before*
``ADD`` runs and the result after each plugin (libcni's ``cniCacheV1`` layout), so ``DEL``
after a restart, after a crash half-way through ``ADD`` or after the configuration changed
runs with what ``ADD`` ran with, and later plugins (``firewall``) learn the addresses
their rules name; the cache is private to the node's user (0600 files in 0700
directories, :mod:`asynckubelet.network.records`). A plugin's error JSON (``code``,
``msg``, ``details``) becomes a :class:`~asynckubelet.errors.NetworkError` quoting it.
Configuration lists are read and checked in :mod:`asynckubelet.network.cniconf`.
"""

from __future__ import annotations

import base64
import json
import os
import re
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread

from asynckubelet import errors
from asynckubelet._logging import logger
from asynckubelet.network import PodNetwork, PodNetworkRequest, PortMapping, SandboxExtra
from asynckubelet.network.cniconf import (
    DEFAULT_CONF_DIR,
    GC_VERSION,
    PROJECT_CONF_DIR,
    NetworkConfigList,
    bridge_gateway,
    bridge_subnets,
    load_config,
    parse_config,
    supports_gc,
    version_tuple,
)
from asynckubelet.network.cniexec import (
    IFNAME,
    _args_text,
    _ips,
    _plugin_error,
    _run_plugin,
    capability_args,
    cni_args,
    plugin_environment,
)
from asynckubelet.network.iptables import IPTables
from asynckubelet.network.records import private_dir, write_private

DEFAULT_PLUGIN_DIRS = (Path("/opt/cni/bin"), Path("/usr/lib/cni"))
DEFAULT_CACHE_DIR = Path("/var/lib/asynckubelet/cni")
VALID_ATTACHMENTS = "cni.dev/valid-attachments"
_TMP_ID = re.compile(r"-([0-9a-f]{64})-[^-]+\.tmp$")
_ENGINE_KEY = "engineId"
"""Our addition to libcni's cache entry: the engine whose sandbox the attachment is."""


def gc_config(
    network: NetworkConfigList,
    plugin: Mapping[str, Any],
    *,
    valid: Sequence[tuple[str, str]],
) -> dict[str, Any]:
    """A plugin's ``GC`` input: its configuration with the attachments still valid, as
    (container id, interface) pairs. The key is also sent under its draft name
    ``cni.dev/attachments``, as libcni does, for plugins built against it."""
    conf = CNIPlugin.plugin_conf(network, plugin, prev=None, capability_args={})
    attachments = [{"containerID": cid, "ifname": ifname} for cid, ifname in valid]
    conf[VALID_ATTACHMENTS] = attachments
    conf["cni.dev/attachments"] = attachments
    return conf


@dataclass(frozen=True)
class CNIConfig:
    conf_dirs: tuple[Path | Traversable, ...] = (DEFAULT_CONF_DIR, PROJECT_CONF_DIR)
    plugin_dirs: tuple[Path, ...] = DEFAULT_PLUGIN_DIRS
    cache_dir: Path = DEFAULT_CACHE_DIR
    """libcni's cache, kept private; its parent is the network state directory."""
    ifname: str = IFNAME
    timeout: float | None = 60.0
    sandbox_exists: Callable[[str], Awaitable[bool]] | None = field(default=None, compare=False)
    """Whether a sandbox still runs, for the start-up sweep; None: no sweep."""
    engine_id: Callable[[], Awaitable[str]] | None = field(default=None, compare=False)
    """The key of the Docker engine whose sandboxes this agent networks (the sweep's scope,
    ``factory.engine_key``);
    None: unknown, and the sweep judges every cached attachment."""


class CNIPlugin:
    """Runs a CNI network configuration list for every pod sandbox."""

    name = "cni"

    def __init__(self, config: CNIConfig | None = None) -> None:
        self.config = config or CNIConfig()
        self._network: NetworkConfigList | None = None
        self._versions: dict[tuple[str, int], tuple[str, ...]] = {}
        self.engine = ""
        """The engine key written on every cache entry (empty until known)."""

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

    def _bridge_plugin(self) -> Mapping[str, Any] | None:
        try:
            plugins = self.network.plugins
        except errors.NetworkError:
            return None
        return next((p for p in plugins if p.get("type") == "bridge"), None)

    def gateway(self) -> str | None:
        """The IPv4 gateway the list's ``bridge`` plugin gives its bridge (its
        ``host-local`` range's ``gateway``, else the range's first address); None when
        the list has no such bridge."""
        return bridge_gateway(self._bridge_plugin())

    def pod_subnets(self) -> tuple[str, ...]:
        """The pod ranges behind the list's gateway bridge (none without one)."""
        return bridge_subnets(self._bridge_plugin())

    def service_target(self) -> tuple[IPTables, str] | None:
        """The packet filter and bridge name that Service rules go to (iptables, as the
        list's own ``portmap`` and ``firewall`` plugins use); None without a bridge."""
        bridge = self._bridge_plugin()
        name = str(bridge.get("bridge") or "cni0") if bridge is not None else ""
        if not name or len(name) > 15:
            return None
        return IPTables(), name

    async def start(self) -> None:
        """Load the configuration, keep the cache private, guard the bridge's loopback, DEL
        what sandboxes that no longer run left, then GC where the plugins support it."""
        await anyio.to_thread.run_sync(lambda: self.network)
        cache = self.config.cache_dir
        await anyio.to_thread.run_sync(private_dir, cache.parent, cache / "results")
        await self.guard_localnet()
        await self._know_engine()
        await self.sweep()

    async def guard_localnet(self) -> None:
        """The kubelet's loopback guard (CVE-2020-8558) on the list's bridge: the
        ``portmap`` plugin turns ``route_localnet`` on there for hostPorts on 127.0.0.1,
        which would also let a pod's packets reach the host's loopback services."""
        target = self.service_target()
        if target is not None and os.geteuid() == 0 and target[0].available():
            firewall, bridge = target
            await firewall.guard_localnet(bridge=bridge)

    async def unguard_localnet(self) -> None:
        target = self.service_target()
        if target is not None and target[0].available():
            firewall, bridge = target
            await firewall.unguard_localnet(bridge=bridge)

    async def _know_engine(self) -> None:
        if self.config.engine_id is not None and not self.engine:
            self.engine = await self.config.engine_id()

    async def status(self) -> tuple[bool, str]:
        """Ready when every plugin is installed and, where supported, answers ``STATUS``."""
        try:
            network = await anyio.to_thread.run_sync(lambda: self.network)
        except errors.NetworkError as e:
            return False, str(e)
        for plugin in network.plugins:
            if self._find(str(plugin["type"])) is None:
                dirs = ":".join(str(d) for d in self.config.plugin_dirs)
                return False, f"CNI plugin {plugin['type']!r} not found in {dirs}"
        for plugin in network.plugins:
            if not await self.speaks_gc(network, plugin):
                continue
            conf = self.plugin_conf(network, plugin, prev=None, capability_args={})
            try:
                await self._exec(conf, command="STATUS")
            except errors.NetworkError as e:
                return False, str(e)
        return True, ""

    async def plugin_versions(self, kind: str) -> tuple[str, ...]:
        """The CNI versions a plugin binary supports (its ``VERSION`` answer), asked once
        per binary (and again when the file changes); empty when it cannot say."""
        binary = self._find(kind)
        if binary is None:
            return ()
        try:
            key = (str(binary), binary.stat().st_mtime_ns)
        except OSError:
            return ()
        if key not in self._versions:
            env = plugin_environment(command="VERSION", plugin_dirs=self.config.plugin_dirs)
            stdin = json.dumps({"cniVersion": self.network.cni_version}).encode()
            found: tuple[str, ...] = ()
            try:
                with anyio.fail_after(self.config.timeout):
                    code, out, _ = await _run_plugin(binary, stdin=stdin, env=env)
                doc = json.loads(out) if code == 0 else {}
                versions = doc.get("supportedVersions") if isinstance(doc, dict) else None
                if isinstance(versions, list):
                    found = tuple(str(v) for v in versions)
            except (OSError, ValueError, TimeoutError) as e:
                logger.debug("cni: {} VERSION: {}", kind, e)
            self._versions[key] = found
        return self._versions[key]

    async def speaks_gc(self, network: NetworkConfigList, plugin: Mapping[str, Any]) -> bool:
        """Whether ``STATUS`` and ``GC`` may go to this plugin of this list."""
        if version_tuple(network.cni_version) < version_tuple(GC_VERSION):
            return False
        return supports_gc(network.cni_version, await self.plugin_versions(str(plugin["type"])))

    # -- the cache ------------------------------------------------------------------------

    def _cache_path(self, network: str, sandbox_id: str) -> Path:
        return self.config.cache_dir / "results" / f"{network}-{sandbox_id}-{self.config.ifname}"

    def _write_cache(self, path: Path, entry: Mapping[str, Any]) -> None:
        private_dir(self.config.cache_dir.parent, path.parent)
        write_private(path, json.dumps(entry))

    def _entries(self) -> Iterator[tuple[Path, dict[str, Any]]]:
        """Every whole cache entry that names its container (hidden files are half-written
        ones; unreadable entries are skipped)."""
        folder = self.config.cache_dir / "results"
        if not folder.is_dir():
            return
        for path in folder.iterdir():
            if path.name.startswith("."):
                continue
            try:
                entry = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
            if isinstance(entry, dict) and isinstance(entry.get("containerId"), str):
                yield path, entry

    def _cached(self, sandbox_id: str) -> list[tuple[Path, dict[str, Any]]]:
        return [(p, e) for p, e in self._entries() if e["containerId"] == sandbox_id]

    def cached_sandboxes(self) -> set[str]:
        return set(self.cached_owners())

    def cached_owners(self) -> dict[str, str]:
        """sandbox id -> engine of every cached attachment (empty engine: a half-written
        entry, or one written before engines were recorded)."""
        owners: dict[str, str] = {}
        folder = self.config.cache_dir / "results"
        if folder.is_dir():
            for path in folder.glob(".*"):
                half_written = _TMP_ID.search(path.name)
                if half_written:
                    owners.setdefault(half_written.group(1), "")
        for _, entry in self._entries():
            owners[entry["containerId"]] = str(entry.get(_ENGINE_KEY) or "")
        return owners

    def _attachments(self) -> list[tuple[str, str, str]]:
        """(container id, interface, network name) of every whole cache entry."""
        return [
            (
                entry["containerId"],
                str(entry.get("ifName") or self.config.ifname),
                str(entry.get("networkName") or ""),
            )
            for _, entry in self._entries()
        ]

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
        sandbox_id: str = "",
        netns: str = "",
        cni_args: str = "",
    ) -> dict[str, Any] | None:
        kind = str(plugin["type"])
        binary = self._find(kind)
        if binary is None:
            dirs = ":".join(str(d) for d in self.config.plugin_dirs)
            raise errors.NetworkError(f"CNI plugin {kind!r} not found in {dirs}")
        env = plugin_environment(
            command=command,
            plugin_dirs=self.config.plugin_dirs,
            sandbox_id=sandbox_id,
            netns=netns,
            ifname=self.config.ifname,
            cni_args=cni_args,
            path=os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin"),
        )
        stdin = json.dumps(plugin).encode()
        try:
            with anyio.fail_after(self.config.timeout):
                code, raw, stderr = await _run_plugin(binary, stdin=stdin, env=env)
        except TimeoutError as e:
            raise errors.NetworkError(f"CNI plugin {kind} {command} timed out") from e
        except OSError as e:
            raise errors.NetworkError(f"CNI plugin {kind} {command}: {e}") from e
        out = raw.decode(errors="replace").strip()
        if code != 0:
            raise errors.NetworkError(_plugin_error(kind, command, out, stderr))
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
    def plugin_conf(
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
        await self._know_engine()
        args = cni_args(request)
        path = self._cache_path(network.name, sid)
        entry: dict[str, Any] = {
            "kind": "cniCacheV1",
            "containerId": sid,
            "config": base64.b64encode(network.raw).decode(),
            "ifName": self.config.ifname,
            "networkName": network.name,
            "netns": request.netns_path,
            "cniArgs": [kv.split("=", 1) for kv in args.split(";")],
            "capabilityArgs": capability_args(request),
            "result": None,
            _ENGINE_KEY: self.engine,
        }
        await anyio.to_thread.run_sync(self._write_cache, path, entry)
        try:
            prev: dict[str, Any] | None = None
            for plugin in network.plugins:
                conf = self.plugin_conf(
                    network, plugin, prev=prev, capability_args=entry["capabilityArgs"]
                )
                result = await self._exec(
                    conf, command="ADD", sandbox_id=sid, netns=request.netns_path, cni_args=args
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
            if version_tuple(network.cni_version) < (0, 4, 0):
                continue
            for plugin in network.plugins:
                conf = self.plugin_conf(
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
                    conf = self.plugin_conf(
                        network,
                        plugin,
                        prev=prev if version_tuple(network.cni_version) >= (0, 4, 0) else None,
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
        their comment and removed here, for IPv4 and IPv6 (a dual-stack list)."""
        tag = f'id: "{sandbox_id}"'
        for tables in (IPTables(), IPTables(binary="ip6tables")):
            if not tables.available():
                continue
            for rule in await tables.rules("POSTROUTING", table="nat"):
                if not any(tag in word for word in rule):
                    continue
                await tables.delete_rule("POSTROUTING", rule, table="nat")
                target = rule[rule.index("-j") + 1] if "-j" in rule else ""
                if target.startswith("CNI-"):
                    await tables.delete_chain(target, table="nat")

    async def get_pod_network_status(self, *, sandbox_id: str) -> PodNetwork | None:
        for _, entry in await anyio.to_thread.run_sync(self._cached, sandbox_id):
            if entry.get("result"):
                return PodNetwork(ips=_ips(entry["result"]))
        return PodNetwork()

    def _is_mine(self, engine: str) -> bool:
        """Whether an entry made for ``engine`` is this agent's to judge (one made before
        engines were recorded, or with no engine known, is anyone's)."""
        return not engine or not self.engine or engine == self.engine

    async def sweep(self) -> list[str]:
        """DEL every cached attachment of this agent's engine whose sandbox no longer runs,
        then GC where supported; returns the ids DELeted."""
        check = self.config.sandbox_exists
        if check is None:
            return []
        await self._know_engine()
        gone = []
        owners = await anyio.to_thread.run_sync(self.cached_owners)
        for sid in sorted(owners):
            if self._is_mine(owners[sid]) and not await check(sid):
                await self.teardown_pod(sandbox_id=sid)
                gone.append(sid)
        await self.gc()
        return gone

    async def gc(self) -> list[str]:
        """CNI ``GC`` of the list to every plugin that supports it, with the attachments
        the cache still holds (this engine's live ones and every other engine's) as the
        valid ones; returns the plugin types it went to. A failure is logged, not raised:
        the sweep's DELs have already released what the cache knew."""
        network = await anyio.to_thread.run_sync(lambda: self.network)
        targets = [p for p in network.plugins if await self.speaks_gc(network, p)]
        if not targets:
            return []
        valid = sorted(
            (cid, ifname)
            for cid, ifname, name in await anyio.to_thread.run_sync(self._attachments)
            if name == network.name
        )
        done = []
        for plugin in targets:
            try:
                await self._exec(gc_config(network, plugin, valid=valid), command="GC")
            except errors.NetworkError as e:
                logger.warning("cni: GC: {}", e)
                continue
            done.append(str(plugin["type"]))
        return done


__all__ = [
    "DEFAULT_CACHE_DIR",
    "DEFAULT_CONF_DIR",
    "DEFAULT_PLUGIN_DIRS",
    "GC_VERSION",
    "PROJECT_CONF_DIR",
    "VALID_ATTACHMENTS",
    "CNIConfig",
    "CNIPlugin",
    "NetworkConfigList",
    "gc_config",
    "load_config",
    "parse_config",
    "supports_gc",
]
