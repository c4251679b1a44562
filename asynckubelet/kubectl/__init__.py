"""kubectl's output: ``get``'s tables (and their ``-o wide`` columns), ``describe``'s pages,
the names of the kinds, and times as kubectl reads and shows them.

People read these outputs with years of kubectl habit, so the layouts are kubectl's. The
modules are pure functions of the objects and the node's records; the command line and
the node's API only fetch and print. The package imports nothing itself: ``tables`` and
``resources`` are plain Python, cheap enough for a ``get`` through the daemon.
"""
