"""The node's writes: ``apply`` (manifest texts in; each object's verdict, ``created``,
``configured`` or ``unchanged``, out, or 422 with every field error and nothing
applied) and the deletion of one object with what goes with it (:func:`delete_one`: a
namespace's contents, a workload's ReplicaSets and pods), which the Kubernetes API's
``DELETE`` does (:mod:`asynckubelet.api.kube.writes`). Admission happens here, with the
daemon's level, node name and namespace policy, and with the Namespaces it stores: one
admission for every client.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import anyio
import anyio.abc
import anyio.to_thread
from aiohttp import web
from lightkube.models.core_v1 import Namespace, Pod

from asynckubelet import errors
from asynckubelet._logging import logger
from asynckubelet.api.answers import SERVICES_KEY, TERMINATING_KEY, served_pod, served_pods, status
from asynckubelet.api.endpoints import NODE_KEY
from asynckubelet.api.objects import terminating
from asynckubelet.errors import FieldError
from asynckubelet.kubectl import pods as pod_printing
from asynckubelet.kubectl import resources
from asynckubelet.manifests import Manifests, inspect_manifests_text
from asynckubelet.manifests import kinds as kind_table
from asynckubelet.manifests.selectors import parse_label_selector, selector_matches
from asynckubelet.node.daemon import API_GROUP
from asynckubelet.node.kubelet import API_SOURCE, Kubelet
from asynckubelet.node.objects import (
    KINDS,
    PLURALS,
    RESOURCES,
    Applied,
    StoredObject,
    object_key,
)
from asynckubelet.runtime import containers as ctr
from asynckubelet.workloads.controller import OWNER_KINDS
from asynckubelet.workloads.pods import controller_of


def _cause(error: FieldError) -> dict[str, str]:
    return {
        "field": error.field,
        "reason": error.reason,
        "message": error.detail,
        "source": error.source,
    }


async def _body(request: web.Request) -> dict[str, Any]:
    try:
        body = await request.json()
    except (ValueError, UnicodeDecodeError):
        raise web.HTTPBadRequest(text="the request body is not JSON\n") from None
    if not isinstance(body, dict):
        raise web.HTTPBadRequest(text="the request body must be a JSON object\n")
    return body


@dataclass(frozen=True)
class Forbidden:
    """A PodSecurity rejection: the error, the file and the object it refuses."""

    error: FieldError
    source: str
    kind: str
    name: str

    def message(self) -> str:
        """The API server's: ``error when creating "web.yaml": pods "web" is forbidden:
        violates PodSecurity ...``."""
        info = kind_table.KINDS[self.kind]
        group = info.api_version.rpartition("/")[0]
        what = f"{info.plural}.{group}" if group else info.plural
        return (
            f'error when creating "{self.source}": {what} "{self.name}" is forbidden: '
            f"{self.error.detail}"
        )


def admit(
    files: list[tuple[str, str]], *, node: Kubelet, namespaces: list[Namespace]
) -> tuple[Manifests, tuple[FieldError, ...], tuple[FieldError, ...], tuple[Forbidden, ...]]:
    """Load ``(source, text)`` files as this node admits them (its level, node name and
    namespace policy; Namespaces stored or in an earlier file count): everything they
    hold, every error, every warning, and the PodSecurity rejections among the errors."""
    config = node.config
    merged: dict[str, list[Any]] = {
        "pods": [],
        "configmaps": [],
        "secrets": [],
        "ns": [],
        "objects": [],
        "services": [],
        "order": [],
    }
    secret_data: dict[tuple[str, str], Mapping[str, bytes]] = {}
    problems: list[FieldError] = []
    warnings: list[FieldError] = []
    forbidden: list[Forbidden] = []
    known = list(namespaces)
    for source, text in files:
        report = inspect_manifests_text(
            text,
            source_name=source,
            pod_security=config.pod_security,
            allow_namespace_policy=config.allow_namespace_policy,
            node_name=node.node_name,
            namespaces=known,
        )
        problems += report.errors
        warnings += report.warnings
        forbidden += [Forbidden(e, source, kind, name) for e, kind, name in report.forbidden]
        found = report.manifests
        known += found.namespaces
        merged["pods"] += found.pods
        merged["configmaps"] += found.configmaps
        merged["secrets"] += found.secrets
        merged["ns"] += found.namespaces
        merged["objects"] += found.objects
        merged["services"] += found.services
        merged["order"] += found.order
        secret_data.update(found.secret_data)
    manifests = Manifests(
        pods=tuple(merged["pods"]),
        configmaps=tuple(merged["configmaps"]),
        secrets=tuple(merged["secrets"]),
        secret_data=secret_data,
        namespaces=tuple(merged["ns"]),
        services=tuple(merged["services"]),
        warnings=tuple(warnings),
        objects=tuple(merged["objects"]),
        order=tuple(merged["order"]),
    )
    return manifests, tuple(problems), tuple(warnings), tuple(forbidden)


APPLY_KIND = "Apply"
APPLY_VERSION = f"{API_GROUP}/v1"


async def apply(request: web.Request) -> web.Response:
    """``POST /apis/local.asynckubelet/v1/applies``: an ``Apply`` whose ``spec`` is
    ``{"files": [{"source": name, "manifest": text}, ...], "prune": {"selector": s,
    "all": bool}}`` applies every object of every file, or (any error, an immutable field
    changed included) none, and comes back ``201`` with ``status.items`` (each object's
    verdict), ``status.pruned`` and ``status.warnings``. With ``prune``, the objects applied
    earlier through this API that the files no longer hold are then deleted, those
    matching the label ``selector`` (or ``all``), in the namespaces the files name, as
    ``kubectl apply --prune`` deletes them."""
    node = request.app[NODE_KEY]
    body = await _body(request)
    if body.get("apiVersion") != APPLY_VERSION or body.get("kind") != APPLY_KIND:
        return status(
            400,
            "BadRequest",
            f"the object must be an {APPLY_KIND} of {APPLY_VERSION}, "
            f"not {body.get('kind')!r} of {body.get('apiVersion')!r}",
        )
    spec = body.get("spec")
    files = spec.get("files") if isinstance(spec, dict) else None
    if not isinstance(files, list) or not all(
        isinstance(f, dict) and isinstance(f.get("manifest"), str) for f in files
    ):
        return status(400, "BadRequest", 'spec must be {"files": [{"source", "manifest"}]}')
    assert isinstance(spec, dict)  # noqa: S101  (type narrowing: files came from it)
    selector = _prune_selector(spec.get("prune"))
    if isinstance(selector, web.Response):
        return selector
    texts = [(str(f.get("source") or "<text>"), str(f["manifest"])) for f in files]
    outcome = await admit_and_apply(request.app, texts)
    if isinstance(outcome, web.Response):
        return outcome
    verdicts, warnings = outcome
    pruned = await _prune(node, verdicts, selector) if selector is not None else []
    return web.json_response(
        {
            "kind": APPLY_KIND,
            "apiVersion": APPLY_VERSION,
            "metadata": {"creationTimestamp": None},
            "spec": spec,
            "status": {
                "items": [_verdict(node, a) for a in verdicts],
                "pruned": pruned,
                "warnings": [_cause(w) for w in warnings],
            },
        },
        status=201,
    )


async def admit_and_apply(
    app: web.Application, texts: list[tuple[str, str]], *, dry_run: bool = False
) -> tuple[list[Applied], tuple[FieldError, ...]] | web.Response:
    """Admit the ``(source, text)`` files and store what they hold (not with
    ``dry_run``): each object's verdict in input order and the warnings, or the API
    server's answer refusing them all. Every write of every API comes through here."""
    node = app[NODE_KEY]
    namespaces = node.objects.namespaces()
    manifests, problems, warnings, policy = await anyio.to_thread.run_sync(
        lambda: admit(texts, node=node, namespaces=namespaces)
    )
    services = app[SERVICES_KEY]
    if not problems and services is not None:
        manifests, refused = await services.admit(manifests)
        problems = (*problems, *refused)
    if problems and len(policy) == len(problems):
        for rejection in policy:
            logger.info(
                "{}/{} rejected from {}",
                _singular(rejection.kind),
                rejection.name,
                rejection.source,
            )
        return _forbidden(policy)
    if problems:
        return _rejected(problems)
    verdicts = in_input_order(node.objects.verdicts(manifests), manifests.order)
    forbidden = _in_terminating_namespace(app, node, verdicts)
    if forbidden is not None:
        return forbidden
    if dry_run:
        update = node.objects.update_errors(manifests)
        return _rejected(update) if update else (verdicts, warnings)
    if verdicts:
        try:
            await node.apply(manifests)
        except errors.ManifestError as e:
            return _rejected(tuple(e.errors))
    for applied in verdicts:
        if applied.verdict != "unchanged":
            logger.info("{} {}", applied, "from " + ", ".join(s for s, _ in texts))
    return verdicts, warnings


def in_input_order(
    verdicts: list[Applied], order: Sequence[tuple[str, str | None, str]]
) -> list[Applied]:
    """The verdicts in the order the files hold their objects, as kubectl reports them
    (the node applies them by kind: Namespaces first, then what pods use)."""
    rank: dict[tuple[str, str, str], int] = {}
    for i, (kind, namespace, name) in enumerate(order):
        rank.setdefault(object_key(kind, namespace, name), i)
    return sorted(verdicts, key=lambda a: rank.get((a.kind, a.namespace, a.name), len(rank)))


def _prune_selector(prune: object) -> dict[str, Any] | web.Response | None:
    """An apply's ``prune``: its label selector (``{}`` with ``all``), None without
    one, or the ``BadRequest`` answer for a malformed one."""
    if prune is None:
        return None
    if not isinstance(prune, dict):
        return status(400, "BadRequest", 'prune must be {"selector": text, "all": bool}')
    try:
        selector = parse_label_selector(str(prune.get("selector") or ""))
    except ValueError as e:
        return status(400, "BadRequest", str(e))
    if not selector and prune.get("all") is not True:
        return status(400, "BadRequest", "prune needs a label selector or all")
    return selector


def _in_terminating_namespace(
    app: web.Application, node: Kubelet, verdicts: Iterable[Applied]
) -> web.Response | None:
    """The API server's ``Forbidden`` for the first object an apply would create in a
    namespace being terminated; None when there is none."""
    for made in verdicts:
        if (
            made.kind != "Namespace"
            and made.verdict == "created"
            and terminating(app, node, made.namespace)
        ):
            known = resources.by_plural(PLURALS[made.kind])
            what = known.qualified_plural if known else PLURALS[made.kind]
            return status(
                403,
                "Forbidden",
                f'{what} "{made.name}" is forbidden: unable to create new content in '
                f"namespace {made.namespace} because it is being terminated",
            )
    return None


def _singular(kind: str) -> str:
    return kind_table.KINDS[kind].resource


def _forbidden(rejections: Sequence[Forbidden]) -> web.Response:
    """The API server's ``Forbidden``, one line per object PodSecurity refuses, each as
    kubectl prints it after the first."""
    message = "\nError from server (Forbidden): ".join(r.message() for r in rejections)
    first = rejections[0]
    return status(
        403,
        "Forbidden",
        message,
        name=first.name,
        kind=PLURALS.get(first.kind, first.kind),
    )


def _rejected(problems: Iterable[FieldError]) -> web.Response:
    found = list(problems)
    n = len(found)
    message = f"manifests rejected: {n} {'error' if n == 1 else 'errors'}"
    return status(422, "Invalid", message, causes=[_cause(e) for e in found])


PRUNE_KINDS = tuple(k for k in KINDS if k != "Namespace")
"""What ``--prune`` may delete: kubectl's default allowlist of the kinds kept here, less
Namespaces (a Namespace takes everything in it)."""


async def _prune(
    node: Kubelet, applied: Iterable[Applied], selector: Mapping[str, Any]
) -> list[dict[str, str]]:
    """Delete the objects of the node's API in the applied namespaces that the apply did
    not hold and that match ``selector``; each one deleted."""
    kept = {(a.kind, a.namespace, a.name) for a in applied}
    spaces = {a.namespace for a in applied if a.kind != "Namespace"} or {"default"}
    pruned: list[dict[str, str]] = []
    for kind in PRUNE_KINDS:
        for obj in node.objects.list(kind):
            if obj.source != API_SOURCE or obj.key in kept or obj.namespace not in spaces:
                continue
            if not selector_matches(selector, obj.labels):
                continue
            if kind == "Pod":
                await node.delete(obj.namespace, obj.name, wait=False)
            else:
                node.objects.remove(kind, obj.namespace, obj.name)
            logger.info("{}/{} pruned", obj.resource, obj.name)
            pruned.append(_ref(obj.kind, obj.namespace, obj.name))
    return pruned


def _ref(kind: str, namespace: str, name: str) -> dict[str, str]:
    found = kind_table.info(kind)
    return {
        "kind": kind,
        "namespace": namespace,
        "name": name,
        "resource": found.qualified if found is not None else kind.lower(),
    }


def _verdict(node: Kubelet, applied: Applied) -> dict[str, Any]:
    """One object's verdict, with the object as stored (what ``--wait`` waits for)."""
    item: dict[str, Any] = {
        **_ref(applied.kind, applied.namespace, applied.name),
        "verdict": applied.verdict,
    }
    stored = node.objects.get(applied.kind, applied.namespace, applied.name)
    if stored is None:
        return item
    if applied.kind == "Pod":
        pod = cast(Pod, Pod.from_dict(copy.deepcopy(dict(stored.body))))
        item["object"] = pod_printing.pod_document(served_pod(node, pod))
    elif applied.kind != "Secret":
        item["object"] = dict(stored.body)
    return item


async def _delete_namespace_contents(
    node: Kubelet, name: str, *, grace: float | None
) -> list[dict[str, str]]:
    """Forget the objects of namespace ``name`` (its workloads first, so no controller
    makes new pods), then delete its pods, not waiting; the pods deleted."""
    for other in KINDS:
        if other == "Namespace":
            continue
        for obj in node.objects.list(other, name):
            node.objects.remove(other, name, obj.name)
    deleted = []
    for inner in [*served_pods(node, name)]:
        pod_name = ctr.pod_identity(inner)[0]
        if await node.delete(name, pod_name, grace_period=grace, wait=False):
            deleted.append({"namespace": name, "name": pod_name})
    return deleted


async def delete_one(
    app: web.Application, node: Kubelet, result: dict[str, str], *, grace: float | None
) -> list[dict[str, str]]:
    """Delete the object ``result`` names and set its status; the pods to wait for."""
    kind, namespace, name = result["kind"], result["namespace"], result["name"]
    if kind == "Pod":
        if not await node.delete(namespace, name, grace_period=grace, wait=False):
            return []
        result["status"] = "deleted"
        return [result]
    pods = []
    if kind == "Namespace":
        app[TERMINATING_KEY].add(name)
        pods = [
            {"kind": "Pod", **pod, "status": "deleted"}
            for pod in await _delete_namespace_contents(node, name, grace=grace)
        ]
    stored = node.objects.get(kind, namespace, name)
    found = dependents(node, stored) if stored is not None else []
    if node.objects.remove(kind, namespace, name) is not None:
        result["status"] = "deleted"
        logger.info("{} {} deleted", RESOURCES[kind], "/".join(filter(None, (namespace, name))))
    for obj in found:
        if obj.kind != "Pod":
            node.objects.remove(obj.kind, obj.namespace, obj.name)
    for obj in found:
        if obj.kind == "Pod":
            await node.delete(obj.namespace, obj.name, grace_period=grace, wait=False)
            pods.append({"kind": "Pod", "namespace": obj.namespace, "name": obj.name})
    if stored is not None and stored.kind in OWNER_KINDS:
        pods += stopping(node, {o.uid for o in (stored, *found)}, pods)
    return pods


def stopping(
    node: Kubelet, owners: set[str], counted: list[dict[str, str]]
) -> list[dict[str, str]]:
    """The pods of ``owners`` deleted earlier (a rollout's old ones) that the node is
    still stopping: gone from the store, waited for all the same."""
    known = {(p["namespace"], p["name"]) for p in counted}
    found = []
    for pod in node.views():
        meta = pod.metadata
        if meta is None or not meta.ownerReferences:
            continue
        refs = [r for r in meta.ownerReferences if r.controller and r.uid in owners]
        key = (meta.namespace or "default", meta.name or "")
        if refs and key not in known:
            found.append({"kind": "Pod", "namespace": key[0], "name": key[1]})
    return found


def dependents(node: Kubelet, owner: StoredObject) -> list[StoredObject]:
    """The objects ``owner`` controls, and theirs (a Deployment's ReplicaSets and their
    pods): what the garbage collector would remove after it, removed with it so that
    ``delete`` can wait for the pods."""
    if owner.kind not in OWNER_KINDS:
        return []
    found: list[StoredObject] = []
    owners = {owner.uid}
    for kind in ("Job", "ReplicaSet", "ControllerRevision", "Pod"):
        for obj in node.objects.list(kind, owner.namespace):
            controller = controller_of(obj.body.get("metadata"))
            if controller is not None and controller.uid in owners:
                found.append(obj)
                owners.add(obj.uid)
    return found


# -- the app ---------------------------------------------------------------------------------
