"""One module per verb, as kubectl's command tree (``run.py``, ``get.py``, ...).

A command parses and checks its options, calls the library (or, for the node's client
commands, reads the node's state dir and Docker) and renders the result. Modules import
the library inside the command, so ``asynckubelet --help`` loads none of it.
"""
