"""The iptables adapter: pod egress masquerade, forwarding, hostPort DNAT and the loopback
guard.

Everything lives in chains of our own, named ``AKL-...`` after the node bridge or the
sandbox, reached from the built-in chains by one jump each; removing a pod or the node
network is deleting those jumps and chains, and a rule without our chain names is never
touched. Commands run as subprocesses (``iptables -w`` waits for the xtables lock other
tools hold), never blocking the event loop; a failing command becomes a
:class:`~asynckubelet.errors.NetworkError` carrying iptables' own message.
"""

from __future__ import annotations

import hashlib
import shlex
import shutil
import subprocess
from collections.abc import Sequence

import anyio

from asynckubelet import errors
from asynckubelet.network.firewall import (
    DNAT,
    Firewall,
    ServiceRule,
    checked_sandbox_id,
    probabilities,
)

_MISSING = (
    "No chain/target/match by that name",
    "does not exist",
    "Bad rule",
    "Chain already exists",
)


def forward_chain(bridge: str) -> str:
    return f"AKL-FWD-{bridge}"


def postrouting_chain(bridge: str) -> str:
    return f"AKL-POST-{bridge}"


def hostport_chain(bridge: str) -> str:
    return f"AKL-HP-{bridge}"


def pod_chain(sandbox_id: str) -> str:
    return f"AKLP-{sandbox_id[:16]}"


def localnet_chain(bridge: str) -> str:
    """The loopback guard of ``bridge`` (filter; from INPUT)."""
    return f"AKL-LNET-{bridge}"


LOCALNET_COMMENT = "block incoming localnet connections"
LOCALNET_DROP = (
    "-d",
    "127.0.0.0/8",
    "!",
    "-s",
    "127.0.0.0/8",
    "-m",
    "conntrack",
    "!",
    "--ctstate",
    "RELATED,ESTABLISHED,DNAT",
    "-m",
    "comment",
    "--comment",
    LOCALNET_COMMENT,
    "-j",
    "DROP",
)
"""The kubelet's rule for CVE-2020-8558: with ``route_localnet`` on, a packet to
127.0.0.0/8 that did not come from there is dropped, unless it belongs to a connection
the node made or DNATed (a hostPort or nodePort reached on 127.0.0.1, and its replies)."""


def services_chain(bridge: str) -> str:
    """Where every Service's traffic is matched (nat; from PREROUTING and OUTPUT)."""
    return f"AKL-SVCS-{bridge}"


def reject_chain(bridge: str) -> str:
    """Where traffic to a ClusterIP without ready endpoints is refused (filter)."""
    return f"AKL-SVRJ-{bridge}"


SERVICE_CHAIN_PREFIX = "AKL-SVC-"


def service_chain(bridge: str, rule: ServiceRule) -> str:
    """One Service port's chain: its endpoints, picked at random (kube-proxy's
    ``KUBE-SVC-<hash>``)."""
    key = f"{bridge}/{rule.name}/{rule.protocol.upper()}".encode()
    return SERVICE_CHAIN_PREFIX + hashlib.sha256(key).hexdigest()[:16].upper()


def services_restore(
    bridge: str, rules: Sequence[ServiceRule], *, stale: Sequence[str] = ()
) -> str:
    """``iptables-restore --noflush`` input making the Service chains of ``bridge`` exactly
    ``rules``: each chain named is declared (so emptied) and refilled, chains of Services
    gone (``stale``) are emptied and deleted, all in one transaction per table."""
    svcs, reject = services_chain(bridge), reject_chain(bridge)
    chains: dict[str, ServiceRule] = {}
    body: list[list[str]] = []
    refusals: list[list[str]] = []
    for rule in rules:
        match = ["-p", rule.proto]
        comment = ["-m", "comment", "--comment", rule.name]
        if not rule.endpoints:
            if rule.cluster_ip:
                refusals.append(
                    [
                        "-A",
                        reject,
                        "-d",
                        f"{rule.cluster_ip}/32",
                        *match,
                        "--dport",
                        str(rule.port),
                        *comment,
                        "-j",
                        "REJECT",
                    ]
                )
            continue
        chain = service_chain(bridge, rule)
        chains[chain] = rule
        if rule.cluster_ip:
            body.append(
                [
                    "-A",
                    svcs,
                    "-d",
                    f"{rule.cluster_ip}/32",
                    *match,
                    "--dport",
                    str(rule.port),
                    *comment,
                    "-j",
                    chain,
                ]
            )
    local = ["-m", "addrtype", "--dst-type", "LOCAL"]
    for chain, rule in chains.items():
        for port in (rule.node_port, rule.published_port):
            if port:
                body.append(
                    [
                        "-A",
                        svcs,
                        "-p",
                        rule.proto,
                        "--dport",
                        str(port),
                        *local,
                        "-m",
                        "comment",
                        "--comment",
                        rule.name,
                        "-j",
                        chain,
                    ]
                )
    for chain, rule in chains.items():
        odds = probabilities(len(rule.endpoints))
        for i, (ip, port) in enumerate(rule.endpoints):
            pick = []
            if i < len(odds):
                pick = ["-m", "statistic", "--mode", "random", "--probability", odds[i]]
            body.append(
                [
                    "-A",
                    chain,
                    "-p",
                    rule.proto,
                    *pick,
                    "-j",
                    "DNAT",
                    "--to-destination",
                    f"{ip}:{port}",
                ]
            )
    gone = [c for c in dict.fromkeys(stale) if c not in chains]
    lines = ["*nat", f":{svcs} - [0:0]"]
    lines += [f":{chain} - [0:0]" for chain in [*chains, *gone]]
    lines += [shlex.join(rule) for rule in body]
    lines += [f"-X {chain}" for chain in gone]
    lines += ["COMMIT", "*filter", f":{reject} - [0:0]"]
    lines += [shlex.join(rule) for rule in refusals]
    lines += ["COMMIT", ""]
    return "\n".join(lines)


class IPTables(Firewall):
    """Runs ``iptables`` (the binary found on PATH, or ``binary``; ``ip6tables`` for IPv6)."""

    def __init__(self, *, binary: str = "iptables") -> None:
        self.binary = binary
        self._nat: bool | None = None
        self._service_hooks: set[str] = set()

    def available(self) -> bool:
        return shutil.which(self.binary) is not None

    async def nat_supported(self) -> bool:
        """Whether the kernel has this family's ``nat`` table (IPv6 NAT is optional)."""
        if self._nat is None:
            argv = [self.binary, "-w", "5", "-t", "nat", "-S", "POSTROUTING"]
            try:
                proc = await anyio.run_process(argv, check=False, stdin=subprocess.DEVNULL)
            except OSError:
                return False
            self._nat = proc.returncode == 0
        return self._nat

    async def run(self, *args: str, table: str = "filter", check: bool = True) -> str:
        argv = [self.binary, "-w", "5", "-t", table, *args]
        try:
            proc = await anyio.run_process(argv, check=False, stdin=subprocess.DEVNULL)
        except OSError as e:
            raise errors.NetworkError(f"cannot run {self.binary}: {e}") from e
        if proc.returncode != 0 and check:
            text = proc.stderr.decode(errors="replace").strip()
            raise errors.NetworkError(f"{shlex.join(argv)}: {text}")
        return proc.stdout.decode(errors="replace")

    async def _quiet(self, *args: str, table: str) -> bool:
        """Run a command whose failure because the object is gone is fine; True if it ran."""
        argv = [self.binary, "-w", "5", "-t", table, *args]
        try:
            proc = await anyio.run_process(argv, check=False, stdin=subprocess.DEVNULL)
        except OSError as e:
            raise errors.NetworkError(f"cannot run {self.binary}: {e}") from e
        if proc.returncode == 0:
            return True
        text = proc.stderr.decode(errors="replace")
        if any(m in text for m in _MISSING):
            return False
        raise errors.NetworkError(f"{shlex.join(argv)}: {text.strip()}")

    async def ensure_chain(self, chain: str, *, table: str) -> None:
        await self._quiet("-N", chain, table=table)

    async def ensure_rule(self, chain: str, rule: Sequence[str], *, table: str) -> None:
        """Append ``rule`` to ``chain`` unless it is there already."""
        if await self._quiet("-C", chain, *rule, table=table):
            return
        await self.run("-A", chain, *rule, table=table)

    async def ensure_jump(
        self, chain: str, target: str, *, table: str, match: Sequence[str] = ()
    ) -> None:
        """Insert a jump to ``target`` at the head of ``chain`` unless it is there."""
        rule = [*match, "-j", target]
        if await self._quiet("-C", chain, *rule, table=table):
            return
        await self.run("-I", chain, "1", *rule, table=table)

    async def rules(self, chain: str, *, table: str) -> list[list[str]]:
        """The rules of ``chain`` as ``-A`` argument lists; empty when it does not exist."""
        argv = [self.binary, "-w", "5", "-t", table, "-S", chain]
        proc = await anyio.run_process(argv, check=False, stdin=subprocess.DEVNULL)
        if proc.returncode != 0:
            return []
        found = []
        for line in proc.stdout.decode().splitlines():
            words = shlex.split(line)
            if len(words) > 2 and words[0] == "-A":
                found.append(words[2:])
        return found

    async def chains(self, *, table: str) -> list[str]:
        argv = [self.binary, "-w", "5", "-t", table, "-S"]
        proc = await anyio.run_process(argv, check=False, stdin=subprocess.DEVNULL)
        return [
            line.split()[1]
            for line in proc.stdout.decode().splitlines()
            if line.startswith("-N ") and len(line.split()) > 1
        ]

    async def delete_rule(self, chain: str, rule: Sequence[str], *, table: str) -> None:
        await self._quiet("-D", chain, *rule, table=table)

    async def delete_jumps(self, chain: str, target: str, *, table: str) -> None:
        for rule in await self.rules(chain, table=table):
            if "-j" in rule and rule[rule.index("-j") + 1] == target:
                await self._quiet("-D", chain, *rule, table=table)

    async def delete_chain(self, chain: str, *, table: str) -> None:
        await self._quiet("-F", chain, table=table)
        await self._quiet("-X", chain, table=table)

    # -- the node network ---------------------------------------------------------------

    async def guard_localnet(self, *, bridge: str) -> None:
        """Drop what ``bridge`` sends to 127.0.0.0/8 from elsewhere (:data:`LOCALNET_DROP`),
        before ``route_localnet`` lets such packets in: one ``iptables-restore`` that
        makes and refills the chain, then the jump from the head of INPUT."""
        chain = localnet_chain(bridge)
        rule = ["-i", bridge, *LOCALNET_DROP]
        line = " ".join(f'"{w}"' if " " in w else w for w in ["-A", chain, *rule])
        text = "\n".join(["*filter", f":{chain} - [0:0]", line, "COMMIT", ""])
        if not await self.restore(text):
            await self.ensure_chain(chain, table="filter")
            await self.ensure_rule(chain, rule, table="filter")
        await self.ensure_jump("INPUT", chain, table="filter")

    async def unguard_localnet(self, *, bridge: str) -> None:
        await self.delete_jumps("INPUT", localnet_chain(bridge), table="filter")
        await self.delete_chain(localnet_chain(bridge), table="filter")

    async def setup_network(
        self, *, bridge: str, subnet: str, masquerade: bool, nat: bool = True
    ) -> None:
        """Forwarding for the bridge, and for IPv4 the loopback guard; with ``nat``, egress
        masquerade and the hostPort chain (``nat=False``: a kernel without this family's
        NAT table)."""
        if ":" not in subnet:
            await self.guard_localnet(bridge=bridge)
        fwd = forward_chain(bridge)
        await self.ensure_chain(fwd, table="filter")
        await self.ensure_rule(fwd, ["-i", bridge, "-j", "ACCEPT"], table="filter")
        await self.ensure_rule(fwd, ["-o", bridge, "-j", "ACCEPT"], table="filter")
        await self.ensure_jump("FORWARD", fwd, table="filter")
        if not nat:
            return

        post = postrouting_chain(bridge)
        await self.ensure_chain(post, table="nat")
        if masquerade:
            await self.ensure_rule(
                post, ["-s", subnet, "!", "-o", bridge, "-j", "MASQUERADE"], table="nat"
            )
        if ":" not in subnet:
            await self.ensure_rule(
                post, ["-s", "127.0.0.0/8", "-o", bridge, "-j", "MASQUERADE"], table="nat"
            )
        hairpin = ["-s", subnet, "-o", bridge, "-m", "conntrack", "--ctstate", "DNAT"]
        await self.ensure_rule(post, [*hairpin, "-j", "MASQUERADE"], table="nat")
        await self.ensure_jump("POSTROUTING", post, table="nat")

        hp = hostport_chain(bridge)
        await self.ensure_chain(hp, table="nat")
        local = ["-m", "addrtype", "--dst-type", "LOCAL"]
        await self.ensure_jump("PREROUTING", hp, table="nat", match=local)
        await self.ensure_jump("OUTPUT", hp, table="nat", match=local)

    async def remove_network(self, *, bridge: str) -> None:
        await self.remove_services(bridge=bridge)
        for table, builtin, chain in (
            ("filter", "FORWARD", forward_chain(bridge)),
            ("nat", "POSTROUTING", postrouting_chain(bridge)),
            ("nat", "PREROUTING", hostport_chain(bridge)),
            ("nat", "OUTPUT", hostport_chain(bridge)),
        ):
            await self.delete_jumps(builtin, chain, table=table)
        pods = [
            rule[rule.index("-j") + 1]
            for rule in await self.rules(hostport_chain(bridge), table="nat")
            if "-j" in rule and rule[rule.index("-j") + 1].startswith("AKLP-")
        ]
        await self._quiet("-F", hostport_chain(bridge), table="nat")
        for chain in pods:
            await self.delete_chain(chain, table="nat")
        for table, chain in (
            ("filter", forward_chain(bridge)),
            ("nat", postrouting_chain(bridge)),
            ("nat", hostport_chain(bridge)),
        ):
            await self.delete_chain(chain, table=table)
        await self.unguard_localnet(bridge=bridge)

    # -- one pod ---------------------------------------------------------------------------

    async def restore(self, text: str) -> bool:
        """Apply ``iptables-restore --noflush`` input as one transaction; False if refused."""
        binary = self.binary + "-restore"
        try:
            proc = await anyio.run_process(
                [binary, "-w", "5", "--noflush"], input=text.encode(), check=False
            )
        except OSError:
            return False
        return proc.returncode == 0

    async def add_hostports(self, *, bridge: str, sandbox_id: str, maps: Sequence[DNAT]) -> None:
        """The pod's DNAT chain and the jump to it, in one ``iptables-restore``."""
        if not maps:
            return
        chain = pod_chain(checked_sandbox_id(sandbox_id))
        rules = []
        for m in maps:
            rule = ["-p", m.protocol.lower(), "--dport", str(m.host_port)]
            if m.host_ip and m.host_ip not in ("0.0.0.0", "::"):  # noqa: S104  (compares a hostIP with the wildcard; binds nothing)
                rule = ["-d", m.host_ip, *rule]
            rule += ["-j", "DNAT", "--to-destination", m.destination()]
            rules.append(rule)
        await self.delete_jumps(hostport_chain(bridge), chain, table="nat")
        lines = ["*nat", f":{chain} - [0:0]"]
        lines += [shlex.join(["-A", chain, *rule]) for rule in rules]
        lines += [shlex.join(["-A", hostport_chain(bridge), "-j", chain]), "COMMIT", ""]
        if await self.restore("\n".join(lines)):
            return
        await self.ensure_chain(chain, table="nat")
        await self.run("-F", chain, table="nat")
        for rule in rules:
            await self.run("-A", chain, *rule, table="nat")
        await self.ensure_rule(hostport_chain(bridge), ["-j", chain], table="nat")

    async def remove_hostports(self, *, bridge: str, sandbox_id: str) -> None:
        """Remove the pod's jump and chain: one ``iptables-restore`` when both are there as
        made, else rule by rule (a half-made or half-removed state)."""
        chain = pod_chain(sandbox_id)
        fast = "\n".join(
            [
                "*nat",
                shlex.join(["-D", hostport_chain(bridge), "-j", chain]),
                f":{chain} - [0:0]",
                f"-X {chain}",
                "COMMIT",
                "",
            ]
        )
        if await self.restore(fast):
            return
        await self.delete_jumps(hostport_chain(bridge), chain, table="nat")
        await self.delete_chain(chain, table="nat")

    # -- Services ---------------------------------------------------------------------------

    async def _service_chains(self, bridge: str) -> list[str]:
        return [
            rule[rule.index("-j") + 1]
            for rule in await self.rules(services_chain(bridge), table="nat")
            if "-j" in rule and rule[rule.index("-j") + 1].startswith(SERVICE_CHAIN_PREFIX)
        ]

    async def sync_services(self, *, bridge: str, rules: Sequence[ServiceRule]) -> None:
        """One ``iptables-restore`` making the Service chains exactly ``rules``, then the
        jumps to them (PREROUTING and OUTPUT in nat, FORWARD and OUTPUT in filter) when
        this process has not made them yet."""
        text = services_restore(bridge, rules, stale=await self._service_chains(bridge))
        binary = self.binary + "-restore"
        try:
            proc = await anyio.run_process(
                [binary, "-w", "5", "--noflush"], input=text.encode(), check=False
            )
        except OSError as e:
            raise errors.NetworkError(f"cannot run {binary}: {e}") from e
        if proc.returncode != 0:
            detail = proc.stderr.decode(errors="replace").strip()
            raise errors.NetworkError(f"{binary}: Service rules refused: {detail}")
        if bridge in self._service_hooks:
            return
        for builtin in ("PREROUTING", "OUTPUT"):
            await self.ensure_jump(builtin, services_chain(bridge), table="nat")
        for builtin in ("FORWARD", "OUTPUT"):
            await self.ensure_jump(builtin, reject_chain(bridge), table="filter")
        self._service_hooks.add(bridge)

    async def remove_services(self, *, bridge: str) -> None:
        """The Service chains of ``bridge`` and the jumps to them, gone."""
        chains = await self._service_chains(bridge)
        for builtin in ("PREROUTING", "OUTPUT"):
            await self.delete_jumps(builtin, services_chain(bridge), table="nat")
        for builtin in ("FORWARD", "OUTPUT"):
            await self.delete_jumps(builtin, reject_chain(bridge), table="filter")
        await self.delete_chain(services_chain(bridge), table="nat")
        for chain in dict.fromkeys(chains):
            await self.delete_chain(chain, table="nat")
        await self.delete_chain(reject_chain(bridge), table="filter")
        self._service_hooks.discard(bridge)


__all__ = [
    "DNAT",
    "IPTables",
    "checked_sandbox_id",
    "forward_chain",
    "hostport_chain",
    "localnet_chain",
    "pod_chain",
    "postrouting_chain",
    "reject_chain",
    "service_chain",
    "services_chain",
    "services_restore",
]
