"""The ``asynckubelet`` command line (see :mod:`asynckubelet.cli.app` for its tree)."""

from asynckubelet.cli.app import app, main

__all__ = ["app", "main"]
