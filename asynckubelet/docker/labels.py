"""The ownership mark on every Docker object the project makes.

Containers, volumes and networks carry the node's name under this label; an object
without it is never touched. The runtime (pods) and the network (the ``docker`` backend's
network) both make Docker objects, so the mark lives below both of them;
:mod:`asynckubelet.runtime.naming` names it with the rest of the pod labels.
"""

from __future__ import annotations

LABEL_NODE = "io.asynckubelet.node"
"""The ownership mark: the node name. Objects without it are never touched."""

__all__ = ["LABEL_NODE"]
