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
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from asynckubelet.cli.applywait import DEFAULT_MAX_RESTARTS, item_name
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
from asynckubelet.cli.output import command, escape, fail, out, run_async, warn

if TYPE_CHECKING:
    from asynckubelet.api.protocol import NodeAPI
    from asynckubelet.cli.devsync import Restart

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
KUSTOMIZE_TIMEOUT = 120.0


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
        rules.node_name = str(api.node().get("node_name") or "")
        rules.restart = _restart_through(api)
        from asynckubelet.cli.devwatch import watch as follow
        from asynckubelet.cli.output import interrupt_on_signals

        with interrupt_on_signals():
            follow(
                lambda: [*map(Path, files or [kustomize or "."]), *contexts],
                lambda: once(api),
                sync=rules.sync,
            )
        raise typer.Exit(128 + 2)


def _restart_through(api: NodeAPI) -> Restart:
    """A restart in place asked of the daemon (its client blocks: in a thread)."""
    import anyio.to_thread

    async def restart(namespace: str, pod: str, containers: list[str], grace: int) -> list[str]:
        def ask() -> list[str]:
            return api.restart(namespace, pod, containers, grace_period=grace)

        return await anyio.to_thread.run_sync(ask)

    return restart


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
        from asynckubelet.cli.applywait import wait_applied

        run_async(
            wait_applied,
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
        out.print(f"{escape(item_name(item))} {item.get('verdict')}")
        if not isinstance(item.get("object"), dict):
            continue
        if item.get("kind") == "Pod":
            pods.append(item["object"])
        elif item.get("kind") == "Service":
            services.append(item["object"])
        elif item.get("kind") not in ("ConfigMap", "Secret", "Namespace"):
            workloads.append(item)
    for item in result.get("pruned") or []:
        out.print(f"{escape(item_name(item))} pruned")
    return pods, workloads, services


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
