"""The upstream kubelet as a node of the test control plane, and what it leaves on the host.

``bench/vs_kubelet.py`` runs the kubelet Debian's Kubernetes source builds (v1.20.2, with
dockershim; ``integration/cluster/build.sh`` with ``ASYNCKUBELET_CLUSTER_PROGRAMS=kubelet``
puts it in the cluster cache, with the patch this machine needs in ``kubelet.patch``). Its
state goes to one directory wherever a flag allows (root, certificates, dockershim's
checkpoints and socket, volume plugins, the CNI configuration, cache and IPAM records); the
rest it writes to the host is undone afterwards by :class:`HostTrace`:

- the ``KUBE-*`` iptables chains (the canaries, ``KUBE-FIREWALL`` with its CVE-2020-8558
  drop rule, ``KUBE-MARK-*``, ``KUBE-POSTROUTING``) and the ``CNI-*`` chains of the bridge
  plugin's masquerade, in both address families, with the rules that jump to them;
- the kernel tunables it sets at start (``vm.overcommit_memory``, ``kernel.panic`` ...);
- its pod log directories and links (``/var/log/pods``, ``/var/log/containers``, fixed
  paths in 1.20) and the default directories it creates even when told to use others;
- the CNI bridge.

Only what was not there before the kubelet started is removed.
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from asynckubelet.docker.engine import unmount_below

TUNABLES = (
    "vm/overcommit_memory",
    "vm/panic_on_oom",
    "kernel/panic",
    "kernel/panic_on_oops",
    "kernel/keys/root_maxkeys",
    "kernel/keys/root_maxbytes",
    "net/ipv4/ip_forward",
)
"""What the kubelet's container manager (``setupKernelTunables``) and the CNI bridge plugin
(``isGateway``) write under ``/proc/sys``."""

FIXED_PATHS = (
    Path("/var/log/pods"),
    Path("/var/log/containers"),
    Path("/var/lib/kubelet"),
    Path("/var/lib/dockershim"),
    Path("/var/run/dockershim.sock"),
    Path("/var/lib/cni"),
    Path("/usr/libexec/kubernetes"),
)
"""Places the kubelet may create whatever its flags say; removed when they were absent."""

OWN_CHAIN_PREFIXES = ("KUBE-", "CNI-")
TABLES = ("filter", "nat", "mangle")
FAMILIES = ("iptables", "ip6tables")


def chains(rules: str) -> set[str]:
    """The user chains named by ``iptables -S`` output."""
    return {line.split()[1] for line in rules.splitlines() if line.startswith("-N ")}


def undo_commands(rules: str, before: set[str]) -> list[list[str]]:
    """The ``iptables -t T`` arguments that remove the ``KUBE-*``/``CNI-*`` chains of
    ``rules`` (``iptables -S`` output) absent from ``before``: first the rules of other
    chains that jump to them, then each chain flushed, then each deleted."""
    new = sorted(c for c in chains(rules) - before if c.startswith(OWN_CHAIN_PREFIXES))
    if not new:
        return []
    commands: list[list[str]] = []
    for line in rules.splitlines():
        if not line.startswith("-A "):
            continue
        words = shlex.split(line)
        target = words[words.index("-j") + 1] if "-j" in words[:-1] else None
        if words[1] not in new and target in new:
            commands.append(["-D", *words[1:]])
    commands += [["-F", c] for c in new]
    commands += [["-X", c] for c in new]
    return commands


def _rules(family: str, table: str) -> str:
    done = subprocess.run([family, "-w", "-t", table, "-S"], capture_output=True, text=True)
    return done.stdout if done.returncode == 0 else ""


@dataclass
class HostTrace:
    """What the host had before the kubelet ran, to undo what it adds."""

    chains: dict[tuple[str, str], set[str]] = field(default_factory=dict)
    tunables: dict[str, str] = field(default_factory=dict)
    absent: list[Path] = field(default_factory=list)

    @classmethod
    def take(cls) -> HostTrace:
        trace = cls()
        for family in FAMILIES:
            if shutil.which(family) is None:
                continue
            for table in TABLES:
                trace.chains[family, table] = chains(_rules(family, table))
        for name in TUNABLES:
            path = Path("/proc/sys") / name
            if path.exists():
                trace.tunables[name] = path.read_text().strip()
        trace.absent = [p for p in FIXED_PATHS if not p.exists() and not p.is_symlink()]
        return trace

    def undo(self, *, namespace: str) -> list[str]:
        """Undo what appeared since :meth:`take`; returns what was removed or restored."""
        done: list[str] = []
        for (family, table), before in self.chains.items():
            for args in undo_commands(_rules(family, table), before):
                subprocess.run([family, "-w", "-t", table, *args], capture_output=True)
                if args[0] == "-X":
                    done.append(f"{family} -t {table} chain {args[1]}")
        for name, value in self.tunables.items():
            path = Path("/proc/sys") / name
            if path.read_text().strip() != value:
                path.write_text(value + "\n")
                done.append(f"{name.replace('/', '.')} back to {value}")
        for folder, pattern in (
            (Path("/var/log/pods"), f"{namespace}_*"),
            (Path("/var/log/containers"), f"*_{namespace}_*"),
        ):
            if folder.is_dir():
                for path in folder.glob(pattern):
                    _remove(path)
                    done.append(str(path))
        for path in self.absent:
            if path.exists() or path.is_symlink():
                _remove(path)
                done.append(str(path))
        return done


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        unmount_below(path)
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def cni_config(*, name: str, bridge: str, subnet: str, ipam_dir: Path) -> str:
    """A CNI list with the bridge plugin (gateway, masquerade, hairpin) and host-local
    addresses, the shape of the agent's own bridge network; the kubelet adds loopback."""
    return json.dumps(
        {
            "cniVersion": "0.4.0",
            "name": name,
            "plugins": [
                {
                    "type": "bridge",
                    "bridge": bridge,
                    "isGateway": True,
                    "ipMasq": True,
                    "hairpinMode": True,
                    "ipam": {
                        "type": "host-local",
                        "ranges": [[{"subnet": subnet}]],
                        "routes": [{"dst": "0.0.0.0/0"}],
                        "dataDir": str(ipam_dir),
                    },
                }
            ],
        },
        indent=2,
    )


def kubelet_command(
    *,
    kubelet: Path,
    root: Path,
    node: str,
    kubeconfig: Path,
    docker_url: str,
    pause: str,
    port: int,
    api_qps: int,
) -> list[str]:
    """The kubelet's command line: dockershim on ``docker_url``, CNI from ``root/cni``,
    every state path under ``root``, its API on loopback only (its Node's address is the
    host's: 1.20 refuses a loopback ``--node-ip``; the bench never dials it); what this
    machine needs (no per-QoS cgroups, no node allocatable enforcement, its own
    oom_score_adj left at 0) and nothing else changed from upstream's defaults but the API
    QPS (burst twice it, as the defaults 5 and 10)."""
    return [
        str(kubelet),
        f"--kubeconfig={kubeconfig}",
        f"--hostname-override={node}",
        "--address=127.0.0.1",
        f"--port={port}",
        "--read-only-port=0",
        "--healthz-port=0",
        f"--root-dir={root / 'kubelet'}",
        f"--cert-dir={root / 'pki'}",
        f"--volume-plugin-dir={root / 'volume-plugins'}",
        "--container-runtime=docker",
        f"--docker-endpoint={docker_url}",
        f"--container-runtime-endpoint=unix://{root / 'dockershim.sock'}",
        f"--experimental-dockershim-root-directory={root / 'dockershim'}",
        f"--pod-infra-container-image={pause}",
        "--network-plugin=cni",
        "--cni-bin-dir=/usr/lib/cni",
        f"--cni-conf-dir={root / 'cni'}",
        f"--cni-cache-dir={root / 'cni-cache'}",
        "--cgroups-per-qos=false",
        "--enforce-node-allocatable=",
        "--cgroup-driver=cgroupfs",
        "--fail-swap-on=false",
        "--oom-score-adj=0",
        f"--kube-api-qps={api_qps}",
        f"--kube-api-burst={2 * api_qps}",
        "--v=1",
    ]
