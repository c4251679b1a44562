"""The node's lower tier: the kubelet alone (sources, pod workers, PLEG, prober, status,
events), for a program that composes its own node. Most programs want
:class:`asynckubelet.Node`, which assembles it with the workload controllers, Services,
DNS and the node's API.

Names are imported on first use (:mod:`asynckubelet._lazy`).
"""

from __future__ import annotations

from asynckubelet import _lazy

TYPE_CHECKING = False
if TYPE_CHECKING:
    from asynckubelet.node.admission import NodeInfo as NodeInfo
    from asynckubelet.node.admission import NodeResources as NodeResources
    from asynckubelet.node.admission import Rejection as Rejection
    from asynckubelet.node.admission import Taint as Taint
    from asynckubelet.node.foreground import PodOutput as PodOutput
    from asynckubelet.node.kubelet import Kubelet as Kubelet
    from asynckubelet.node.objects import ObjectStore as ObjectStore
    from asynckubelet.node.runoptions import PodOutcome as PodOutcome

_PUBLIC: dict[str, tuple[str, str]] = {
    "Kubelet": ("asynckubelet.node.kubelet", "Kubelet"),
    "NodeInfo": ("asynckubelet.node.admission", "NodeInfo"),
    "NodeResources": ("asynckubelet.node.admission", "NodeResources"),
    "ObjectStore": ("asynckubelet.node.objects", "ObjectStore"),
    "PodOutcome": ("asynckubelet.node.runoptions", "PodOutcome"),
    "PodOutput": ("asynckubelet.node.foreground", "PodOutput"),
    "Rejection": ("asynckubelet.node.admission", "Rejection"),
    "Taint": ("asynckubelet.node.admission", "Taint"),
}
"""Public name -> (module, attribute): imported from there on first use."""

__all__ = sorted(_PUBLIC)
__getattr__, __dir__ = _lazy.exports(globals(), _PUBLIC)
