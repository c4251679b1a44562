"""What each pod worker of a node is given from the node's objects (mixed into
:class:`~asynckubelet.node.kubelet.Kubelet`): the ConfigMaps, Secrets and pull secrets of
its namespace and the Services' variables, whichever source brought them, and a new look
at once when they change (a pod waiting for a ConfigMap starts; mounted volumes are
rewritten)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from functools import partial
from typing import TYPE_CHECKING, Any

from lightkube.models.core_v1 import Pod

from asynckubelet.node.runoptions import RunOptions
from asynckubelet.runtime import containers as ctr
from asynckubelet.runtime.env import PodContext, service_environment

if TYPE_CHECKING:
    from asynckubelet.node.config import KubeletConfig
    from asynckubelet.node.foreground import WorkerEntry
    from asynckubelet.node.objects import ObjectStore


def _service_links(pod: Pod) -> bool:
    """``spec.enableServiceLinks``: true unless set false (the API server's default)."""
    return not (pod.spec is not None and pod.spec.enableServiceLinks is False)


class PodOptions:
    """The pods' options from the node's objects, over the kubelet's parts."""

    config: KubeletConfig
    objects: ObjectStore
    services: Callable[[], Iterable[Mapping[str, Any]]]
    _entries: dict[str, WorkerEntry]

    @property
    def node_name(self) -> str:
        raise NotImplementedError

    def _options(self, pod: Pod) -> RunOptions:
        """The pod's ConfigMaps, Secrets and pull secrets: those of its namespace, from
        whichever source they came."""
        _, ns, uid = ctr.pod_identity(pod)
        view = self.objects.view(ns)
        options = RunOptions()
        options.contexts[uid] = PodContext(
            node_name=self.node_name,
            host_ip=self.config.host_ips[0] if self.config.host_ips else "",
            configmaps=view.configmaps,
            binary_configmaps=view.binary_configmaps,
            secrets=view.secrets,
            service_env=partial(self._service_env, ns, _service_links(pod)),
        )
        refs = (pod.spec.imagePullSecrets if pod.spec else None) or []
        options.pull_secrets[uid] = [
            (view.secret_types[ref.name], dict(view.secrets[ref.name]))
            for ref in refs
            if ref.name is not None and ref.name in view.secrets
        ]
        return options

    def _stored_services(self) -> list[Mapping[str, Any]]:
        return [o.body for o in self.objects.list("Service")]

    def _service_env(self, namespace: str, enable_links: bool) -> dict[str, str]:
        return service_environment(self.services(), namespace=namespace, enable_links=enable_links)

    def _objects_changed(self, namespaces: frozenset[str]) -> None:
        """ConfigMaps or Secrets of these namespaces changed: their pods see the new ones
        and look again now (a pod waiting for one starts; mounted volumes are rewritten)."""
        for uid, entry in list(self._entries.items()):
            if entry.deleting or ctr.pod_identity(entry.worker.pod)[1] not in namespaces:
                continue
            options = self._options(entry.worker.pod)
            entry.worker.options.contexts[uid] = options.contexts[uid]
            entry.worker.options.pull_secrets[uid] = options.pull_secrets[uid]
            entry.worker.poke()


__all__ = ["PodOptions"]
