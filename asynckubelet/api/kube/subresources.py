"""Subresources of pods, service accounts and the node: ``pods/status``,
``pods/ephemeralcontainers``, ``serviceaccounts/token`` and ``nodes/status`` (get: the
Node, as ``GET`` of it answers).

``GET .../pods/NAME/status`` is the pod, as from the API server (``kubectl get pod NAME
--subresource=status``); its writes are :mod:`~asynckubelet.api.kube.podstatus`'s.
``GET .../pods/NAME/ephemeralcontainers`` is the pod too; its writes are
:mod:`~asynckubelet.api.kube.ephemeral`'s. So is ``GET .../pods/NAME/resize``; its writes
are :mod:`~asynckubelet.api.kube.resize`'s.

``POST .../serviceaccounts/NAME/token`` is the API server's ``TokenRequest``: a token of
the service account, signed by the node's service-account key
(:class:`~asynckubelet.node.tokens.TokenIssuer`, the key that signs the tokens of
projected volumes, kept in the state dir with mode 0600), with upstream's claims, its
lifetime from ``spec.expirationSeconds`` (default :data:`DEFAULT_SECONDS`, at least
:data:`MIN_SECONDS`) and bound, when ``spec.boundObjectRef`` names one, to a pod, a
Secret or the node. A service account the node does not keep is ``404``.
"""

from __future__ import annotations

import contextlib
import json
from datetime import UTC, datetime
from typing import Any

import anyio.to_thread
from aiohttp import web

from asynckubelet import httpbounds
from asynckubelet.api.answers import not_found, status
from asynckubelet.api.endpoints import NODE_KEY
from asynckubelet.api.kube import ephemeral, podstatus, protowire, resize
from asynckubelet.api.kube.pods import get_node, get_pod
from asynckubelet.node.kubelet import Kubelet
from asynckubelet.node.tokens import TokenIssuer, TokenRequest
from asynckubelet.node.volumes import VolumeManager

API_VERSION = "authentication.k8s.io/v1"
DEFAULT_SECONDS = 3600
MIN_SECONDS = 600
MAX_SECONDS = 1 << 32
MAX_BODY_BYTES = 1 << 20
MAX_AUDIENCES = 64
ISSUER_KEY = web.AppKey("token_issuer", TokenIssuer)
KEY_DIR = "serviceaccount"
"""Where the node keeps its service-account key when no volume manager holds it (the
volume manager's default place)."""


class Refused(Exception):
    def __init__(self, response: web.Response) -> None:
        self.response = response


def issuer_of(node: Kubelet) -> TokenIssuer:
    """The node's one service-account token issuer."""
    volumes = node.runtime.volumes
    if isinstance(volumes, VolumeManager):
        return volumes.tokens
    state = node.config.state_dir
    if state is None:
        raise RuntimeError("a node without a state dir has no service-account key")
    return TokenIssuer(
        directory=state / KEY_DIR,
        node_name=node.node_name,
        issuer=node.config.service_account_issuer,
    )


# -- pods ------------------------------------------------------------------------------------


async def pod_status(request: web.Request) -> web.Response:
    """``GET pods/NAME/status`` and ``GET pods/NAME/ephemeralcontainers``: the pod."""
    return await get_pod(request)


# -- tokens ----------------------------------------------------------------------------------


def _invalid(name: str, field: str, value: Any, detail: str) -> Refused:
    message = (
        f'TokenRequest.authentication.k8s.io "{name}" is invalid: '
        f"{field}: Invalid value: {json.dumps(value)}: {detail}"
    )
    return Refused(status(422, "Invalid", message, name=name, kind="TokenRequest"))


def _bad(message: str) -> Refused:
    return Refused(status(400, "BadRequest", message))


async def _body(request: web.Request) -> dict[str, Any]:
    raw = await httpbounds.read_body(request, MAX_BODY_BYTES)
    if len(raw) > MAX_BODY_BYTES:
        raise Refused(status(413, "RequestEntityTooLarge", "the request body is too large"))
    try:
        if request.content_type == protowire.CONTENT_TYPE:
            sent_version, sent_kind, message = protowire.unwrap(raw)
            if (sent_version, sent_kind) != (API_VERSION, "TokenRequest"):
                raise _bad(
                    f"the body of the request is a {sent_version}, Kind={sent_kind}, "
                    "not a TokenRequest"
                )
            return protowire.token_request(message)
        body = json.loads(raw.decode() or "{}")
    except (ValueError, UnicodeDecodeError, RecursionError) as e:
        raise _bad(f"the body of the request was in an unknown format: {e}") from None
    if not isinstance(body, dict):
        raise _bad("the body of the request must be a TokenRequest object")
    kind, version = body.get("kind"), body.get("apiVersion")
    if kind not in (None, "TokenRequest") or version not in (None, API_VERSION):
        raise _bad(f"the body of the request is a {version}, Kind={kind}, not a TokenRequest")
    return body


def _spec(name: str, body: dict[str, Any]) -> tuple[list[str], int, dict[str, Any] | None]:
    spec = body.get("spec") or {}
    if not isinstance(spec, dict):
        raise _bad("spec: the TokenRequest's spec must be an object")
    audiences = spec.get("audiences") or []
    if (
        not isinstance(audiences, list)
        or len(audiences) > MAX_AUDIENCES
        or not all(isinstance(a, str) and 0 < len(a) <= 1024 for a in audiences)
    ):
        raise _invalid(
            name, "spec.audiences", audiences, f"at most {MAX_AUDIENCES} non-empty strings"
        )
    seconds = spec.get("expirationSeconds", DEFAULT_SECONDS)
    if seconds is None:
        seconds = DEFAULT_SECONDS
    if not isinstance(seconds, int) or isinstance(seconds, bool):
        raise _bad(f"spec.expirationSeconds: must be an integer, not {json.dumps(seconds)}")
    if seconds < MIN_SECONDS:
        detail = "may not specify a duration less than 10 minutes"
        raise _invalid(name, "spec.expirationSeconds", seconds, detail)
    if seconds > MAX_SECONDS:
        detail = "may not specify a duration larger than 2^32 seconds"
        raise _invalid(name, "spec.expirationSeconds", seconds, detail)
    bound = spec.get("boundObjectRef")
    if bound is not None and not isinstance(bound, dict):
        raise _bad("spec.boundObjectRef: must be an object")
    return [str(a) for a in audiences], seconds, bound


def _binding(
    node: Kubelet, namespace: str, name: str, bound: dict[str, Any] | None
) -> dict[str, Any]:
    """The fields of :class:`TokenRequest` that bind the token to ``bound``; refusals as
    the API server's."""
    if bound is None:
        return {"pod_name": "", "pod_uid": ""}
    kind, version = bound.get("kind"), bound.get("apiVersion") or "v1"
    target, uid = str(bound.get("name") or ""), str(bound.get("uid") or "")
    if version != "v1" or kind not in ("Pod", "Secret", "Node"):
        raise _bad(f"cannot bind token to object of type {version}, Kind={kind}")
    if kind == "Pod":
        record = node.status.find(namespace, target)
        if record is None:
            raise Refused(not_found("pods", target))
        spec = record.view.spec
        account = (spec.serviceAccountName if spec is not None else None) or "default"
        if account != name:
            raise _bad(
                f'cannot bind token for serviceaccount "{name}" to pod running with '
                "different serviceaccount name."
            )
        found_uid = record.uid
    elif kind == "Secret":
        secret = node.objects.get("Secret", namespace, target)
        if secret is None:
            raise Refused(not_found("secrets", target))
        found_uid = str((secret.body.get("metadata") or {}).get("uid") or "")
    else:
        if target != node.node_name:
            raise Refused(not_found("nodes", target))
        found_uid = ""
    if uid and found_uid and uid != found_uid:
        message = (
            f'Operation cannot be fulfilled on {kind.lower()}s "{target}": the UID in the '
            f"bound object reference ({uid}) does not match the UID in record. The object "
            "might have been deleted and then recreated"
        )
        raise Refused(status(409, "Conflict", message))
    if kind == "Pod":
        return {"pod_name": target, "pod_uid": found_uid}
    if kind == "Secret":
        return {"pod_name": "", "pod_uid": "", "secret_name": target, "secret_uid": found_uid}
    return {"pod_name": "", "pod_uid": "", "node_bound": True}


async def create_token(request: web.Request) -> web.Response:
    """``POST serviceaccounts/NAME/token``."""
    node = request.app[NODE_KEY]
    namespace, name = request.match_info["namespace"], request.match_info["name"]
    try:
        body = await _body(request)
        account = node.objects.get("ServiceAccount", namespace, name)
        if account is None:
            return not_found("serviceaccounts", name)
        audiences, seconds, bound = _spec(name, body)
        binding = _binding(node, namespace, name, bound)
    except Refused as e:
        return e.response
    issuer = request.app.get(ISSUER_KEY)
    if issuer is None:
        return status(503, "ServiceUnavailable", "this node keeps no service-account key")
    account_uid = str((account.body.get("metadata") or {}).get("uid") or "")
    wanted = TokenRequest(
        namespace=namespace,
        service_account=name,
        audiences=tuple(audiences),
        expiration_seconds=seconds,
        service_account_uid=account_uid,
        **binding,
    )
    now = datetime.now(UTC)
    token = await anyio.to_thread.run_sync(lambda: issuer.issue(wanted, now=now))
    answer = {
        "kind": "TokenRequest",
        "apiVersion": API_VERSION,
        "metadata": {"name": name, "namespace": namespace, "creationTimestamp": None},
        "spec": {
            "audiences": audiences or [issuer.issuer],
            "expirationSeconds": seconds,
            "boundObjectRef": bound,
        },
        "status": {
            "token": token.value,
            "expirationTimestamp": token.expires_at.strftime("%Y-%m-%dT%H:%M:%SZ"),
        },
    }
    return web.json_response(answer, status=201)


def add_routes(app: web.Application, node: Kubelet) -> None:
    """The subresources' routes on ``app``, tokens issued by ``node``'s issuer."""
    with contextlib.suppress(RuntimeError):
        app[ISSUER_KEY] = issuer_of(node)
    router = app.router
    pod = "/api/v1/namespaces/{namespace}/pods/{name}"
    router.add_get(f"{pod}/status", pod_status)
    router.add_put(f"{pod}/status", podstatus.replace_status)
    router.add_patch(f"{pod}/status", podstatus.patch_status)
    router.add_get(f"{pod}/ephemeralcontainers", pod_status)
    router.add_put(f"{pod}/ephemeralcontainers", ephemeral.replace_ephemeral)
    router.add_patch(f"{pod}/ephemeralcontainers", ephemeral.patch_ephemeral)
    router.add_get(f"{pod}/resize", pod_status)
    router.add_put(f"{pod}/resize", resize.replace_resize)
    router.add_patch(f"{pod}/resize", resize.patch_resize)
    router.add_post("/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token", create_token)
    router.add_get("/api/v1/nodes/{name}/status", get_node)


__all__ = [
    "DEFAULT_SECONDS",
    "ISSUER_KEY",
    "MIN_SECONDS",
    "add_routes",
    "create_token",
    "issuer_of",
    "pod_status",
]
