"""The Kubernetes API on the node: TLS with a CA of its own and a kubeconfig
(:mod:`~asynckubelet.api.kube.pki`), discovery, and the reads of the kinds it keeps,
answered by the local API's handlers (:mod:`~asynckubelet.api.kube.server`)."""
