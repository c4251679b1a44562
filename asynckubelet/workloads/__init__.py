"""Local controllers: what a control plane does for a whole app, done on the node itself.

They read the node's objects and pods, and make what a cluster's controllers make: pods
handed to the node like any source's, Service endpoints and the rules that send a
ClusterIP's traffic to them, and the cluster DNS that names them.
"""
