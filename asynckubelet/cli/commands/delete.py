"""``asynckubelet delete``: objects deleted, pods gracefully, by name or by the files that
hold them.

The node daemon deletes them (a Namespace with everything in it, a Deployment,
ReplicaSet, StatefulSet or Job with the ReplicaSets and pods it controls) and answers
once their pods are gone, as kubectl's default ``--wait=true`` waits (``--wait=false``:
at once); each is reported as kubectl reports it (``pod "web" deleted``,
``configmap "x" deleted``), a missing one as ``Error from server (NotFound)`` (exit 1),
naming the file that held it as kubectl's ``AddSourceToErr`` does (``error when deleting
"pod.yaml": pods "web" not found``).
Without a daemon, the node API's in-process side stops and removes pods on Docker
directly and drops every object from those the daemon kept.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer

from asynckubelet.cli.client import node_api, read_files
from asynckubelet.cli.options import (
    AllOpt,
    DeleteFilenamesOpt,
    DeleteGracePeriodOpt,
    DeleteKindArg,
    DeleteNowOpt,
    DeleteTimeoutOpt,
    DeleteWaitOpt,
    IgnoreNotFoundOpt,
    LogOptions,
    NamesArg,
    NamespaceOpt,
    NodeRef,
    RecursiveOpt,
    UsageError,
)
from asynckubelet.cli.output import command, err, escape, fail, out
from asynckubelet.kubectl import resources

if TYPE_CHECKING:
    from asynckubelet.api.protocol import NodeAPI
    from asynckubelet.manifests import ObjectRef

PLURALS = {"Pod": "pods", "ConfigMap": "configmaps", "Secret": "secrets", "Namespace": "namespaces"}


@command()
def delete(
    kind: DeleteKindArg = None,
    names: NamesArg = None,
    *,
    files: DeleteFilenamesOpt = None,
    every: AllOpt = False,
    recursive: RecursiveOpt = False,
    namespace: NamespaceOpt = "default",
    grace_period: DeleteGracePeriodOpt = None,
    now: DeleteNowOpt = False,
    ignore_not_found: IgnoreNotFoundOpt = False,
    timeout: DeleteTimeoutOpt = 120,
    wait: DeleteWaitOpt = "true",
    node: NodeRef,
    log: LogOptions,
) -> None:
    """Delete objects: `delete KIND NAME...` (pod, configmap, secret, deployment, job...),
    `delete KIND --all` (every one of the namespace) or `delete -f FILE...` (every object
    the files or folders hold; -R: their sub-folders too); pods gracefully, waiting until
    they are gone (exit 1 naming those still there after --timeout).

    A Deployment, ReplicaSet, StatefulSet, DaemonSet, Job or CronJob takes the Jobs,
    ReplicaSets and pods it controls with it; --wait=false returns without waiting for the pods."""
    waiting = _flag_bool(wait, "--wait")
    if now:
        if grace_period is not None:
            raise UsageError("--now and --grace-period cannot both be given")
        grace_period = 1
    sources: dict[tuple[str, str], str] = {}
    if not every:
        targets, sources = _targets(
            kind, names or [], files, namespace=namespace, recursive=recursive
        )
    with node_api(node, doing="deleting on Docker directly") as api:
        if every:
            targets = _every(kind, names, files, namespace=namespace, api=api)
            if not targets:
                err.print(f"No resources found in {namespace} namespace.", highlight=False)
                return
        missing = _delete(api, targets, grace_period=grace_period, timeout=timeout, wait=waiting)
    for kind_name, object_name in missing if not ignore_not_found else ():
        where = sources.get((kind_name, object_name))
        source = f'error when deleting "{escape(where)}": ' if where else ""
        err.print(
            f'Error from server (NotFound): {source}{kind_name} "{escape(object_name)}" not found'
        )
    if missing and not ignore_not_found:
        raise typer.Exit(1)


def _targets(
    kind: str | None,
    names: list[str],
    files: list[str] | None,
    *,
    namespace: str,
    recursive: bool = False,
) -> tuple[list[ObjectRef], dict[tuple[str, str], str]]:
    """The objects the arguments name: those the files hold, ``KIND NAME...`` or
    ``KIND/NAME...``; with the file that names each (:func:`_sources`)."""
    from asynckubelet.manifests import object_refs

    if files:
        if kind is not None:
            raise UsageError("give either `-f FILE` or `KIND NAME`, not both")
        texts = read_files(files, recursive=recursive, verb="delete")
        refs = object_refs(texts)
        if not refs:
            raise fail("no objects passed to delete")
        return refs, _sources(texts)
    if kind is not None and "/" in kind:
        pairs = [ref.split("/", 1) for ref in (kind, *names)]
        if any(len(pair) != 2 or not all(pair) for pair in pairs):
            raise fail(
                "there is no need to specify a resource type as a separate argument "
                "when passing arguments in resource/name form"
            )
        return [_ref(k, n, namespace=namespace) for k, n in pairs], {}
    if kind is not None and names:
        return [_ref(kind, n, namespace=namespace) for n in names], {}
    if kind is not None:
        raise fail("resource(s) were provided, but no name was specified")
    raise UsageError(
        "give `delete KIND NAME` (pod, configmap, secret, deployment, job...) or `delete -f FILE`"
    )


def _sources(texts: list[tuple[str, str]]) -> dict[tuple[str, str], str]:
    """(plural, name) -> the file that names the object, as kubectl names the source of
    an error (``STDIN`` for ``-f -``); the first file when several name it."""
    from asynckubelet.manifests import object_refs

    found: dict[tuple[str, str], str] = {}
    for source, text in texts:
        for ref in object_refs([(source, text)]):
            key = (_qualified(ref.kind, plural=True), ref.name)
            found.setdefault(key, "STDIN" if source == "<stdin>" else source)
    return found


def _ref(kind: str, name: str, *, namespace: str) -> ObjectRef:
    from asynckubelet.manifests import ObjectRef

    found = resources.lookup(kind)
    if found is None:
        raise fail(f'the server doesn\'t have a resource type "{kind}"')
    return ObjectRef(kind=found.kind, namespace=namespace if found.namespaced else "", name=name)


def _every(
    kind: str | None,
    names: list[str] | None,
    files: list[str] | None,
    *,
    namespace: str,
    api: NodeAPI,
) -> list[ObjectRef]:
    """Every object of ``kind`` in the namespace (``--all``)."""
    if kind is None or "/" in kind or names or files:
        raise UsageError("--all takes a resource type alone: `delete KIND --all`")
    found = resources.lookup(kind)
    if found is None:
        raise fail(f'the server doesn\'t have a resource type "{kind}"')
    where = namespace if found.namespaced else None
    listed = api.list(found.plural, where)
    names = sorted(str((o.get("metadata") or {}).get("name")) for o in listed)
    return [_ref(kind, n, namespace=namespace) for n in names]


def _flag_bool(value: str, flag: str) -> bool:
    """A boolean flag's value as kubectl's flags parse it (``strconv.ParseBool``)."""
    if value in ("1", "t", "T", "true", "TRUE", "True"):
        return True
    if value in ("0", "f", "F", "false", "FALSE", "False"):
        return False
    raise UsageError(f'invalid argument "{value}" for "{flag}" flag: want true or false')


def _delete(
    api: NodeAPI,
    targets: list[ObjectRef],
    *,
    grace_period: float | None,
    timeout: float,
    wait: bool = True,
) -> list[tuple[str, str]]:
    """Delete ``targets``; the (plural, name) of those not found."""
    results = api.delete(
        [{"kind": t.kind, "namespace": t.namespace, "name": t.name} for t in targets],
        grace_period=grace_period,
        timeout=timeout,
        wait=wait,
    )
    still: list[str] = []
    missing: list[tuple[str, str]] = []
    for result in results:
        kind, name = result.get("kind", ""), result.get("name", "")
        if result.get("status") == "deleted":
            out.print(f'{escape(_qualified(kind))} "{escape(name)}" deleted')
        elif result.get("status") == "timeout":
            still.append(f"{result.get('namespace')}/{name}")
        else:
            missing.append((_qualified(kind, plural=True), name))
    if still:
        waited = f"timed out after {timeout:g}s waiting for the pods to be gone"
        raise fail(f"{waited}; still present: {', '.join(sorted(still))}")
    return missing


def _qualified(kind: str, *, plural: bool = False) -> str:
    """kubectl's ``deployment.apps`` (``deployments.apps`` for ``plural``) of a kind."""
    found = resources.lookup(kind)
    if found is None:
        return PLURALS.get(kind, kind.lower()) if plural else kind.lower()
    return found.qualified_plural if plural else found.qualified
