"""The nftables adapter: the same pod egress masquerade, forwarding and hostPort DNAT as
:mod:`asynckubelet.network.iptables`, for hosts that run nftables rather than iptables.

Everything lives in one table of our own per bridge and family (``table ip akl_<bridge>``,
``table ip6 akl_<bridge>``): NAT base chains for postrouting (egress masquerade, the
masquerade of DNATed traffic from 127.0.0.1, which ``route_localnet`` lets reach the
bridge, and hairpin masquerade), prerouting and output (to local addresses: the
``hostports`` chain), a forward base chain accepting the bridge's traffic, an input base
chain holding the kubelet's loopback guard (CVE-2020-8558: what the bridge sends to
127.0.0.0/8 from elsewhere is dropped unless it belongs to a connection the node made or
DNATed, since ``route_localnet`` would let it in), and per pod a chain
``pod_<sandbox id>`` of its DNAT rules reached by one jump from ``hostports``. Removing a
pod is deleting its jump and chain; removing the network is deleting the table. Every
change is one ``nft -f -`` batch, applied atomically; handles are read with ``nft -j list``.

One thing an own table cannot do: an ``accept`` in our forward chain ends the packet's
walk through our chain only, and another base chain on the same hook still sees it. Docker
sets the policy of iptables' ``FORWARD`` chain (with iptables-nft: ``ip filter FORWARD``)
to ``drop``, and with ``net.bridge.bridge-nf-call-iptables=1`` even traffic between two
ports of our bridge passes that chain (``ip6 filter FORWARD`` likewise for IPv6). So when
that chain exists, our bridge's two accept
rules are also inserted at its head, each with the comment ``akl:<bridge>``, and removing
the network deletes exactly the rules carrying that comment (found by handle), nothing else.

Handles are read before a batch that deletes by handle; agents sharing one bridge may race
on them, so such a batch is built afresh and retried when it fails. A failing command
becomes a :class:`~asynckubelet.errors.NetworkError` carrying nft's own
message. Commands run as anyio subprocesses, never blocking the event loop.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import anyio

from asynckubelet import errors
from asynckubelet.network.firewall import DNAT, Firewall, ServiceRule, checked_sandbox_id

FAMILIES = ("ip", "ip6")
LOCALNET_COMMENT = "block incoming localnet connections"


def table_name(bridge: str) -> str:
    return "akl_" + re.sub(r"[^A-Za-z0-9_]", "_", bridge)


def pod_chain(sandbox_id: str) -> str:
    return f"pod_{sandbox_id[:16]}"


SERVICE_CHAINS = ("svc_", "sep_")


def service_chain(rule: ServiceRule) -> str:
    """One Service port's chain (its random pick among endpoints)."""
    key = f"{rule.name}/{rule.protocol.upper()}".encode()
    return "svc_" + hashlib.sha256(key).hexdigest()[:16]


def endpoint_chain(rule: ServiceRule, index: int) -> str:
    """The chain DNATing to one endpoint of a Service port."""
    ip, port = rule.endpoints[index]
    key = f"{rule.name}/{rule.protocol.upper()}/{ip}:{port}".encode()
    return "sep_" + hashlib.sha256(key).hexdigest()[:16]


def owner_comment(bridge: str) -> str:
    """The comment marking our rules in a chain that is not ours (``ip filter FORWARD``)."""
    return f"akl:{bridge}"


def _quote(name: str) -> str:
    return '"' + name.replace('"', "") + '"'


class NFTables(Firewall):
    """Runs ``nft`` (``binary``) for one address family (``ip`` or ``ip6``)."""

    def __init__(self, *, family: str = "ip", binary: str = "nft") -> None:
        if family not in FAMILIES:
            raise errors.NetworkError(f"nftables family must be ip or ip6, not {family!r}")
        self.family = family
        self.binary = binary
        self._nat: bool | None = None

    @property
    def _addr(self) -> str:
        return "ip6" if self.family == "ip6" else "ip"

    def available(self) -> bool:
        return shutil.which(self.binary) is not None

    async def nat_supported(self) -> bool:
        """Whether the kernel takes this family's NAT chains (checked with ``nft -c``)."""
        if self._nat is None:
            probe = f"akl_probe_{self.family}"
            script = (
                f"add table {self.family} {probe}\n"
                f"add chain {self.family} {probe} p "
                "{ type nat hook postrouting priority srcnat; }\n"
            )
            try:
                proc = await anyio.run_process(
                    [self.binary, "-c", "-f", "-"], input=script.encode(), check=False
                )
            except OSError:
                return False
            self._nat = proc.returncode == 0
        return self._nat

    async def apply(self, script: str) -> None:
        """Apply ``script`` as one atomic ``nft -f -`` batch."""
        try:
            proc = await anyio.run_process(
                [self.binary, "-f", "-"], input=script.encode(), check=False
            )
        except OSError as e:
            raise errors.NetworkError(f"cannot run {self.binary}: {e}") from e
        if proc.returncode != 0:
            text = proc.stderr.decode(errors="replace").strip()
            raise errors.NetworkError(f"nft -f: {text}")

    async def list_json(self, *what: str) -> list[dict[str, Any]] | None:
        """The objects of ``nft -j list WHAT``; None when it does not exist."""
        argv = [self.binary, "-j", "list", *what]
        try:
            proc = await anyio.run_process(argv, check=False)
        except OSError as e:
            raise errors.NetworkError(f"cannot run {self.binary}: {e}") from e
        if proc.returncode != 0:
            text = proc.stderr.decode(errors="replace")
            if "No such file or directory" in text:
                return None
            raise errors.NetworkError(f"nft -j list {' '.join(what)}: {text.strip()}")
        try:
            items = json.loads(proc.stdout or b"{}").get("nftables", [])
        except ValueError as e:
            raise errors.NetworkError(f"nft -j list {' '.join(what)}: bad JSON: {e}") from e
        return [item for item in items if isinstance(item, dict)]

    async def apply_fresh(self, build: Callable[[], Awaitable[str]], *, attempts: int = 3) -> None:
        """Apply the batch ``build`` makes from what is there now; rebuilt and retried when
        another writer changed the handles it names in between."""
        for attempt in range(attempts):
            script = await build()
            if not script:
                return
            try:
                await self.apply(script)
                return
            except errors.NetworkError:
                if attempt == attempts - 1:
                    raise

    # -- the node network ---------------------------------------------------------------

    def network_script(self, *, bridge: str, subnet: str, masquerade: bool, nat: bool) -> str:
        """The batch making our table (idempotent: base chains are flushed and refilled,
        pod chains and ``hostports`` are left as they are)."""
        t = f"{self.family} {table_name(bridge)}"
        br = _quote(bridge)
        a = self._addr
        lines = [
            f"add table {t}",
            f"add chain {t} forward {{ type filter hook forward priority filter; }}",
            f"flush chain {t} forward",
            f"add rule {t} forward iifname {br} accept",
            f"add rule {t} forward oifname {br} accept",
        ]
        if self.family == "ip":
            lines += [
                f"add chain {t} input {{ type filter hook input priority filter; }}",
                f"flush chain {t} input",
                f"add rule {t} input iifname {br} ip daddr 127.0.0.0/8 "
                "ip saddr != 127.0.0.0/8 ct state != { established, related } "
                f"ct status & dnat == 0 counter drop comment {_quote(LOCALNET_COMMENT)}",
            ]
        if nat:
            lines += [
                f"add chain {t} postrouting {{ type nat hook postrouting priority srcnat; }}",
                f"add chain {t} prerouting {{ type nat hook prerouting priority dstnat; }}",
                f"add chain {t} output {{ type nat hook output priority -100; }}",
                f"add chain {t} hostports",
                f"flush chain {t} postrouting",
                f"flush chain {t} prerouting",
                f"flush chain {t} output",
            ]
            if masquerade:
                lines.append(
                    f"add rule {t} postrouting {a} saddr {subnet} {a} daddr != {subnet} "
                    f"oifname != {br} masquerade"
                )
            if self.family == "ip":
                lines.append(
                    f"add rule {t} postrouting ip saddr 127.0.0.0/8 oifname {br} masquerade"
                )
            lines += [
                f"add rule {t} postrouting {a} saddr {subnet} oifname {br} "
                "ct status dnat masquerade",
                f"add rule {t} prerouting fib daddr type local jump hostports",
                f"add rule {t} output fib daddr type local jump hostports",
            ]
            if self.family == "ip":
                lines += [
                    f"add chain {t} services",
                    f"add rule {t} prerouting jump services",
                    f"add rule {t} output jump services",
                ]
        return "\n".join(lines) + "\n"

    async def _foreign_forward(self, bridge: str) -> tuple[bool, list[int]]:
        """Whether ``<family> filter FORWARD`` exists, and the handles of our rules in it."""
        items = await self.list_json("chain", self.family, "filter", "FORWARD")
        if items is None:
            return False, []
        mark = owner_comment(bridge)
        handles = [
            int(item["rule"]["handle"])
            for item in items
            if "rule" in item and item["rule"].get("comment") == mark
        ]
        return True, handles

    async def setup_network(
        self, *, bridge: str, subnet: str, masquerade: bool, nat: bool = True
    ) -> None:
        """Our table for the bridge, and our accepts in a ``filter FORWARD`` that exists."""

        async def build() -> str:
            script = self.network_script(
                bridge=bridge, subnet=subnet, masquerade=masquerade, nat=nat
            )
            exists, ours = await self._foreign_forward(bridge)
            if exists:
                chain = f"{self.family} filter FORWARD"
                mark = _quote(owner_comment(bridge))
                br = _quote(bridge)
                script += "".join(f"delete rule {chain} handle {h}\n" for h in ours)
                script += f"insert rule {chain} oifname {br} counter accept comment {mark}\n"
                script += f"insert rule {chain} iifname {br} counter accept comment {mark}\n"
            return script

        await self.apply_fresh(build)

    async def remove_network(self, *, bridge: str) -> None:
        async def build() -> str:
            script = ""
            if await self.list_json("table", self.family, table_name(bridge)) is not None:
                script += f"delete table {self.family} {table_name(bridge)}\n"
            _, ours = await self._foreign_forward(bridge)
            chain = f"{self.family} filter FORWARD"
            return script + "".join(f"delete rule {chain} handle {h}\n" for h in ours)

        await self.apply_fresh(build)

    # -- one pod ---------------------------------------------------------------------------

    def hostports_script(
        self, *, bridge: str, sandbox_id: str, maps: Sequence[DNAT], stale: Sequence[int] = ()
    ) -> str:
        """The batch giving the pod its DNAT chain and the jump to it; ``stale``: handles of
        jumps to a chain of the same name left by an earlier attempt."""
        t = f"{self.family} {table_name(bridge)}"
        chain = pod_chain(checked_sandbox_id(sandbox_id))
        if not all(isinstance(m, DNAT) for m in maps):
            raise errors.NetworkError("hostPort rules must be DNAT records")
        lines = [f"delete rule {t} hostports handle {int(h)}" for h in stale]
        lines += [f"add chain {t} {chain}", f"flush chain {t} {chain}"]
        for m in maps:
            match = ""
            if m.host_ip and m.host_ip not in ("0.0.0.0", "::"):  # noqa: S104  (compares a hostIP with the wildcard; binds nothing)
                match = f"{self._addr} daddr {m.host_ip} "
            proto = m.protocol.lower()
            lines.append(
                f"add rule {t} {chain} {match}{proto} dport {m.host_port} dnat to {m.destination()}"
            )
        lines.append(f"add rule {t} hostports jump {chain}")
        return "\n".join(lines) + "\n"

    async def _pod_state(self, bridge: str, sandbox_id: str) -> tuple[bool, bool, list[int]]:
        """Whether our table and the pod's chain exist, and the handles of jumps to it."""
        items = await self.list_json("table", self.family, table_name(bridge))
        if items is None:
            return False, False, []
        chain = pod_chain(sandbox_id)
        has_chain = any(item.get("chain", {}).get("name") == chain for item in items)
        jumps = [
            int(item["rule"]["handle"])
            for item in items
            if "rule" in item
            and item["rule"].get("chain") == "hostports"
            and any(e.get("jump", {}).get("target") == chain for e in item["rule"]["expr"])
        ]
        return True, has_chain, jumps

    async def add_hostports(self, *, bridge: str, sandbox_id: str, maps: Sequence[DNAT]) -> None:
        if not maps:
            return

        async def build() -> str:
            _, _, stale = await self._pod_state(bridge, sandbox_id)
            return self.hostports_script(
                bridge=bridge, sandbox_id=sandbox_id, maps=maps, stale=stale
            )

        await self.apply_fresh(build)

    async def remove_hostports(self, *, bridge: str, sandbox_id: str) -> None:
        t = f"{self.family} {table_name(bridge)}"
        chain = pod_chain(sandbox_id)

        async def build() -> str:
            table, has_chain, jumps = await self._pod_state(bridge, sandbox_id)
            if not table:
                return ""
            lines = [f"delete rule {t} hostports handle {h}" for h in jumps]
            if has_chain:
                lines += [f"flush chain {t} {chain}", f"delete chain {t} {chain}"]
            return "".join(line + "\n" for line in lines)

        await self.apply_fresh(build)

    # -- Services ---------------------------------------------------------------------------

    def services_script(
        self,
        *,
        bridge: str,
        rules: Sequence[ServiceRule],
        existing: Sequence[str] = (),
    ) -> str:
        """The batch making the ``services`` chain of ``bridge``'s table exactly ``rules``:
        ``services`` matches each ClusterIP, nodePort and published port and jumps to the
        port's ``svc_`` chain, which picks an endpoint's ``sep_`` chain with ``numgen
        random mod N vmap``; a ClusterIP without ready endpoints is rejected. Every chain
        is emptied and refilled, and the chains of Services gone (``existing`` names the
        ``svc_``/``sep_`` chains there now) are deleted, in the same transaction."""
        t = f"{self.family} {table_name(bridge)}"
        wanted: dict[str, list[str]] = {}
        top: list[str] = []
        for rule in rules:
            proto = rule.proto
            comment = f'comment "{rule.name}"'
            if not rule.endpoints:
                if rule.cluster_ip:
                    top.append(
                        f"ip daddr {rule.cluster_ip} {proto} dport {rule.port} reject {comment}"
                    )
                continue
            chain = service_chain(rule)
            picks = []
            for i, (ip, port) in enumerate(rule.endpoints):
                sep = endpoint_chain(rule, i)
                wanted[sep] = [f"meta l4proto {proto} dnat to {ip}:{port}"]
                picks.append(f"{i} : goto {sep}")
            wanted[chain] = [
                f"numgen random mod {len(picks)} vmap {{ {', '.join(picks)} }}"
                if len(picks) > 1
                else picks[0].split(" : ")[1]
            ]
            if rule.cluster_ip:
                top.append(
                    f"ip daddr {rule.cluster_ip} {proto} dport {rule.port} jump {chain} {comment}"
                )
            for port in (rule.node_port, rule.published_port):
                if port:
                    top.append(f"fib daddr type local {proto} dport {port} jump {chain} {comment}")
        lines = [f"add chain {t} services", f"flush chain {t} services"]
        gone = [c for c in dict.fromkeys(existing) if c not in wanted]
        for chain in [*wanted, *gone]:
            lines += [f"add chain {t} {chain}", f"flush chain {t} {chain}"]
        lines += [f"delete chain {t} {c}" for c in gone if c.startswith("svc_")]
        lines += [f"delete chain {t} {c}" for c in gone if not c.startswith("svc_")]
        for chain, body in wanted.items():
            lines += [f"add rule {t} {chain} {text}" for text in body]
        lines += [f"add rule {t} services {text}" for text in top]
        return "\n".join(lines) + "\n"

    async def sync_services(self, *, bridge: str, rules: Sequence[ServiceRule]) -> None:
        """One batch; the table and its hooks are the node network's
        (:meth:`setup_network` makes them before any Service is programmed)."""
        if self.family != "ip":
            return

        async def build() -> str:
            items = await self.list_json("table", self.family, table_name(bridge))
            if items is None:
                raise errors.NetworkError(
                    f"nftables table {self.family} {table_name(bridge)} does not exist; "
                    "the node network is not set up"
                )
            existing = [
                str(item["chain"]["name"])
                for item in items
                if "chain" in item and str(item["chain"].get("name", "")).startswith(SERVICE_CHAINS)
            ]
            return self.services_script(bridge=bridge, rules=rules, existing=existing)

        await self.apply_fresh(build)


__all__ = [
    "FAMILIES",
    "LOCALNET_COMMENT",
    "NFTables",
    "endpoint_chain",
    "owner_comment",
    "pod_chain",
    "service_chain",
    "table_name",
]
