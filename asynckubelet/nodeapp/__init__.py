"""The node as one object: :class:`Node` over a :class:`NodeConfig`, the composition root
that ``run``, ``serve``, cluster mode and embedders share."""

from asynckubelet.nodeapp.config import (
    HTTPEndpoint,
    KubeAPIEndpoint,
    NetworkConfig,
    NodeConfig,
    ServicesConfig,
)
from asynckubelet.nodeapp.node import Node

__all__ = [
    "HTTPEndpoint",
    "KubeAPIEndpoint",
    "NetworkConfig",
    "Node",
    "NodeConfig",
    "ServicesConfig",
]
