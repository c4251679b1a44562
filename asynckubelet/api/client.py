"""A client of the node daemon's Kubernetes API, over its unix socket.

The command line asks the daemon (:mod:`asynckubelet.api.localapi`: the node's Kubernetes
API on the state dir's socket) instead of reading Docker itself, with the API's paths,
parameters and verbs (a watch-list for ``get -w``, ``DELETE`` with a propagation policy, a
watch of the pods until they are gone for ``delete --wait``). A command is a short process,
and most of its time would go into importing an HTTP stack, so this client speaks the little
HTTP/1.1 the daemon's answers need (one request per connection; a body framed by its length,
by chunks, or by the connection's end) over a plain socket, and returns plain JSON:
``asynckubelet get pods`` through it imports no Kubernetes models, no asyncio HTTP client,
and not even the standard library's ``http.client``, whose e-mail header parser and TLS
module are two thirds of the modules such a command would load (while the engine starts
pods, each module loaded costs a command many times what it costs at rest). Failures come
back as the project's exceptions: the daemon's ``Status`` answers as
:class:`~asynckubelet.errors.DaemonError` carrying the status' reason (printed as kubectl
prints ``Error from server (NotFound): ...``), rejected manifests as
:class:`~asynckubelet.errors.ManifestError` with every field error.
"""

from __future__ import annotations

import json
import math
import os
import socket
import time
from collections.abc import Collection, Generator, Iterator, Mapping, Sequence

from asynckubelet import errors
from asynckubelet.kubectl import resources
from asynckubelet.kubectl.tables import TABLE_ACCEPT
from asynckubelet.node.locate import API_GROUP

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from asynckubelet.node.operations import PodLogOptions

LOCAL = f"/apis/{API_GROUP}/v1"
NODE_FILE = "node.json"
"""What the daemon publishes beside its socket (:data:`asynckubelet.node.daemon.NODE_FILE`)."""
MAX_NODE_FILE = 1 << 16
BUILD_MARK = "+asynckubelet."
"""What ends a ``gitVersion`` of this project, before its own version."""
CONNECT_TIMEOUT = 5.0
WATCH_SECONDS = 24 * 3600
"""How long a watch is asked to last (the longest the node grants)."""


MAX_LINE = 65536
"""The longest status or header line read from the daemon."""
LOG_PIECE = 16 * 1024
"""The most bytes of a log line taken at once (the node's own piece size)."""


class BadAnswer(ValueError):
    """What the daemon sent is not the HTTP/1.1 answer this client reads."""


class _Answer:
    """One answer of the daemon on its own connection: ``status``, then the body whole
    (:meth:`read`) or line by line (:meth:`readline`)."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._file = sock.makefile("rb")
        self._buffer = bytearray()
        self._start = 0
        parts = self._line().split(None, 2)
        if len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or not parts[1].isdigit():
            raise BadAnswer("no HTTP/1.x status line")
        self.status = int(parts[1])
        length: int | None = None
        chunked = False
        while (line := self._line()) not in (b"\r\n", b"\n"):
            name, sep, value = line.partition(b":")
            if not sep:
                raise BadAnswer(f"a header line without a colon: {line[:80]!r}")
            name, value = name.strip().lower(), value.strip()
            if name == b"content-length":
                if not value.isdigit():
                    raise BadAnswer(f"Content-Length {value[:40]!r}")
                length = int(value)
            elif name == b"transfer-encoding":
                chunked = value.lower().endswith(b"chunked")
        self._chunked = chunked
        self._left = None if chunked else length
        self._done = not chunked and length == 0

    def _line(self) -> bytes:
        line = self._file.readline(MAX_LINE + 1)
        if not line:
            raise BadAnswer("the answer ended before its headers did")
        if len(line) > MAX_LINE:
            raise BadAnswer(f"a line longer than {MAX_LINE} bytes")
        return line

    def _piece(self) -> bytes:
        """The next piece of the body; empty at its end."""
        if self._done:
            return b""
        if self._chunked:
            size = self._line().split(b";", 1)[0].strip()
            try:
                length = int(size, 16)
            except ValueError:
                raise BadAnswer(f"a chunk size of {size[:20]!r}") from None
            if length == 0:
                while self._line() not in (b"\r\n", b"\n"):
                    pass
                self._done = True
                return b""
            data = self._file.read(length)
            if len(data) < length or self._line() not in (b"\r\n", b"\n"):
                raise BadAnswer("a chunk cut short")
            return data
        if self._left is None:
            data = self._file.read1(MAX_LINE)
            self._done = not data
            return data
        data = self._file.read1(min(self._left, MAX_LINE))
        if not data:
            raise BadAnswer(f"the body ended {self._left} bytes short of its length")
        self._left -= len(data)
        self._done = self._left == 0
        return data

    def read(self) -> bytes:
        """The rest of the body."""
        pieces = [bytes(self._buffer[self._start :])]
        self._buffer.clear()
        self._start = 0
        while piece := self._piece():
            pieces.append(piece)
        return b"".join(pieces)

    def readline(self, limit: int | None = None) -> bytes:
        """The body's next line with its newline (the last may have none); empty at the
        end. With ``limit``, at most that many bytes: a longer line comes in pieces. Each
        byte is searched once."""
        buffer = self._buffer
        searched = self._start
        while True:
            stop = len(buffer) if limit is None else min(len(buffer), self._start + limit)
            newline = buffer.find(b"\n", searched, stop)
            if newline >= 0:
                return self._take(newline + 1)
            if limit is not None and len(buffer) - self._start >= limit:
                return self._take(self._start + limit)
            piece = self._piece()
            if not piece:
                return self._take(len(buffer))
            searched = len(buffer) - self._start
            del buffer[: self._start]
            self._start = 0
            buffer += piece

    def _take(self, end: int) -> bytes:
        line = bytes(self._buffer[self._start : end])
        self._start = end
        return line

    def close(self) -> None:
        self._file.close()
        self._sock.close()


def _why(e: Exception) -> str:
    """What went wrong, in words (``timed out``, ``Connection reset by peer``)."""
    return str(e.strerror if isinstance(e, OSError) and e.strerror else e) or type(e).__name__


def _ask(
    path: str,
    method: str,
    target: str,
    headers: Mapping[str, str],
    body: bytes | None,
    *,
    timeout: float | None,
    stream: bool = False,
) -> _Answer:
    """Send one request to the daemon at the unix socket ``path``; its answer's head read
    (within ``timeout``). A ``stream`` (a watch, a followed log) may then be silent for as
    long as nothing happens: its body is read without a time limit."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(CONNECT_TIMEOUT)
        sock.connect(path)
        sock.settimeout(timeout)
        lines = [f"{method} {target} HTTP/1.1", "Host: localhost", "Connection: close"]
        lines += [f"{name}: {value}" for name, value in headers.items()]
        if body is not None:
            lines.append(f"Content-Length: {len(body)}")
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("ascii") + (body or b""))
        answer = _Answer(sock)
        if stream:
            sock.settimeout(None)
        return answer
    except BaseException:
        sock.close()
        raise


def _query(params: Mapping[str, Any]) -> str:
    shown = {
        k: ("true" if v is True else str(v))
        for k, v in params.items()
        if v is not None and v is not False
    }
    if not shown:
        return ""
    import urllib.parse

    return f"?{urllib.parse.urlencode(shown)}"


_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-~")


def quote(text: str) -> str:
    """``text`` as one path segment (``urllib.parse.quote(text, safe='')``); a name made
    of URL-safe characters, as every valid Kubernetes name is, is returned as it is
    without importing ``urllib``."""
    if _UNRESERVED.issuperset(text):
        return text
    import urllib.parse

    return urllib.parse.quote(text, safe="")


def _namespaced(namespace: str | None, plural: str) -> str:
    found = resources.by_plural(plural)
    prefix = found.api_prefix if found is not None else "/api/v1"
    if namespace is None:
        return f"{prefix}/{plural}"
    return f"{prefix}/namespaces/{quote(namespace)}/{plural}"


class NodeClient:
    """The local API of the daemon listening on ``socket``. Each call is one request on
    its own connection; ``timeout`` bounds each wait for the daemon (None: none)."""

    def __init__(
        self, socket_path: str | os.PathLike[str], *, timeout: float | None = 60.0
    ) -> None:
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
        stream: bool = False,
    ) -> _Answer:
        headers = {"Accept": accept}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        try:
            return _ask(
                os.fspath(self.socket),
                method,
                path,
                headers,
                data,
                timeout=timeout or self.timeout,
                stream=stream,
            )
        except OSError as e:
            raise errors.DaemonError(
                f"cannot reach the node daemon at {self.socket}: {e.strerror or e}"
            ) from e
        except BadAnswer as e:
            raise errors.DaemonError(f"the node daemon at {self.socket} failed: {e}") from e

    def _json(
        self,
        method: str,
        path: str,
        *,
        body: object = None,
        accept: str = "application/json",
        timeout: float | None = None,
    ) -> Any:
        response = self._send(method, path, body=body, accept=accept, timeout=timeout)
        try:
            data = response.read()
        except (OSError, BadAnswer) as e:
            raise errors.DaemonError(f"the node daemon at {self.socket} failed: {e!r}") from e
        finally:
            response.close()
        if response.status >= 300:
            raise _failure(response.status, data)
        try:
            return json.loads(data)
        except ValueError as e:
            raise errors.DaemonError(f"the node daemon answered no JSON: {e}") from e

    # -- reading --------------------------------------------------------------------------

    def node(self) -> dict[str, Any]:
        """The daemon's effective configuration as it publishes it beside its socket
        (``node.json``: its node name, engine, network and Pod Security level, which no
        Kubernetes object carries); empty when it has published none (yet), or that file
        cannot be read."""
        path = os.path.join(os.path.dirname(os.fspath(self.socket)), NODE_FILE)
        try:
            with open(path, "rb") as file:
                data = json.loads(file.read(MAX_NODE_FILE + 1)[:MAX_NODE_FILE])
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def version(self) -> str:
        """The daemon's version, from the API's ``/version`` (``v1.33.0+asynckubelet.X``:
        ``X``); the whole ``gitVersion`` when it names no build of this project."""
        found = str(self._json("GET", "/version").get("gitVersion") or "")
        _, marked, build = found.partition(BUILD_MARK)
        return build if marked else found

    def healthy(self) -> bool:
        try:
            response = self._send("GET", "/healthz", timeout=CONNECT_TIMEOUT)
        except errors.DaemonError:
            return False
        response.close()
        return response.status == 200

    def pods(
        self, namespace: str | None = None, *, selector: str | None = None
    ) -> list[dict[str, Any]]:
        """v1 Pods with status, of one namespace or (None) of all; with ``selector``
        (``app=web,tier!=db``) those whose labels it selects."""
        path = _namespaced(namespace, "pods") + _query({"labelSelector": selector})
        return list(self._json("GET", path)["items"])

    def pod(self, namespace: str, name: str) -> dict[str, Any]:
        return dict(self._json("GET", self._item(namespace, "pods", name)))

    def add_ephemeral_container(
        self, namespace: str, name: str, container: Mapping[str, Any]
    ) -> dict[str, Any]:
        """The pod once ``container`` is added to its ephemeral containers (an update of
        its ``ephemeralcontainers`` subresource, refused when the pod changed since it was
        read, or when the node refuses the container)."""
        pod = self.pod(namespace, name)
        spec = pod.setdefault("spec", {})
        spec["ephemeralContainers"] = [*(spec.get("ephemeralContainers") or []), dict(container)]
        path = self._item(namespace, "pods", name) + "/ephemeralcontainers"
        return dict(self._json("PUT", path, body=pod))

    def table(
        self,
        plural: str,
        namespace: str | None,
        name: str | None = None,
        *,
        selector: str | None = None,
    ) -> dict[str, Any]:
        """The server-side printed ``Table`` of ``plural`` (pods, configmaps, deployments,
        events, namespaces...), with ``selector`` of the objects whose labels it selects."""
        if name and plural == "namespaces":
            path = f"/api/v1/namespaces/{quote(name)}"
        elif name:
            path = self._item(namespace, plural, name)
        else:
            base = "/api/v1/namespaces" if plural == "namespaces" else None
            path = (base or _namespaced(namespace, plural)) + _query({"labelSelector": selector})
        return dict(self._json("GET", path, accept=TABLE_ACCEPT))

    def objects(
        self, plural: str, namespace: str | None = None, *, selector: str | None = None
    ) -> list[dict[str, Any]]:
        """Objects of a kind other than pods (Secrets without their values); with
        ``selector``, those whose labels it selects."""
        query = _query({"labelSelector": selector})
        if plural == "namespaces":
            return list(self._json("GET", "/api/v1/namespaces" + query)["items"])
        return list(self._json("GET", _namespaced(namespace, plural) + query)["items"])

    def object(self, plural: str, namespace: str | None, name: str) -> dict[str, Any]:
        if plural == "namespaces":
            return dict(self._json("GET", f"/api/v1/namespaces/{quote(name)}"))
        return dict(self._json("GET", self._item(namespace, plural, name)))

    def metrics(
        self, plural: str, namespace: str | None = None, *, selector: str | None = None
    ) -> list[dict[str, Any]]:
        """``metrics.k8s.io`` ``NodeMetrics`` (``nodes``) or ``PodMetrics`` (``pods``, of
        one namespace or of all); the daemon reads the engine's two samples, about a
        second."""
        base = "/apis/metrics.k8s.io/v1beta1"
        if plural == "nodes":
            path = f"{base}/nodes"
        elif namespace is None:
            path = f"{base}/pods"
        else:
            path = f"{base}/namespaces/{quote(namespace)}/pods"
        return list(self._json("GET", path + _query({"labelSelector": selector}))["items"])

    def allocatable(self, node: str) -> dict[str, str]:
        """The Node's ``status.allocatable`` (``{"cpu": "2", "memory": "..."}``)."""
        found = self._json("GET", f"/api/v1/nodes/{quote(node)}")
        return dict((found.get("status") or {}).get("allocatable") or {})

    def watch(
        self,
        namespace: str | None,
        *,
        name: str | None = None,
        table: bool = False,
        selector: str | None = None,
    ) -> Generator[dict[str, Any], None, None]:
        """The pods' watch events as the daemon streams them, until it ends the stream:
        ``{"type", "object"}`` with ``ADDED`` for each pod there at first, a ``BOOKMARK``
        annotated ``k8s.io/initial-events-end`` once those are sent (a watch-list:
        ``sendInitialEvents``), then ``ADDED``, ``MODIFIED``, ``DELETED``, further
        ``BOOKMARK``s, or an ``ERROR`` Status (410 ``Expired``: watch anew). With
        ``table`` each object is a one-row ``Table``, printed by the daemon; with
        ``selector`` only the pods it selects."""
        fields = f"metadata.name={name}" if name else None
        query = {
            "watch": True,
            "sendInitialEvents": True,
            "resourceVersionMatch": "NotOlderThan",
            "allowWatchBookmarks": True,
            "timeoutSeconds": WATCH_SECONDS,
            "fieldSelector": fields,
            "labelSelector": selector,
        }
        path = _namespaced(namespace, "pods") + _query(query)
        accept = TABLE_ACCEPT if table else "application/json"
        return self._events(path, accept=accept)

    def _events(
        self, path: str, *, accept: str = "application/json"
    ) -> Generator[dict[str, Any], None, None]:
        """The watch events the daemon streams for ``path``, until it ends the stream."""
        response = self._send("GET", path, accept=accept, stream=True)
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
        except (OSError, BadAnswer) as e:
            raise errors.DaemonError(
                f"the watch stream from the node daemon broke: {_why(e)}"
            ) from e
        finally:
            response.close()

    def events(self, namespace: str, *, uid: str | None = None) -> list[dict[str, Any]]:
        selector = f"involvedObject.uid={uid}" if uid else None
        path = _namespaced(namespace, "events") + _query({"fieldSelector": selector})
        return list(self._json("GET", path)["items"])

    def log(self, namespace: str, name: str, options: PodLogOptions) -> Iterator[bytes]:
        """A container's output as the daemon streams it, as it was written: each line
        with its newline, one longer than :data:`LOG_PIECE` bytes in pieces, the last
        without a newline when the output ended without one."""
        path = self._item(namespace, "pods", name) + "/log" + _query(options.query())
        response = self._send("GET", path, accept="text/plain", stream=True)
        try:
            if response.status >= 300:
                raise _failure(response.status, response.read())
            while piece := response.readline(LOG_PIECE):
                yield piece
        except (OSError, BadAnswer) as e:
            raise errors.DaemonError(f"the log stream from the node daemon broke: {_why(e)}") from e
        finally:
            response.close()

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
        spec: dict[str, Any] = {"files": [{"source": s, "manifest": t} for s, t in files]}
        if prune_selector is not None or prune_all:
            spec["prune"] = {"selector": prune_selector or "", "all": prune_all}
        body = {"apiVersion": f"{API_GROUP}/v1", "kind": "Apply", "spec": spec}
        answer = self._json("POST", f"{LOCAL}/applies", body=body)
        found = answer.get("status") if isinstance(answer, dict) else None
        if not isinstance(found, dict):
            raise errors.DaemonError("the node daemon answered an Apply without its status")
        return found

    def restart(
        self, namespace: str, name: str, containers: Sequence[str], *, grace_period: int
    ) -> list[str]:
        """Restart the pod's ``containers`` in place (a ``Restart``): their IDs, in the
        order asked."""
        spec = {
            "namespace": namespace,
            "pod": name,
            "containers": list(containers),
            "gracePeriodSeconds": grace_period,
        }
        body = {"apiVersion": f"{API_GROUP}/v1", "kind": "Restart", "spec": spec}
        answer = self._json("POST", f"{LOCAL}/restarts", body=body)
        found = answer.get("status") if isinstance(answer, dict) else None
        restarted = found.get("containers") if isinstance(found, dict) else None
        if not isinstance(restarted, list):
            raise errors.DaemonError("the node daemon answered a Restart without its status")
        return [str(c.get("containerID") or "").removeprefix("docker://") for c in restarted]

    def delete_object(
        self, plural: str, namespace: str, name: str, *, grace_period: float | None = None
    ) -> bool:
        """``DELETE`` one object (``propagationPolicy=Background``: a workload's
        ReplicaSets and pods go with it), gracefully unless ``grace_period`` says how
        long; False when there is none."""
        if plural == "namespaces":
            path = f"/api/v1/namespaces/{quote(name)}"
        else:
            path = self._item(namespace, plural, name)
        grace = None if grace_period is None else int(grace_period)
        query = {"propagationPolicy": "Background", "gracePeriodSeconds": grace}
        try:
            self._json("DELETE", path + _query(query))
        except errors.DaemonError as e:
            if e.status == 404:
                return False
            raise
        return True

    def wait_gone(
        self, pods: Collection[tuple[str, str]], *, timeout: float | None
    ) -> set[tuple[str, str]]:
        """Wait until the pods ``(namespace, name)`` are gone, watching the pods, or
        until ``timeout`` ends (None: no end); those still there."""
        left = set(pods)
        deadline = None if timeout is None else time.monotonic() + timeout
        while left:
            seconds = WATCH_SECONDS
            if deadline is not None:
                seconds = math.ceil(deadline - time.monotonic())
                if seconds <= 0:
                    break
            query = {
                "watch": True,
                "sendInitialEvents": True,
                "resourceVersionMatch": "NotOlderThan",
                "allowWatchBookmarks": True,
                "timeoutSeconds": str(seconds),
            }
            there: set[tuple[str, str]] = set()
            listed = False
            for event in self._events("/api/v1/pods" + _query(query)):
                kind, meta = event.get("type"), (event.get("object") or {}).get("metadata") or {}
                key = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
                if kind == "ERROR":
                    break
                if kind == "BOOKMARK" and not listed:
                    listed = True
                    left &= there
                elif kind == "ADDED" and not listed:
                    there.add(key)
                elif kind == "DELETED":
                    left.discard(key)
                if listed and not left:
                    return left
        if not left:
            return left
        return left & {(p["metadata"]["namespace"], p["metadata"]["name"]) for p in self.pods()}

    @staticmethod
    def _item(namespace: str | None, plural: str, name: str | None) -> str:
        return f"{_namespaced(namespace or 'default', plural)}/{quote(name or '')}"


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
