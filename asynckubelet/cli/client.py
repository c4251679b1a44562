"""How the client commands (apply, delete, get, describe, logs, exec) reach a node.

Each command asks the node API once (:func:`node_api`, the side picked by
:func:`~asynckubelet.api.connect.connect`): a running ``serve``, found through
``--state-dir`` alone, or without one the node read in this process from Docker and its
state dir, said in one line on stderr. ``apply`` needs the daemon: admission is its.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from asynckubelet.cli.options import NodeRef
from asynckubelet.cli.output import err, fail, warn

if TYPE_CHECKING:
    from lightkube.models.core_v1 import Pod

    from asynckubelet.api.client import NodeClient
    from asynckubelet.api.protocol import NodeAPI
    from asynckubelet.manifests import Level, Manifests


@contextlib.contextmanager
def node_api(
    node: NodeRef, *, doing: str = "reading Docker directly", needs: str | None = None
) -> Iterator[NodeAPI]:
    """The node of ``node``'s state dir, asked once (:func:`~asynckubelet.api.connect.connect`):
    its daemon when one answers, else the node read in this process, after the one-line
    notice ``no node daemon for state dir ...: <doing>`` on stderr; when what the command
    does ``needs`` a daemon, the error saying how to start one instead. Closed on leaving."""
    from asynckubelet.api.connect import connect

    api = connect(state=node.state, node_name=node.name, docker_host=node.docker_host)
    if not api.remote:
        if needs is not None:
            from asynckubelet.api.protocol import daemon_needed

            api.close()
            raise daemon_needed(node.state, needs)
        from asynckubelet.cli.process import release_collector

        err.print(f"no node daemon for state dir {node.state}: {doing}", markup=False)
        release_collector()
    try:
        yield api
    finally:
        api.close()


def find_daemon(node: NodeRef) -> NodeClient | None:
    """The daemon of ``node``'s state dir, or None (nothing said) when none runs; a
    socket this user may not use is an error naming it."""
    from asynckubelet.api.connect import find_daemon as find

    return find(node.state)


def require_daemon(node: NodeRef, *, verb: str) -> NodeClient:
    """The daemon, or the error saying how to start one."""
    client = find_daemon(node)
    if client is None:
        from asynckubelet.api.protocol import daemon_needed

        raise daemon_needed(node.state, verb)
    return client


WORKLOAD_TYPES = (
    "deployments",
    "replicasets",
    "statefulsets",
    "jobs",
    "daemonsets",
    "cronjobs",
    "services",
)
"""What ``logs`` and ``exec`` take as ``TYPE/NAME`` beside pods: their pods' selector."""


@dataclasses.dataclass(frozen=True)
class PodRef:
    """A pod, or a workload or service (``plural``) whose pods it stands for."""

    plural: str | None
    name: str
    text: str
    """As the user wrote it."""


def pod_ref(ref: str, *, attach: bool = False) -> PodRef:
    """What ``ref`` names, as ``kubectl logs`` and ``exec`` read it: ``NAME`` or
    ``pod/NAME`` is that pod (None, name); ``TYPE/NAME`` of a workload or a service is
    (its plural, its name), whose pods :func:`pod_name` chooses among. A type without
    pods is refused here, before the node is asked (``attach``: for ``exec``, whose
    wording differs from ``logs``')."""
    from asynckubelet.cli.options import KIND_OF, POD_KINDS, RESOURCES

    if "/" not in ref:
        return PodRef(None, ref, ref)
    kind, _, name = ref.partition("/")
    if kind in POD_KINDS or RESOURCES.get(kind) == "pods":
        return PodRef(None, name, ref)
    plural = RESOURCES.get(kind)
    if plural is None:
        raise fail(f'the server doesn\'t have a resource type "{kind}"')
    if plural not in WORKLOAD_TYPES:
        what = f"*v1.{KIND_OF.get(plural, plural)}"
        doing = "attach to" if attach else "get the logs from"
        raise fail(f"cannot {doing} {what}: selector for {what} not implemented")
    return PodRef(plural, name, ref)


def pod_name(ref: PodRef, *, namespace: str, api: NodeAPI) -> str:
    """The pod a :func:`pod_ref` names: the pod itself, or the most active of the pods
    the workload's or service's selector matches (kubectl's choice), named on stderr when
    there are several (``Found 2 pods, using pod/web-...``)."""
    plural, name = ref.plural, ref.name
    if plural is None:
        return name
    spec = api.get(plural, namespace, name).get("spec") or {}
    selector = (
        {"matchLabels": spec.get("selector") or {}}
        if plural == "services"
        else spec.get("selector")
    )
    pods = select_pods(api.list("pods", namespace), selector)
    if not pods:
        raise fail(f'no pods found for {ref.text} in namespace "{namespace}"')
    if len(pods) > 1:
        err.print(
            f"Found {len(pods)} pods, using pod/{pods[0]['metadata']['name']}", highlight=False
        )
    return str(pods[0]["metadata"]["name"])


def select_pods(
    pods: list[dict[str, Any]], selector: dict[str, Any] | None
) -> list[dict[str, Any]]:
    """The pods ``selector`` matches, the most active first, in kubectl's order
    (``ActivePods`` reversed): on a node, running, ready, ready longest, fewer restarts,
    older."""
    from asynckubelet.manifests.selectors import selector_matches

    if not selector:
        return []
    chosen = [
        p
        for p in pods
        if selector_matches(selector, (p.get("metadata") or {}).get("labels") or {})
        and not (p.get("metadata") or {}).get("deletionTimestamp")
    ]
    return sorted(chosen, key=_activity)


_PHASE_RANK = {"Running": 0, "Unknown": 1, "Pending": 2}


def _activity(pod: dict[str, Any]) -> tuple[int, int, int, str, int, str]:
    """A sort key: the most active pod first."""
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    ready = next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), None)
    is_ready = ready is not None and ready.get("status") == "True"
    restarts = sum(c.get("restartCount") or 0 for c in status.get("containerStatuses") or [])
    return (
        0 if spec.get("nodeName") else 1,
        _PHASE_RANK.get(str(status.get("phase")), 3),
        0 if is_ready else 1,
        # ready longest: the earliest transition to Ready first, an unknown time last
        str(ready.get("lastTransitionTime") or "~") if is_ready and ready else "~",
        restarts,
        str((pod.get("metadata") or {}).get("creationTimestamp") or "~"),
    )


def as_pod(data: dict[str, object]) -> Pod:
    """A v1 Pod the daemon answered, as the typed object."""
    from typing import cast

    from lightkube.models.core_v1 import Pod

    return cast(Pod, Pod.from_dict(data))


def check_paths(files: list[str], *, recursive: bool = False) -> None:
    """kubectl's checks of ``-f`` before anything is read: a path that does not exist,
    and a folder with no manifest file (``.json``, ``.yaml``, ``.yml``; with
    ``recursive`` in its sub-folders too), are one error line each."""
    from pathlib import Path

    from asynckubelet.manifests import manifest_files

    for name in files:
        if name == "-":
            continue
        path = Path(name)
        if not path.exists():
            raise fail(f'the path "{name}" does not exist')
        try:
            empty = path.is_dir() and not manifest_files(path, recursive=recursive)
        except OSError as e:
            raise fail(f"error reading [{name}]: {e.strerror or e}") from None
        if empty:
            raise fail(f"error reading [{name}]: recognized file extensions are [.json .yaml .yml]")


def read_files(files: list[str], *, recursive: bool, verb: str) -> list[tuple[str, str]]:
    """The ``(name, text)`` of every manifest file ``-f`` names (folders as kubectl reads
    them, recursively with ``-R``); ``no objects passed to <verb>`` when there is no text."""
    from asynckubelet.manifests import read_sources

    check_paths(files, recursive=recursive)
    texts = read_sources(files, recursive=recursive)
    if not any(text.strip() for _, text in texts):
        raise fail(f"no objects passed to {verb}")
    return texts


def load_files(files: list[str], *, node_name: str, level: Level) -> Manifests:
    """The manifests in ``files``, validated for this node; their warnings shown."""
    from asynckubelet.manifests import load_manifests

    loaded = load_manifests(files, pod_security=level, node_name=node_name)
    for warning in loaded.warnings:
        warn(str(warning))
    return loaded
