"""``asynckubelet apply``: manifests handed to the node daemon, which admits and keeps them.

As kubectl sends objects to an API server, this command sends each file's text to the
running ``serve`` of the state dir: the daemon validates and admits it with its own Pod
Security level, node name and namespace policy, stores every object, and answers each
object's verdict, printed as kubectl prints it (``deployment.apps/web created``,
``secret/db unchanged``), or every field error, printed once (exit 1, nothing applied).
Applying the same files again changes nothing (``unchanged``); an edited Deployment rolls
out, an edited pod restarts only the containers whose spec changed. ``--prune`` then
deletes what the node's API holds of an earlier apply that the files no longer hold,
among the objects selected by ``-l`` (or ``--all``), as kubectl's label-scoped prune does.
``-n NS`` puts the objects that name no namespace in NS and refuses, before anything is
applied, an object that names another, in kubectl's words.
``-k DIR`` applies what ``kustomize build DIR`` makes, through the ``kustomize`` binary
or ``kubectl kustomize``, whichever is on the ``PATH``. Without a daemon there is
nothing to apply to: the command says how to start one.

``--wait`` waits for each object's own readiness: pods Ready (or Succeeded) on the
applied spec, Deployments rolled out, Jobs complete, StatefulSets and ReplicaSets ready,
Services that select pods with a ready endpoint;
while it waits it names, per object, the pod and container that hold it back with the
kubelet's reason and message; it ends with exit 1 as soon as one cannot get there (a Job
failed, a rollout exceeded its deadline, a pod waits for what waiting will not bring: see
:mod:`asynckubelet.node.failures`; a container that crash-loops past ``--max-restarts``,
with its last exit code and log line).
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from asynckubelet.cli.client import as_pod, node_api, read_files
from asynckubelet.cli.options import (
    BuildArgOpt,
    BuildOpt,
    BuildTargetOpt,
    ConfigTimeoutOpt,
    DevWatchOpt,
    LogOptions,
    MaxRestartsOpt,
    NodeRef,
    RecursiveOpt,
    UsageError,
    WaitOpt,
    WaitTimeoutOpt,
    check_max_restarts,
)
from asynckubelet.cli.output import command, err, escape, fail, made, out, run_async, warn

if TYPE_CHECKING:
    from lightkube.models.core_v1 import Pod

    from asynckubelet.api.protocol import NodeAPI

ApplyFilenamesOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--filename",
        "-f",
        metavar="FILENAME",
        help="Manifest file or folder (repeatable); - for stdin.",
    ),
]
KustomizeOpt = Annotated[
    str | None,
    typer.Option(
        "--kustomize",
        "-k",
        metavar="DIR",
        help="Apply what `kustomize build DIR` makes (the kustomize binary or kubectl "
        "kustomize, whichever is on the PATH).",
    ),
]
ApplyNamespaceOpt = Annotated[
    str | None,
    typer.Option(
        "--namespace",
        "-n",
        metavar="NAMESPACE",
        help="The namespace of the objects that name none; an object naming another is "
        "refused and nothing is applied.",
    ),
]
PruneOpt = Annotated[
    bool,
    typer.Option(
        "--prune",
        metavar="",
        help="Delete the objects applied earlier that these files no longer hold, among "
        "those -l selects (or --all).",
    ),
]
SelectorOpt = Annotated[
    str | None,
    typer.Option(
        "--selector",
        "-l",
        metavar="SELECTOR",
        help="Label selector for --prune (app=web,tier!=db).",
    ),
]
PruneAllOpt = Annotated[
    bool,
    typer.Option("--all", metavar="", help="With --prune: every object applied earlier."),
]
POLL = 0.3
"""Seconds between looks at the workloads waited for."""
KUSTOMIZE_TIMEOUT = 120.0
DEFAULT_MAX_RESTARTS = 3
LOG_LINE_BYTES = 4096
"""Bytes of a crash-looping container's output read for its last line."""


@command()
def apply(
    *,
    files: ApplyFilenamesOpt = None,
    recursive: RecursiveOpt = False,
    kustomize: KustomizeOpt = None,
    namespace: ApplyNamespaceOpt = None,
    prune: PruneOpt = False,
    selector: SelectorOpt = None,
    prune_all: PruneAllOpt = False,
    wait: WaitOpt = False,
    timeout: WaitTimeoutOpt = 300.0,
    config_timeout: ConfigTimeoutOpt = 30.0,
    max_restarts: MaxRestartsOpt = DEFAULT_MAX_RESTARTS,
    build: BuildOpt = False,
    build_arg: BuildArgOpt = None,
    target: BuildTargetOpt = None,
    watch: DevWatchOpt = False,
    node: NodeRef,
    log: LogOptions,
) -> None:
    """Hand manifests to the node daemon (`asynckubelet serve`), which admits and keeps
    every object: Pods, ConfigMaps, Secrets, Namespaces, Services, Deployments,
    ReplicaSets, StatefulSets, Jobs, DaemonSets, CronJobs. -f takes files and folders (-R:
    with their sub-folders), - for stdin; -k a kustomization.

    Re-applying unchanged files changes nothing; an edited Deployment rolls out (its
    maxSurge and maxUnavailable honoured), an edited pod restarts only the containers
    whose spec changed. --prune -l SELECTOR (or --all) deletes what an earlier apply made
    that the files no longer hold. --wait waits until pods are Ready, Deployments rolled
    out and Jobs complete, and ends early, exit 1, on what waiting will not fix: a failed
    Job, a rollout past its deadline, a pod the node rejected or whose image does not
    exist or whose registry name does not resolve, a container still in
    CreateContainerConfigError after --config-timeout or crash-looping past
    --max-restarts; while it waits it names the pod and container that hold each object
    back, and why. --build first builds each image whose build context is known and
    applies the objects with their containers on the built image IDs (--build-arg and
    --target as docker build's). --watch applies again (and rebuilds) on each change of
    the files and build contexts, until Ctrl-C; with --build, a container's watch rules
    (annotation watch.asynckubelet.dev/NAME) sync changed sources into its running
    containers instead.
    """
    check_max_restarts(max_restarts)
    _check_choices(
        files=files, kustomize=kustomize, prune=prune, selector=selector, prune_all=prune_all
    )
    from asynckubelet.cli.building import build_options

    options = build_options(build, build_arg, target)
    contexts: set[Path] = set()
    from asynckubelet.cli.devsync import WatchState

    rules = WatchState()

    def once(api: NodeAPI) -> None:
        texts = _texts(files, kustomize, recursive=recursive)
        if namespace is not None:
            texts = [(source, _in_namespace(text, namespace)) for source, text in texts]
        if build:
            from asynckubelet.cli.building import build_texts

            engine = node.docker_host or str(api.node().get("docker_host") or "") or None
            if watch:
                rules.read(texts, docker_host=engine)
            texts = build_texts(texts, docker_host=engine, watched=contexts, options=options)
        _apply(api, texts, node=node, prune=prune, selector=selector, prune_all=prune_all,
               wait=wait, timeout=timeout, config_timeout=config_timeout,
               max_restarts=max_restarts)  # fmt: skip

    with node_api(node, needs="apply") as api:
        if not watch:
            once(api)
            return
        from asynckubelet.cli.devwatch import watch as follow
        from asynckubelet.cli.output import interrupt_on_signals

        with interrupt_on_signals():
            follow(
                lambda: [*map(Path, files or [kustomize or "."]), *contexts],
                lambda: once(api),
                sync=rules.sync,
            )
        raise typer.Exit(128 + 2)


def _apply(
    api: NodeAPI,
    texts: list[tuple[str, str]],
    *,
    node: NodeRef,
    prune: bool,
    selector: str | None,
    prune_all: bool,
    wait: bool,
    timeout: float,
    config_timeout: float,
    max_restarts: int = DEFAULT_MAX_RESTARTS,
) -> None:
    result = api.apply(
        texts, prune_selector=selector if prune else None, prune_all=prune and prune_all
    )
    for warning in result.get("warnings") or []:
        source = f"{warning.get('source')}: " if warning.get("source") else ""
        detail = f": {warning['message']}" if warning.get("message") else ""
        warn(f"{source}{warning.get('field')}: {warning.get('reason')}{detail}")
    if not result.get("items"):
        raise fail("no objects passed to apply")
    pods, workloads, services = _report(result)
    if wait and (pods or workloads or services):
        run_async(
            _wait,
            [as_pod(p) for p in pods],
            workloads,
            services,
            api,
            node,
            timeout,
            config_timeout,
            max_restarts,
        )


def _check_choices(
    *,
    files: list[str] | None,
    kustomize: str | None,
    prune: bool,
    selector: str | None,
    prune_all: bool,
) -> None:
    """Refuse the flag combinations kubectl refuses (and -f with -k)."""
    if not files and kustomize is None:
        raise UsageError("must specify one of -f and -k")
    if files and kustomize is not None:
        raise UsageError("only one of -f or -k can be specified")
    if prune and not selector and not prune_all:
        raise fail(
            "all resources selected for prune without explicitly passing --all. To prune "
            "all resources, pass the --all flag. If you did not mean to prune all "
            "resources, specify a label selector"
        )
    if (selector or prune_all) and not prune:
        raise UsageError("-l and --all select what --prune deletes; give --prune too")


def _in_namespace(text: str, namespace: str) -> str:
    """``text`` with ``namespace`` given to each namespaced object that names none, as
    kubectl's ``-n`` does; kubectl's error for one that names another. A text that cannot
    be read is left as it is, for the daemon to report."""
    import yaml

    from asynckubelet.manifests import kinds
    from asynckubelet.manifests.decoding import load_documents

    try:
        documents = list(load_documents(text))
    except (yaml.YAMLError, RecursionError, ValueError):
        return text
    changed = False
    for doc in documents:
        items = doc.get("items") if isinstance(doc, dict) and doc.get("kind") == "List" else [doc]
        for obj in items if isinstance(items, list) else []:
            if not isinstance(obj, dict) or not isinstance(meta := obj.get("metadata"), dict):
                continue
            found = kinds.info(obj["kind"]) if isinstance(obj.get("kind"), str) else None
            if found is not None and not found.namespaced:
                continue
            given = meta.get("namespace")
            if not given:
                meta["namespace"] = namespace
                changed = True
            elif given != namespace:
                raise fail(
                    f'the namespace from the provided object "{given}" does not match the '
                    f"namespace \"{namespace}\". You must pass '--namespace={given}' to "
                    "perform this operation."
                )
    if not changed:
        return text
    return yaml.safe_dump_all(documents, sort_keys=False)


def _texts(
    files: list[str] | None, kustomize: str | None, *, recursive: bool
) -> list[tuple[str, str]]:
    """The manifests' texts, from the files and folders or the kustomization."""
    if files:
        return read_files(files, recursive=recursive, verb="apply")
    text = _kustomize(kustomize or "")
    if not text.strip():
        raise fail("no objects passed to apply")
    return [("kustomize " + (kustomize or ""), text)]


def _report(
    result: Mapping[str, Any],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """Print each object's verdict and each pruned object; the pods, the workloads and
    the Services applied, for --wait."""
    pods: list[dict[str, Any]] = []
    workloads: list[dict[str, Any]] = []
    services: list[dict[str, Any]] = []
    for item in result.get("items") or []:
        out.print(f"{escape(_shown(item))} {item.get('verdict')}")
        if not isinstance(item.get("object"), dict):
            continue
        if item.get("kind") == "Pod":
            pods.append(item["object"])
        elif item.get("kind") == "Service":
            services.append(item["object"])
        elif item.get("kind") not in ("ConfigMap", "Secret", "Namespace"):
            workloads.append(item)
    for item in result.get("pruned") or []:
        out.print(f"{escape(_shown(item))} pruned")
    return pods, workloads, services


def _shown(item: Mapping[str, Any]) -> str:
    """``deployment.apps/web``."""
    resource = str(item.get("resource") or str(item.get("kind", "")).lower())
    return f"{resource}/{item.get('name', '')}"


def _kustomize(directory: str) -> str:
    """What ``kustomize build DIR`` makes, from the kustomize binary or ``kubectl
    kustomize``; a clear error when neither is installed or the build fails."""
    if shutil.which("kustomize"):
        argv = ["kustomize", "build", directory]
    elif shutil.which("kubectl"):
        argv = ["kubectl", "kustomize", directory]
    else:
        raise fail(
            "apply -k needs kustomize or kubectl (which has kustomize built in) on the PATH; "
            "or run `kustomize build DIR | asynckubelet apply -f -`"
        )
    try:
        done = subprocess.run(  # noqa: S603  (argv list, no shell: kustomize or kubectl found by shutil.which)
            argv, capture_output=True, text=True, timeout=KUSTOMIZE_TIMEOUT, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        raise fail(f"{' '.join(argv)} failed: {e}") from None
    if done.returncode != 0:
        detail = done.stderr.strip() or f"exit code {done.returncode}"
        raise fail(f"{' '.join(argv)}: {detail}")
    return done.stdout


async def _wait_services(
    services: list[dict[str, Any]], api: NodeAPI, timeout: float, waiting: Any
) -> None:
    """Wait until each Service that selects pods has a ready endpoint (a Service without
    a selector, or an ExternalName, has nothing to wait for)."""
    import anyio
    import anyio.to_thread

    from asynckubelet import errors
    from asynckubelet.kubectl.objects import endpoint_addresses

    left = {
        (str(meta.get("namespace") or "default"), str(meta.get("name") or ""))
        for body in services
        if (spec := body.get("spec") or {}).get("selector") and spec.get("type") != "ExternalName"
        for meta in [body.get("metadata") or {}]
    }
    try:
        with anyio.fail_after(timeout):
            while left:
                for namespace, name in sorted(left):
                    try:
                        found = await anyio.to_thread.run_sync(
                            api.get, "endpoints", namespace, name
                        )
                    except errors.NotFound:
                        continue
                    ready = endpoint_addresses(found)
                    if not ready:
                        waiting(f"service/{name}", "no ready endpoint")
                    else:
                        waiting(f"service/{name}", None)
                        count = len(ready)
                        out.print(
                            f"service/{escape(name)} ready: {count} "
                            f"{'endpoint' if count == 1 else 'endpoints'}"
                        )
                        left.discard((namespace, name))
                if left:
                    await anyio.sleep(0.2)
    except TimeoutError:
        names = ", ".join(f"service/{n}" for _, n in sorted(left))
        raise errors.PodError(
            f"timed out after {timeout:g}s waiting for ready endpoints: {names} (no ready pod "
            "matches the selector; see `asynckubelet describe service NAME`)"
        ) from None


async def _wait(
    pods: list[Pod],
    workloads: list[dict[str, Any]],
    services: list[dict[str, Any]],
    api: NodeAPI,
    node: NodeRef,
    timeout: float,
    config_timeout: float,
    max_restarts: int = DEFAULT_MAX_RESTARTS,
) -> None:
    """Wait for the pods (their applied spec hashes confirmed on the engine the daemon
    drives: the daemon's status says Ready a moment before a changed container has been
    replaced), the workloads' readiness and the Services' endpoints, together."""
    import anyio

    from asynckubelet.cli.progress import WaitDisplay

    display = WaitDisplay(console=made(err), live=err.is_terminal)
    pending: dict[str, str] = {}

    def waiting(key: str, why: str | None) -> None:
        if why is None:
            pending.pop(key, None)
        else:
            pending[key] = why
        display.update(dict(pending))

    with display:
        async with anyio.create_task_group() as tg:
            if pods:
                tg.start_soon(
                    _wait_pods, pods, api, node, (timeout, config_timeout, max_restarts), waiting
                )
            if workloads:
                tg.start_soon(
                    _wait_workloads,
                    workloads,
                    api,
                    (timeout, config_timeout, max_restarts),
                    waiting,
                )
            if services:
                tg.start_soon(_wait_services, services, api, timeout, waiting)


async def _last_line(api: NodeAPI, namespace: str, name: str, container: str) -> str | None:
    """The last line a crash-looping container wrote (its instance that died), if any."""
    import anyio.to_thread

    from asynckubelet import errors
    from asynckubelet.node.operations import PodLogOptions

    options = PodLogOptions(
        container=container, previous=True, tail_lines=1, limit_bytes=LOG_LINE_BYTES
    )

    def read() -> str | None:
        try:
            data = b"".join(api.log(namespace, name, options))
        except errors.AsyncKubeletError:
            return None
        lines = data.decode(errors="replace").strip().splitlines()
        return lines[-1] if lines else None

    return await anyio.to_thread.run_sync(read)


Limits = tuple[float, float, int]
"""``(timeout, config_timeout, max_restarts)`` of a wait."""


async def _wait_pods(
    pods: list[Pod],
    api: NodeAPI,
    node: NodeRef,
    limits: Limits,
    waiting: Any,
) -> None:
    import anyio.to_thread

    from asynckubelet.node.daemon import socket_answers, socket_path
    from asynckubelet.node.operations import PodKey, wait_until_ready
    from asynckubelet.node.printpod import kubectl_status
    from asynckubelet.runtime.manager import RuntimeConfig, RuntimeManager

    info = await anyio.to_thread.run_sync(api.node)
    seen: set[str] = set()

    def ready(pod: Pod) -> None:
        assert pod.metadata is not None and pod.status is not None  # noqa: S101  (type narrowing: a reported pod has metadata and status)
        waiting(f"pod/{pod.metadata.name}", None)
        out.print(
            f"pod/{escape(pod.metadata.name or '')} {escape(kubectl_status(pod, pod.status))}"
        )

    def still(reasons: Mapping[PodKey, str]) -> None:
        for (_, name), reason in reasons.items():
            seen.add(name)
            waiting(f"pod/{name}", reason)

    async def read_pods() -> list[Pod]:
        found = await anyio.to_thread.run_sync(api.list, "pods", None)
        return [as_pod(p) for p in found]

    config = RuntimeConfig(
        node_name=str(info.get("node_name") or node.name),
        docker_url=node.docker_host or str(info.get("docker_host") or "") or None,
    )
    timeout, config_timeout, max_restarts = limits

    async def last_line(key: PodKey, container: str) -> str | None:
        return await _last_line(api, key[0], key[1], container)

    async with RuntimeManager(config) as rm:
        await wait_until_ready(
            rm,
            pods=pods,
            read_pods=read_pods,
            node_running=lambda: socket_answers(socket_path(node.state)),
            timeout=timeout,
            config_timeout=config_timeout,
            max_restarts=max_restarts,
            last_line=last_line,
            on_ready=ready,
            on_waiting=still,
        )


WorkloadKey = tuple[str, str, str]
"""``(kind, namespace, name)``."""


async def _read_workloads(
    api: NodeAPI, left: Mapping[WorkloadKey, str]
) -> dict[WorkloadKey, dict[str, Any]]:
    """Each workload's object as the daemon has it now; a deleted one is an error."""
    import anyio.to_thread

    from asynckubelet import errors
    from asynckubelet.kubectl import resources

    bodies: dict[WorkloadKey, dict[str, Any]] = {}
    for key, shown in left.items():
        kind, namespace, name = key
        found = resources.lookup(kind)
        if found is None:
            raise errors.PodError(f"{shown}: unknown kind {kind}")
        try:
            bodies[key] = await anyio.to_thread.run_sync(api.get, found.plural, namespace, name)
        except errors.DaemonError as e:
            if e.reason != "NotFound":
                raise
            raise errors.PodError(f"{shown} was deleted while waiting") from None
    return bodies


def _live_pods_of(
    key: WorkloadKey, pods: list[dict[str, Any]], owners: Mapping[str, WorkloadKey]
) -> Iterator[dict[str, Any]]:
    """The pods that ``key`` controls (through its ReplicaSets too), neither deleted nor
    finished, and those the node rejected (what they say holds the workload back)."""
    from asynckubelet.node.status import REJECTED_MESSAGE_PREFIX, TERMINAL_PHASES
    from asynckubelet.workloads.pods import controller_of

    for pod in pods:
        meta = pod.get("metadata") or {}
        owner = controller_of(meta)
        status = pod.get("status") or {}
        if owner is None or owners.get(owner.uid) != key:
            continue
        rejected = str(status.get("message") or "").startswith(REJECTED_MESSAGE_PREFIX)
        if meta.get("deletionTimestamp") or (
            status.get("phase") in TERMINAL_PHASES and not rejected
        ):
            continue
        yield pod


async def _wait_workloads(
    items: list[dict[str, Any]],
    api: NodeAPI,
    limits: Limits,
    waiting: Any,
) -> None:
    """Poll the daemon until every workload is ready, naming the pod and container that
    hold each back; fail on the first that failed, or whose pods wait for what will not
    come."""
    import anyio
    import anyio.to_thread

    from asynckubelet import errors
    from asynckubelet.node.failures import FailureWatch, holding_back
    from asynckubelet.workloads.readiness import readiness

    timeout, config_timeout, max_restarts = limits
    left = {(str(i["kind"]), str(i["namespace"]), str(i["name"])): _shown(i) for i in items}
    watches: dict[str, FailureWatch] = {}
    last: dict[str, str] = {}
    with anyio.move_on_after(timeout) as scope:
        while left:
            bodies = await _read_workloads(api, left)
            pods = await anyio.to_thread.run_sync(api.list, "pods", None)
            owners = _owner_chain(bodies, await _replicasets(api, bodies))
            for key, body in bodies.items():
                shown = left[key]
                verdict = readiness(key[0], body)
                if verdict.state == "failed":
                    raise errors.PodError(f"{shown} failed: {verdict.message}")
                if verdict.state == "ready":
                    waiting(shown, None)
                    out.print(f"{escape(shown)} {escape(verdict.message)}")
                    del left[key]
                    continue
                mine = [as_pod(pod) for pod in _live_pods_of(key, pods, owners)]
                for pod in mine:
                    assert pod.metadata is not None and pod.status is not None  # noqa: S101  (type narrowing: a listed pod has metadata and status)
                    watch = watches.setdefault(
                        str(pod.metadata.uid),
                        FailureWatch(
                            pull_timeout=None,
                            config_timeout=config_timeout,
                            max_restarts=max_restarts,
                        ),
                    )
                    failure = watch.observe(pod.status, now=anyio.current_time())
                    if failure is None:
                        continue
                    name = pod.metadata.name or ""
                    if failure.wants_log_line:
                        namespace = pod.metadata.namespace or "default"
                        text = await _last_line(api, namespace, name, failure.container)
                        failure = failure.with_log_line(text)
                    raise errors.PodError(f"{shown}: {failure.line(name)}")
                held = holding_back(mine, max_restarts=None)
                why = verdict.message + (f"; {held[1].line(held[0])}" if held else "")
                last[shown] = why
                waiting(shown, why)
            if left:
                await anyio.sleep(POLL)
    if scope.cancelled_caught:
        reasons = "; ".join(f"{shown}: {last.get(shown, 'not ready')}" for shown in left.values())
        raise errors.PodError(f"timed out after {timeout:g}s waiting for {reasons}")


async def _replicasets(
    api: NodeAPI, bodies: Mapping[tuple[str, str, str], Mapping[str, Any]]
) -> list[dict[str, Any]]:
    import anyio.to_thread

    spaces = {ns for kind, ns, _ in bodies if kind == "Deployment"}
    found: list[dict[str, Any]] = []
    for namespace in spaces:
        found += await anyio.to_thread.run_sync(api.list, "replicasets", namespace)
    return found


def _owner_chain(
    bodies: Mapping[tuple[str, str, str], Mapping[str, Any]],
    replicasets: list[dict[str, Any]],
) -> dict[str, tuple[str, str, str]]:
    """Owner UID -> the workload waited for whose pods it owns (a Deployment's through
    its current ReplicaSet: an old one's pods, on their way out, hold no rollout back)."""
    from asynckubelet.workloads.deployment import REVISION
    from asynckubelet.workloads.pods import controller_of

    owners: dict[str, tuple[str, str, str]] = {}
    revisions: dict[str, object] = {}
    for key, body in bodies.items():
        meta = body.get("metadata") or {}
        uid = str(meta.get("uid") or "")
        owners[uid] = key
        revisions[uid] = (meta.get("annotations") or {}).get(REVISION)
    for rs in replicasets:
        meta = rs.get("metadata") or {}
        owner = controller_of(meta)
        if owner is None or owner.uid not in owners:
            continue
        wanted = revisions.get(owner.uid)
        if wanted is not None and (meta.get("annotations") or {}).get(REVISION) != wanted:
            continue
        owners[str(meta.get("uid"))] = owners[owner.uid]
    return owners
