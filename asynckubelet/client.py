"""A client of the node daemon's local API, over its unix socket.

The command line asks the daemon (:mod:`asynckubelet.localapi`) instead of reading Docker
itself. A command is a short process, and most of its time would go into importing an
HTTP stack, so this client is the standard library's ``http.client`` on a unix socket,
returning plain JSON: ``asynckubelet get pods`` through it imports no Kubernetes models
and no asyncio HTTP client. Failures come back as the project's exceptions: the daemon's
``Status`` answers as :class:`~asynckubelet.errors.DaemonError` carrying the status'
reason (printed as kubectl prints ``Error from server (NotFound): ...``), rejected
manifests as :class:`~asynckubelet.errors.ManifestError` with every field error.
"""

from __future__ import annotations

import http.client
import json
import socket
import urllib.parse
from collections.abc import Generator, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from asynckubelet import errors, resources
from asynckubelet.node.daemon import API_GROUP
from asynckubelet.tables import TABLE_ACCEPT

LOCAL = f"/apis/{API_GROUP}/v1"
CONNECT_TIMEOUT = 5.0


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, *, timeout: float | None) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(CONNECT_TIMEOUT)
        try:
            sock.connect(self._path)
        except BaseException:
            sock.close()
            raise
        sock.settimeout(self.timeout)
        self.sock = sock


def _query(params: Mapping[str, Any]) -> str:
    shown = {
        k: ("true" if v is True else str(v))
        for k, v in params.items()
        if v is not None and v is not False
    }
    return f"?{urllib.parse.urlencode(shown)}" if shown else ""


def _namespaced(namespace: str | None, plural: str) -> str:
    found = resources.by_plural(plural)
    prefix = found.api_prefix if found is not None else "/api/v1"
    if namespace is None:
        return f"{prefix}/{plural}"
    return f"{prefix}/namespaces/{urllib.parse.quote(namespace, safe='')}/{plural}"


class NodeClient:
    """The local API of the daemon listening on ``socket``. Each call is one request on
    its own connection; ``timeout`` bounds each wait for the daemon (None: none)."""

    def __init__(self, socket_path: Path, *, timeout: float | None = 60.0) -> None:
        self.socket = socket_path
        self.timeout = timeout

    # -- transport ------------------------------------------------------------------------

    def _send(
        self,
        method: str,
        path: str,
        *,
        body: object = None,
        accept: str = "application/json",
        timeout: float | None = None,
    ) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        conn = _UnixConnection(str(self.socket), timeout=timeout or self.timeout)
        headers = {"Accept": accept}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        try:
            conn.request(method, path, body=data, headers=headers)
            return conn, conn.getresponse()
        except OSError as e:
            conn.close()
            raise errors.DaemonError(
                f"cannot reach the node daemon at {self.socket}: {e.strerror or e}"
            ) from e
        except http.client.HTTPException as e:
            conn.close()
            raise errors.DaemonError(f"the node daemon at {self.socket} failed: {e!r}") from e

    def _json(
        self,
        method: str,
        path: str,
        *,
        body: object = None,
        accept: str = "application/json",
        timeout: float | None = None,
    ) -> Any:
        conn, response = self._send(method, path, body=body, accept=accept, timeout=timeout)
        try:
            data = response.read()
        except (OSError, http.client.HTTPException) as e:
            raise errors.DaemonError(f"the node daemon at {self.socket} failed: {e!r}") from e
        finally:
            conn.close()
        if response.status >= 300:
            raise _failure(response.status, data)
        try:
            return json.loads(data)
        except ValueError as e:
            raise errors.DaemonError(f"the node daemon answered no JSON: {e}") from e

    # -- reading --------------------------------------------------------------------------

    def node(self) -> dict[str, Any]:
        """The daemon's effective configuration (as in its ``node.json``)."""
        return dict(self._json("GET", f"{LOCAL}/node"))

    def healthy(self) -> bool:
        try:
            conn, response = self._send("GET", "/healthz", timeout=CONNECT_TIMEOUT)
        except errors.DaemonError:
            return False
        conn.close()
        return response.status == 200

    def pods(self, namespace: str | None = None) -> list[dict[str, Any]]:
        """v1 Pods with status, of one namespace or (None) of all."""
        return list(self._json("GET", _namespaced(namespace, "pods"))["items"])

    def pod(self, namespace: str, name: str) -> dict[str, Any]:
        return dict(self._json("GET", self._item(namespace, "pods", name)))

    def table(self, plural: str, namespace: str | None, name: str | None = None) -> dict[str, Any]:
        """The server-side printed ``Table`` of ``plural`` (pods, configmaps, deployments...)."""
        path = self._item(namespace, plural, name) if name else _namespaced(namespace, plural)
        return dict(self._json("GET", path, accept=TABLE_ACCEPT))

    def objects(self, plural: str, namespace: str | None = None) -> list[dict[str, Any]]:
        """Objects of a kind other than pods (Secrets without their values)."""
        if plural == "namespaces":
            return list(self._json("GET", "/api/v1/namespaces")["items"])
        return list(self._json("GET", _namespaced(namespace, plural))["items"])

    def object(self, plural: str, namespace: str | None, name: str) -> dict[str, Any]:
        if plural == "namespaces":
            return dict(self._json("GET", f"/api/v1/namespaces/{urllib.parse.quote(name)}"))
        return dict(self._json("GET", self._item(namespace, plural, name)))

    def watch(
        self, namespace: str | None, *, name: str | None = None, table: bool = False
    ) -> Generator[dict[str, Any], None, None]:
        """The pods' watch events as the daemon streams them, until it ends the stream:
        ``{"type", "object"}`` with ``ADDED`` for each pod there at first, a ``BOOKMARK``
        once those are sent, then ``ADDED``, ``MODIFIED``, ``DELETED``, or an ``ERROR``
        Status (410 ``Expired``: watch anew). With ``table`` each object is a one-row
        ``Table``, printed by the daemon."""
        selector = f"metadata.name={name}" if name else None
        path = _namespaced(namespace, "pods") + _query({"watch": True, "fieldSelector": selector})
        accept = TABLE_ACCEPT if table else "application/json"
        conn, response = self._send("GET", path, accept=accept, timeout=None)
        try:
            if response.status >= 300:
                raise _failure(response.status, response.read())
            while line := response.readline():
                try:
                    event = json.loads(line)
                except ValueError as e:
                    raise errors.DaemonError(f"the node daemon's watch sent no JSON: {e}") from e
                if isinstance(event, dict):
                    yield event
        except (OSError, http.client.HTTPException) as e:
            raise errors.DaemonError(f"the watch stream from the node daemon broke: {e!r}") from e
        finally:
            conn.close()

    def events(self, namespace: str, *, uid: str | None = None) -> list[dict[str, Any]]:
        selector = f"involvedObject.uid={uid}" if uid else None
        path = _namespaced(namespace, "events") + _query({"fieldSelector": selector})
        return list(self._json("GET", path)["items"])

    def logs(
        self,
        namespace: str,
        name: str,
        *,
        container: str | None = None,
        follow: bool = False,
        previous: bool = False,
        tail: int | None = None,
        timestamps: bool = False,
        since_seconds: int | None = None,
    ) -> Iterator[str]:
        """A container's output, line by line, as the daemon streams it."""
        params = {
            "container": container,
            "follow": follow,
            "previous": previous,
            "tailLines": tail,
            "timestamps": timestamps,
            "sinceSeconds": since_seconds,
        }
        path = self._item(namespace, "pods", name) + "/log" + _query(params)
        conn, response = self._send("GET", path, accept="text/plain", timeout=None)
        try:
            if response.status >= 300:
                raise _failure(response.status, response.read())
            while line := response.readline():
                yield line.decode("utf-8", errors="replace").rstrip("\n")
        except (OSError, http.client.HTTPException) as e:
            raise errors.DaemonError(f"the log stream from the node daemon broke: {e!r}") from e
        finally:
            conn.close()

    # -- acting ---------------------------------------------------------------------------

    def apply(
        self,
        files: Sequence[tuple[str, str]],
        *,
        prune_selector: str | None = None,
        prune_all: bool = False,
    ) -> dict[str, Any]:
        """Hand ``(source name, manifest text)`` files to the daemon, which admits and
        stores them: ``{"items": [{"kind", "namespace", "name", "resource", "verdict",
        "object"}], "pruned": [...], "warnings": [...]}``. With ``prune_selector`` (or
        ``prune_all``) the objects applied before that the files no longer hold are
        deleted. Raises :class:`~asynckubelet.errors.ManifestError` when it refuses them."""
        body: dict[str, Any] = {"files": [{"source": s, "manifest": t} for s, t in files]}
        if prune_selector is not None or prune_all:
            body["prune"] = {"selector": prune_selector or "", "all": prune_all}
        return dict(self._json("POST", f"{LOCAL}/apply", body=body))

    def delete(
        self,
        objects: Sequence[Mapping[str, str]],
        *,
        grace_period: float | None = None,
        timeout: float | None = None,
    ) -> list[dict[str, str]]:
        """Delete objects (``{"kind", "namespace", "name"}``), waiting for pods until they
        are gone or ``timeout`` ends: each one's ``status``, ``deleted``, ``notfound`` or
        ``timeout``."""
        body = {
            "objects": list(objects),
            "gracePeriodSeconds": grace_period,
            "timeoutSeconds": timeout,
        }
        wait = None if timeout is None else timeout + 30.0
        return list(self._json("POST", f"{LOCAL}/delete", body=body, timeout=wait)["items"])

    @staticmethod
    def _item(namespace: str | None, plural: str, name: str | None) -> str:
        return f"{_namespaced(namespace or 'default', plural)}/{urllib.parse.quote(name or '')}"


def _failure(code: int, data: bytes) -> errors.AsyncKubeletError:
    """The daemon's ``Status`` as the project's exception."""
    try:
        body = json.loads(data)
    except ValueError:
        body = None
    if not isinstance(body, dict) or body.get("kind") != "Status":
        text = data.decode("utf-8", errors="replace").strip() or f"HTTP {code}"
        return errors.DaemonError(text, status=code)
    message = str(body.get("message") or "")
    reason = str(body.get("reason") or "")
    if code == 422:
        causes = (body.get("details") or {}).get("causes") or []
        return errors.ManifestError(
            message,
            [
                errors.FieldError(
                    str(c.get("field") or ""),
                    str(c.get("reason") or ""),
                    str(c.get("message") or ""),
                    source=str(c.get("source") or ""),
                )
                for c in causes
                if isinstance(c, dict)
            ],
        )
    return errors.DaemonError(message, status=code, reason=reason)


__all__ = ["NodeClient"]
