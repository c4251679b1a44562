"""The API server through lightkube's async client: the one module that imports it.

A node authenticates as a kubelet does, with the kubeconfig's client certificate
(``client-certificate(-data)`` and ``client-key(-data)``, from which the Node authorizer
reads ``system:node:<name>``) or a bearer token (``token``, ``tokenFile``). The kubeconfig
is checked before use, so that a file that is missing, is not YAML, lacks its current
context, cluster, server or credentials, or holds certificate data that cannot be loaded
is one :class:`~asynckubelet.errors.KubeconfigError` naming the file and the problem; a
server that answers 401 or 403 to the first call, or whose certificate the kubeconfig's
authority does not trust, is one too (:func:`check_access`).

lightkube raises httpx errors and its own ``ApiError``; here they become
:class:`~asynckubelet.errors.ClusterUnavailable` (no answer: connection refused or reset,
a timeout, a stream cut short) and :class:`~asynckubelet.errors.ClusterAPIError` (an error
status, with the code and the ``Status`` reason). Deleting with a UID precondition is the
one call lightkube's client has no parameter for: its request is built by lightkube and
given the ``DeleteOptions`` body.
"""

from __future__ import annotations

import base64
import os
import ssl
import traceback
from collections.abc import AsyncIterator, Awaitable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar, cast

import httpx2
import yaml
from lightkube import AsyncClient, KubeConfig
from lightkube.config.kubeconfig import SingleConfig
from lightkube.core.exceptions import ApiError, ConfigError
from lightkube.models.authentication_v1 import (
    BoundObjectReference,
    TokenRequestSpec,
    TokenReviewSpec,
)
from lightkube.models.authorization_v1 import ResourceAttributes, SubjectAccessReviewSpec
from lightkube.models.coordination_v1 import Lease
from lightkube.models.core_v1 import Event, Node, Pod
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources import authentication_v1, authorization_v1, coordination_v1, core_v1
from lightkube.types import PatchType

from asynckubelet import errors
from asynckubelet.cluster.api import BoundToken, Listed, ObjectKind, WatchEvent

FIELD_MANAGER = "asynckubelet"
REQUEST_TIMEOUT = 10.0
"""Seconds for one request (connect, read, write); a watch has no read timeout."""
WATCH_TIMEOUT = 300
"""``timeoutSeconds`` of a watch: the server ends it, and it is opened again from the last
resource version (client-go picks 5-10 minutes)."""

_T = TypeVar("_T")
_KINDS: dict[str, Any] = {"ConfigMap": core_v1.ConfigMap, "Secret": core_v1.Secret}


def _fail(path: Path, problem: str) -> errors.KubeconfigError:
    return errors.KubeconfigError(f"kubeconfig {path}: {problem}", path=str(path))


def _read_kubeconfig(path: Path) -> dict[str, Any]:
    """The kubeconfig's document: readable YAML, a mapping with clusters and contexts."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise _fail(path, "no such file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise _fail(path, f"cannot be read: {getattr(e, 'strerror', None) or e}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(e, "problem", None) or "syntax error"
        raise _fail(path, f"not valid YAML{where}: {problem}") from None
    if not isinstance(data, dict):
        raise _fail(path, "not a kubeconfig (expected a mapping with clusters, contexts, users)")
    for key in ("clusters", "contexts"):
        if not isinstance(data.get(key), list) or not data[key]:
            raise _fail(path, f"no {key}")
    return data


def load_kubeconfig(path: Path, *, context: str | None = None) -> SingleConfig:
    """The kubeconfig's context ``context`` (default its ``current-context``), checked."""
    data = _read_kubeconfig(path)
    name = context or data.get("current-context")
    if not name:
        raise _fail(path, "no current-context (and none given)")
    try:
        config = KubeConfig.from_dict(data, fname=path)
        contexts = config.contexts
        if name not in contexts:
            raise _fail(path, f"context {name!r} not found")
        ctx = contexts[name]
        if ctx.cluster not in config.clusters:
            raise _fail(path, f"context {name!r} names cluster {ctx.cluster!r}, which is not there")
        if ctx.user and ctx.user not in config.users:
            raise _fail(path, f"context {name!r} names user {ctx.user!r}, which is not there")
        single = config.get(name)
    except errors.KubeconfigError:
        raise
    except (ConfigError, KeyError, TypeError, ValueError, AttributeError) as e:
        raise _fail(path, f"malformed: {type(e).__name__}: {e}") from None
    if single is None:
        raise _fail(path, "no context")
    server = single.cluster.server or ""
    if not server.startswith("https://") and not server.startswith("http://"):
        raise _fail(path, f"cluster server {server!r} is not an https:// URL")
    user = single.user
    if user is None or not (
        user.client_cert or user.client_cert_data or user.token or user.token_file
    ):
        raise _fail(
            path,
            f"context {name!r} has no credentials (a client certificate and key, or a token)",
        )
    if bool(user.client_cert or user.client_cert_data) != bool(
        user.client_key or user.client_key_data
    ):
        raise _fail(path, "a client certificate needs its key, and a key its certificate")
    return single


def cluster_ca(single: SingleConfig, *, path: Path) -> bytes | None:
    """The PEM of the cluster's certificate authority (``certificate-authority-data`` or
    the file ``certificate-authority`` names), None when the kubeconfig has none."""
    cluster = single.cluster
    if cluster.certificate_auth_data:
        try:
            return base64.b64decode(cluster.certificate_auth_data)
        except ValueError:
            raise _fail(path, "certificate-authority-data is not base64") from None
    if cluster.certificate_auth:
        ca = Path(single.abs_file(cluster.certificate_auth))
        try:
            return ca.read_bytes()
        except OSError as e:
            raise _fail(path, f"certificate-authority {ca}: {e.strerror or e}") from None
    return None


def make_client(single: SingleConfig, *, path: Path) -> AsyncClient:
    """lightkube's async client for the checked configuration; certificate and key data
    that cannot be loaded is a KubeconfigError."""
    try:
        return AsyncClient(
            single,
            timeout=httpx2.Timeout(REQUEST_TIMEOUT),
            field_manager=FIELD_MANAGER,
            trust_env=False,
        )
    except (ssl.SSLError, OSError, ValueError, ConfigError) as e:
        detail = getattr(e, "strerror", None) or getattr(e, "reason", None) or str(e)
        # lightkube's temporary certificate files live in the failed frames' locals; freed
        # now, they are closed now, not whenever a garbage collection finds the cycle.
        traceback.clear_frames(e.__traceback__)
        raise _fail(path, f"its certificate or key cannot be used: {detail}") from None


def _status_error(e: ApiError | httpx2.HTTPStatusError, what: str) -> errors.ClusterAPIError:
    response = getattr(e, "response", None)
    status = e.status if isinstance(e, ApiError) else None
    if status is not None:
        code = status.code or (response.status_code if response is not None else 0)
        return errors.ClusterAPIError(
            f"{what}: {status.message or e}", code=int(code), reason=status.reason or ""
        )
    code = response.status_code if response is not None else 0
    reason = response.reason_phrase if response is not None else ""
    try:
        text = response.text[:300] if response is not None else ""
    except httpx2.StreamError:
        text = ""
    return errors.ClusterAPIError(f"{what}: {text or reason or code}", code=code, reason=reason)


def _cause_is_tls(e: BaseException) -> ssl.SSLCertVerificationError | None:
    seen: BaseException | None = e
    while seen is not None:
        if isinstance(seen, ssl.SSLCertVerificationError):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def map_error(e: Exception, what: str) -> errors.ClusterError:
    """lightkube's and httpx's errors as the project's."""
    if isinstance(e, ApiError | httpx2.HTTPStatusError):
        return _status_error(e, what)
    if isinstance(e, httpx2.HTTPError):
        return errors.ClusterUnavailable(f"{what}: {type(e).__name__}: {e}".rstrip(": "))
    if isinstance(e, OSError):
        return errors.ClusterUnavailable(f"{what}: {e}")
    return errors.ClusterError(f"{what}: {type(e).__name__}: {e}")


class KubeClient:
    """:class:`~asynckubelet.cluster.api.ClusterAPI` over lightkube's ``AsyncClient``."""

    def __init__(self, client: AsyncClient, *, server: str, ca_pem: bytes | None = None) -> None:
        self._client = client
        self._server = server
        self.ca_pem = ca_pem
        """The cluster's certificate authority (PEM), from the kubeconfig."""

    @classmethod
    def from_kubeconfig(cls, path: Path, *, context: str | None = None) -> KubeClient:
        single = load_kubeconfig(path, context=context)
        return cls(
            make_client(single, path=path),
            server=single.cluster.server,
            ca_pem=cluster_ca(single, path=path),
        )

    @property
    def server(self) -> str:
        return self._server

    async def aclose(self) -> None:
        await self._client.close()

    async def _call(self, what: str, call: Awaitable[_T]) -> _T:
        try:
            return await call
        except (httpx2.HTTPError, OSError) as e:
            raise map_error(e, what) from e

    async def _maybe(self, what: str, call: Awaitable[_T]) -> _T | None:
        try:
            return await self._call(what, call)
        except errors.ClusterAPIError as e:
            if e.not_found:
                return None
            raise

    # -- the server ----------------------------------------------------------------------

    async def server_version(self) -> str:
        async def get() -> str:
            generic: Any = self._client._client
            request = generic._client.build_request("GET", "/version")
            response = await generic._client.send(request)
            generic.raise_for_status(response)
            return str(response.json().get("gitVersion") or "")

        return await self._call("GET /version", get())

    # -- Node and Lease ------------------------------------------------------------------

    async def get_node(self, name: str) -> Node | None:
        return await self._maybe(f"get node {name}", self._client.get(core_v1.Node, name))

    async def create_node(self, node: Node) -> Node:
        obj = core_v1.Node.from_dict(node.to_dict())
        name = node.metadata.name if node.metadata else ""
        return cast(Node, await self._call(f"create node {name}", self._client.create(obj)))

    async def patch_node(self, name: str, patch: Mapping[str, Any]) -> Node:
        call = self._client.patch(core_v1.Node, name, dict(patch), patch_type=PatchType.MERGE)
        return cast(Node, await self._call(f"patch node {name}", call))

    async def patch_node_status(self, name: str, patch: Mapping[str, Any]) -> Node:
        call = self._client.patch(core_v1.NodeStatus, name, dict(patch), patch_type=PatchType.MERGE)
        return cast(Node, await self._call(f"patch status of node {name}", call))

    async def get_lease(self, namespace: str, name: str) -> Lease | None:
        call = self._client.get(coordination_v1.Lease, name, namespace=namespace)
        return await self._maybe(f"get lease {namespace}/{name}", call)

    async def create_lease(self, lease: Lease) -> Lease:
        obj = coordination_v1.Lease.from_dict(lease.to_dict())
        return cast(Lease, await self._call("create lease", self._client.create(obj)))

    async def replace_lease(self, lease: Lease) -> Lease:
        obj = coordination_v1.Lease.from_dict(lease.to_dict())
        return cast(Lease, await self._call("update lease", self._client.replace(obj)))

    # -- pods ----------------------------------------------------------------------------

    async def _list(self, what: str, res: Any, **kwargs: Any) -> Listed:
        async def run() -> Listed:
            listing = self._client.list(res, **kwargs)
            items = [item async for item in listing]
            return Listed(items=tuple(items), resource_version=listing.resourceVersion)

        return await self._call(what, run())

    async def _watch(
        self, what: str, res: Any, *, resource_version: str, **kwargs: Any
    ) -> AsyncIterator[WatchEvent]:
        stream = self._client.watch(
            res, resource_version=resource_version, server_timeout=WATCH_TIMEOUT, **kwargs
        )
        try:
            async for kind, obj in stream:
                yield kind, obj
        except (httpx2.HTTPError, OSError) as e:
            raise map_error(e, what) from e
        finally:
            await stream.aclose()  # type: ignore[attr-defined]

    async def list_pods(self, *, node: str) -> Listed:
        return await self._list(
            f"list pods of node {node}",
            core_v1.Pod,
            namespace="*",
            fields={"spec.nodeName": node},
        )

    def watch_pods(self, *, node: str, resource_version: str) -> AsyncIterator[WatchEvent]:
        return self._watch(
            f"watch pods of node {node}",
            core_v1.Pod,
            namespace="*",
            fields={"spec.nodeName": node},
            resource_version=resource_version,
        )

    async def list_services(self) -> Listed:
        return await self._list("list services", core_v1.Service, namespace="*")

    def watch_services(self, *, resource_version: str) -> AsyncIterator[WatchEvent]:
        return self._watch(
            "watch services", core_v1.Service, namespace="*", resource_version=resource_version
        )

    async def get_pod(self, namespace: str, name: str) -> Pod | None:
        call = self._client.get(core_v1.Pod, name, namespace=namespace)
        return await self._maybe(f"get pod {namespace}/{name}", call)

    async def create_pod(self, pod: Pod) -> Pod:
        obj = core_v1.Pod.from_dict(pod.to_dict())
        meta = pod.metadata or ObjectMeta()
        what = f"create pod {meta.namespace}/{meta.name}"
        return cast(Pod, await self._call(what, self._client.create(obj)))

    async def patch_pod_status(self, namespace: str, name: str, patch: Mapping[str, Any]) -> Pod:
        call = self._client.patch(
            core_v1.PodStatus,
            name,
            dict(patch),
            namespace=namespace,
            patch_type=PatchType.STRATEGIC,
        )
        return cast(Pod, await self._call(f"patch status of pod {namespace}/{name}", call))

    async def delete_pod(
        self, namespace: str, name: str, *, uid: str | None, grace_period: int | None
    ) -> None:
        options: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions"}
        if grace_period is not None:
            options["gracePeriodSeconds"] = grace_period
        if uid:
            options["preconditions"] = {"uid": uid}

        async def run() -> None:
            generic: Any = self._client._client
            request = generic.prepare_request(
                "delete", res=core_v1.Pod, name=name, namespace=namespace
            )
            request.data = options
            response = await generic.send(generic.build_adapter_request(request))
            generic.handle_response("delete", response, request)

        await self._call(f"delete pod {namespace}/{name}", run())

    # -- ConfigMaps, Secrets, tokens -----------------------------------------------------

    async def list_object(self, kind: ObjectKind, namespace: str, name: str) -> Listed:
        return await self._list(
            f"get {kind.lower()} {namespace}/{name}",
            _KINDS[kind],
            namespace=namespace,
            fields={"metadata.name": name},
        )

    def watch_object(
        self, kind: ObjectKind, namespace: str, name: str, *, resource_version: str
    ) -> AsyncIterator[WatchEvent]:
        return self._watch(
            f"watch {kind.lower()} {namespace}/{name}",
            _KINDS[kind],
            namespace=namespace,
            fields={"metadata.name": name},
            resource_version=resource_version,
        )

    async def request_token(
        self,
        *,
        namespace: str,
        service_account: str,
        audiences: tuple[str, ...],
        expiration_seconds: int,
        pod_name: str,
        pod_uid: str,
    ) -> BoundToken:
        request = core_v1.ServiceAccountToken(
            metadata=ObjectMeta(),
            spec=TokenRequestSpec(
                audiences=list(audiences),
                expirationSeconds=expiration_seconds,
                boundObjectRef=BoundObjectReference(
                    apiVersion="v1", kind="Pod", name=pod_name, uid=pod_uid
                ),
            ),
        )
        what = f"request a token of service account {namespace}/{service_account}"
        answer = await self._call(
            what, self._client.create(request, service_account, namespace=namespace)
        )
        status = answer.status
        if status is None or not status.token:
            raise errors.ClusterError(f"{what}: the answer holds no token")
        expires = status.expirationTimestamp or (
            datetime.now(UTC) + timedelta(seconds=expiration_seconds)
        )
        return BoundToken(value=status.token, expires_at=expires)

    # -- authentication and authorization -----------------------------------------------

    async def review_token(self, token: str) -> tuple[str, tuple[str, ...]] | None:
        """A ``TokenReview``: the user name and groups the API server gives ``token``, or
        None when it does not authenticate it."""
        review = authentication_v1.TokenReview(spec=TokenReviewSpec(token=token))
        answer = await self._call("review a bearer token", self._client.create(review))
        status = answer.status
        if status is None or not status.authenticated or status.user is None:
            return None
        name = status.user.username or ""
        if not name:
            return None
        return name, tuple(status.user.groups or ())

    async def review_access(
        self,
        *,
        user: str,
        groups: Sequence[str],
        verb: str,
        resource: str,
        subresource: str,
        name: str,
    ) -> tuple[bool, str]:
        """A ``SubjectAccessReview``: whether ``user`` may ``verb`` the resource, and why."""
        review = authorization_v1.SubjectAccessReview(
            spec=SubjectAccessReviewSpec(
                user=user,
                groups=list(groups),
                resourceAttributes=ResourceAttributes(
                    verb=verb, resource=resource, subresource=subresource, name=name
                ),
            )
        )
        answer = await self._call(f"review access of {user}", self._client.create(review))
        status = answer.status
        if status is None:
            return False, "the review has no status"
        return bool(status.allowed) and not status.denied, status.reason or ""

    # -- events --------------------------------------------------------------------------

    async def create_event(self, event: Event) -> Event:
        obj = core_v1.Event.from_dict(event.to_dict())
        return cast(Event, await self._call("create event", self._client.create(obj)))

    async def patch_event(self, namespace: str, name: str, patch: Mapping[str, Any]) -> Event:
        call = self._client.patch(
            core_v1.Event, name, dict(patch), namespace=namespace, patch_type=PatchType.MERGE
        )
        return cast(Event, await self._call(f"patch event {namespace}/{name}", call))


async def check_access(api: KubeClient, *, path: Path) -> str:
    """The server's version; credentials it refuses, or a server certificate the
    kubeconfig does not trust, are a KubeconfigError naming the file."""
    try:
        return await api.server_version()
    except errors.ClusterAPIError as e:
        if e.code in (401, 403):
            word = "refused" if e.code == 401 else "forbidden"
            raise _fail(
                path, f"the API server at {api.server} {word} its credentials ({e.code} {e.reason})"
            ) from None
        raise
    except errors.ClusterUnavailable as e:
        tls = _cause_is_tls(e)
        if tls is not None:
            raise _fail(
                path,
                f"the API server at {api.server} has a certificate its certificate authority "
                f"does not trust: {tls.verify_message or tls.reason}",
            ) from None
        raise


def default_kubeconfig() -> Path | None:
    """``ASYNCKUBELET_KUBECONFIG`` when set, else None (no cluster)."""
    value = os.environ.get("ASYNCKUBELET_KUBECONFIG")
    return Path(value) if value else None


__all__ = [
    "FIELD_MANAGER",
    "KubeClient",
    "check_access",
    "cluster_ca",
    "default_kubeconfig",
    "load_kubeconfig",
    "make_client",
    "map_error",
]
