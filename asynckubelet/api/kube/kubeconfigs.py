"""The node's kubeconfig, and its merge into a user's ``~/.kube/config``.

A kubeconfig is what every Kubernetes client reads, so the node writes one, as kind and
kubeadm do: ``<state dir>/kubeconfig``, pointing at the API's address, trusting the
node's CA and presenting the client certificate (:mod:`~asynckubelet.api.kube.pki`).
It holds the client's private key, so it is 0600, and it is written whole under a new
name and renamed over the old through :mod:`asynckubelet.hostfs`: a link planted there is
replaced, never followed. :func:`merge_kubeconfig` adds the node's cluster, user and
context to a user's kubeconfig the same way, keeping every other entry, and refuses one
that is a symbolic link rather than write through it (or replace the user's link).
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from asynckubelet import errors, hostfs
from asynckubelet.api.kube.pki import KEY_MODE, Credentials

KUBECONFIG = "kubeconfig"
"""The node's kubeconfig, in the state dir."""
CONTEXT = "asynckubelet"
"""The name of the cluster, user and context the kubeconfig holds."""
MAX_KUBECONFIG_BYTES = 4 * 1024 * 1024
"""A user's kubeconfig is read up to this size (larger is refused, not cut)."""


def kubeconfig(credentials: Credentials, *, server: str) -> dict[str, Any]:
    """A kubeconfig for ``server`` (``https://HOST:PORT``) holding the node's cluster,
    user and context, all named :data:`CONTEXT`, the context current."""
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [_cluster_entry(credentials, server)],
        "users": [_user_entry(credentials)],
        "contexts": [_context_entry()],
        "current-context": CONTEXT,
        "preferences": {},
    }


def write_kubeconfig(state: Path, config: Mapping[str, Any]) -> Path:
    """``<state>/kubeconfig``, replaced whole (0600: it holds the client key)."""
    try:
        hostfs.write_file(state, KUBECONFIG, _dump(config), mode=KEY_MODE)
    except OSError as e:
        raise errors.DaemonError(f"cannot write {state / KUBECONFIG}: {e}") from None
    return state / KUBECONFIG


def read_kubeconfig(directory: Path, name: str) -> dict[str, Any] | None:
    """The kubeconfig ``name`` in ``directory`` (None: there is none), read without
    following a link, bounded. :class:`~asynckubelet.errors.KubeconfigError` for a link, a
    file too large or one that is not a kubeconfig."""
    path = directory / name
    try:
        data = hostfs.read_file(directory, name, limit=MAX_KUBECONFIG_BYTES + 1)
    except FileNotFoundError:
        return None
    except OSError as e:
        link = path.is_symlink()
        why = "a symbolic link, which is not followed" if link else str(e)
        raise errors.KubeconfigError(f"kubeconfig {path}: {why}", path=str(path)) from None
    if len(data) > MAX_KUBECONFIG_BYTES:
        raise errors.KubeconfigError(
            f"kubeconfig {path}: larger than {MAX_KUBECONFIG_BYTES} bytes", path=str(path)
        )
    try:
        loaded = yaml.safe_load(data.decode("utf-8")) if data.strip() else {}
    except (UnicodeDecodeError, yaml.YAMLError) as e:
        raise errors.KubeconfigError(f"kubeconfig {path}: not YAML: {e}", path=str(path)) from None
    if loaded is None:
        loaded = {}
    if not isinstance(loaded, dict):
        raise errors.KubeconfigError(f"kubeconfig {path}: not a mapping", path=str(path))
    for key in ("clusters", "users", "contexts"):
        if not isinstance(loaded.get(key) or [], list):
            raise errors.KubeconfigError(f"kubeconfig {path}: {key} is not a list", path=str(path))
    return loaded


def merged(into: Mapping[str, Any], node: Mapping[str, Any]) -> dict[str, Any]:
    """``into`` with the cluster, user and context of ``node`` (a kubeconfig of
    :func:`kubeconfig`) in place of any of the same name; every other entry and setting
    kept. The current context is set only when there was none."""
    out = dict(into)
    out.setdefault("apiVersion", "v1")
    out.setdefault("kind", "Config")
    out.setdefault("preferences", {})
    for key in ("clusters", "users", "contexts"):
        theirs = [e for e in (out.get(key) or []) if not _named(e, CONTEXT)]
        ours = [e for e in node.get(key) or [] if _named(e, CONTEXT)]
        out[key] = [*theirs, *ours]
    if not out.get("current-context"):
        out["current-context"] = CONTEXT
    return out


def merge_kubeconfig(state: Path, *, home: Path) -> Path:
    """Add the node's cluster, user and context to ``~/.kube/config`` (made when missing,
    0600, written whole); returns its path."""
    node = read_kubeconfig(state, KUBECONFIG)
    if node is None:
        raise errors.KubeconfigError(
            f"no kubeconfig at {state / KUBECONFIG}: start the node with `asynckubelet serve`",
            path=str(state / KUBECONFIG),
        )
    directory = home / ".kube"
    path = directory / "config"
    mine = read_kubeconfig(directory, "config") or {}
    try:
        hostfs.write_file(directory, "config", _dump(merged(mine, node)), mode=KEY_MODE)
    except OSError as e:
        raise errors.KubeconfigError(f"kubeconfig {path}: {e}", path=str(path)) from None
    return path


def _named(entry: Any, name: str) -> bool:
    return isinstance(entry, dict) and entry.get("name") == name


def _cluster_entry(credentials: Credentials, server: str) -> dict[str, Any]:
    return {
        "name": CONTEXT,
        "cluster": {
            "server": server,
            "certificate-authority-data": _b64(credentials.ca_cert),
        },
    }


def _user_entry(credentials: Credentials) -> dict[str, Any]:
    return {
        "name": CONTEXT,
        "user": {
            "client-certificate-data": _b64(credentials.client_cert),
            "client-key-data": _b64(credentials.client_key),
        },
    }


def _context_entry() -> dict[str, Any]:
    return {"name": CONTEXT, "context": {"cluster": CONTEXT, "user": CONTEXT}}


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _dump(config: Mapping[str, Any]) -> bytes:
    return yaml.safe_dump(dict(config), sort_keys=False, default_flow_style=False).encode()


__all__ = [
    "CONTEXT",
    "KUBECONFIG",
    "kubeconfig",
    "merge_kubeconfig",
    "merged",
    "read_kubeconfig",
    "write_kubeconfig",
]
