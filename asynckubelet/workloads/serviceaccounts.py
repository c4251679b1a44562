"""The ``default`` ServiceAccount of every namespace, as the controller manager's
service-account controller keeps it: made in each namespace that has none (``default``
and every stored Namespace), made again when deleted, and removed with its namespace.

Only the accounts this controller made go with a namespace that is gone; one a client
applied (its own ``default``, with ``imagePullSecrets`` say) replaces the made one and is
the client's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

NAME = "default"
"""The account every namespace gets."""


@dataclass(frozen=True)
class Accounts:
    """What the pass decides: the accounts to make (their bodies) and the namespaces whose
    made account goes."""

    make: tuple[dict[str, Any], ...]
    remove: tuple[str, ...]


def decide(namespaces: Iterable[str], accounts: Iterable[tuple[str, str, bool]]) -> Accounts:
    """``namespaces``: the names of the namespaces that exist (not being deleted);
    ``accounts``: each stored ServiceAccount as ``(namespace, name, made here)``."""
    existing = set(namespaces) | {"default"}
    having = {ns for ns, name, _ in accounts if name == NAME}
    make = tuple(body(ns) for ns in sorted(existing - having))
    remove = tuple(
        sorted(ns for ns, name, made in accounts if name == NAME and made and ns not in existing)
    )
    return Accounts(make=make, remove=remove)


def body(namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": NAME, "namespace": namespace},
    }


def terminating(meta: Mapping[str, Any]) -> bool:
    return bool(meta.get("deletionTimestamp"))


__all__ = ["NAME", "Accounts", "body", "decide", "terminating"]
