"""The node's API, server side and client side in one package.

The server side answers Kubernetes-shaped paths (``/api/v1/namespaces/{ns}/pods``,
``Status`` errors, ``Table``s): :mod:`~asynckubelet.api.localapi` on the state dir's unix
socket, :mod:`~asynckubelet.api.server` (health and metrics only) on TCP, and
:mod:`~asynckubelet.api.endpoints`, the handlers both share with the kubelet API of
cluster mode. The client side (:mod:`~asynckubelet.api.client`) speaks that wire format
to a running daemon. Importing this package loads neither side.
"""
