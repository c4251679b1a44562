"""What a foreground run hands its pod workers beside the pods: each pod's ConfigMaps,
Secrets and pull secrets from the same files (:class:`RunOptions`), and how each pod's
run ended (:class:`PodOutcome`)."""

from __future__ import annotations

import base64
from dataclasses import dataclass, field

from lightkube.models.core_v1 import Pod, PodStatus

from asynckubelet.manifests import Manifests
from asynckubelet.runtime.env import PodContext


@dataclass
class PodOutcome:
    """How a pod's run ended."""

    pod: Pod
    status: PodStatus | None = None
    exit_code: int = 0
    """The first non-zero exit code among the pod's containers (by finish time), else 0."""
    stopped: bool = False
    """True when the run was stopped (signal, cancel) before the pod reached a terminal phase."""
    error: str = ""

    @property
    def phase(self) -> str:
        return (self.status.phase if self.status else None) or "Unknown"


@dataclass
class RunOptions:
    keep: bool = False
    """Leave the pod's containers on Docker after the run."""
    grace_period: float | None = None
    contexts: dict[str, PodContext] = field(default_factory=dict)
    """Per pod uid: ConfigMaps, Secrets and addresses the pod's env may refer to."""
    pull_secrets: dict[str, list[tuple[str, dict[str, bytes]]]] = field(default_factory=dict)


def pod_context(manifests: Manifests, pod: Pod, *, node_name: str) -> PodContext:
    """The ConfigMaps and Secrets of the pod's namespace, for its environment and volumes."""
    ns = (pod.metadata.namespace if pod.metadata else None) or "default"
    configmaps: dict[str, dict[str, str]] = {}
    binary: dict[str, dict[str, bytes]] = {}
    for cm in manifests.configmaps:
        if cm.metadata is not None and (cm.metadata.namespace or "default") == ns:
            configmaps[cm.metadata.name or ""] = dict(cm.data or {})
            binary[cm.metadata.name or ""] = {
                k: base64.b64decode(v) for k, v in (cm.binaryData or {}).items()
            }
    secrets = {name: dict(data) for (sns, name), data in manifests.secret_data.items() if sns == ns}
    return PodContext(
        node_name=node_name, configmaps=configmaps, binary_configmaps=binary, secrets=secrets
    )


def pull_secrets(manifests: Manifests, pod: Pod) -> list[tuple[str, dict[str, bytes]]]:
    """``(type, data)`` of the pod's ``imagePullSecrets`` found among the manifests."""
    ns = (pod.metadata.namespace if pod.metadata else None) or "default"
    types = {
        ((s.metadata.namespace or "default"), s.metadata.name or ""): s.type or "Opaque"
        for s in manifests.secrets
        if s.metadata is not None
    }
    found = []
    for ref in (pod.spec.imagePullSecrets if pod.spec else None) or []:
        key = (ns, ref.name or "")
        if key in manifests.secret_data:
            found.append((types.get(key, "Opaque"), dict(manifests.secret_data[key])))
    return found


def options_from_manifests(
    manifests: Manifests,
    *,
    node_name: str,
    keep: bool = False,
    grace_period: float | None = None,
) -> RunOptions:
    """Run options carrying each pod's ConfigMaps, Secrets and pull secrets."""
    options = RunOptions(keep=keep, grace_period=grace_period)
    for pod in manifests.pods:
        uid = (pod.metadata.uid if pod.metadata else None) or ""
        options.contexts[uid] = pod_context(manifests, pod, node_name=node_name)
        options.pull_secrets[uid] = pull_secrets(manifests, pod)
    return options


__all__ = ["PodOutcome", "RunOptions", "options_from_manifests", "pod_context", "pull_secrets"]
