"""``--watch`` with watch rules: a changed source synced into the running containers.

The rules come from the manifests (:mod:`asynckubelet.images.watchrules`); each change the
watch sees is planned here: a changed manifest, a ``rebuild`` rule or a context without
rules applies (and builds) again; files held by ``sync`` rules are copied into every
running container of the node of their rule's container name on the image's current build,
one status line per change, and ``sync+restart`` has the node restart those containers in
place after the copy.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from asynckubelet.cli.output import err, escape, fail

if TYPE_CHECKING:
    from asynckubelet.docker import DockerClient
    from asynckubelet.images.contexts import BuildContext
    from asynckubelet.images.watchrules import WatchRule
    from asynckubelet.manifests import Manifests

__all__ = [
    "Plan",
    "Restart",
    "Syncer",
    "Target",
    "WatchState",
    "plan",
    "rules_of_specs",
    "rules_of_texts",
]

RESTART_GRACE = 2
"""Seconds a ``sync+restart`` container gets to stop before it is killed."""


def rules_of_specs(
    specs: Iterable[tuple[Any, list[Any]]], contexts: dict[str, BuildContext]
) -> list[WatchRule]:
    """The watch rules of the specs' annotations; ``contexts`` maps images to their build
    contexts. A rule that names no container of its pod, an image without a context, or a
    path leading out of the context is a clear error naming the annotation and rule."""
    from asynckubelet import errors
    from asynckubelet.images.watchrules import ANNOTATION_PREFIX, parse_rules

    rules: list[WatchRule] = []
    seen: set[tuple[str, str]] = set()
    for notes, containers in specs:
        names = {}
        for container in containers:
            if isinstance(container, dict):
                names[str(container.get("name") or "")] = str(container.get("image") or "")
            else:
                names[container.name or ""] = container.image or ""
        for key, value in dict(notes).items():
            if not key.startswith(ANNOTATION_PREFIX):
                continue
            name = key[len(ANNOTATION_PREFIX) :]
            where = f"annotation {key}"
            if name not in names:
                raise fail(f"{where}: the pod has no container {name!r}")
            image = names[name]
            if image not in contexts:
                raise fail(f"{where}: image {image!r} has no build context")
            if (name, image) in seen:
                continue
            seen.add((name, image))
            try:
                rules.extend(
                    parse_rules(
                        str(value),
                        container=name,
                        image=image,
                        context=contexts[image].context,
                        field_name=where,
                    )
                )
            except errors.ImageBuildError as e:
                raise fail(str(e)) from None
    return rules


def rules_of_texts(texts: Sequence[tuple[str, str]]) -> tuple[list[WatchRule], set[Path]]:
    """The watch rules of manifest texts (each file's contexts beside it) and the build
    contexts they name."""
    import yaml

    from asynckubelet.cli.building import _text_base, find_contexts, specs_of_dicts

    rules: list[WatchRule] = []
    contexts: set[Path] = set()
    for source, text in texts:
        try:
            documents = list(yaml.safe_load_all(text))
        except yaml.YAMLError as e:
            raise fail(f"{source}: {e}") from None
        found = find_contexts(specs_of_dicts(documents), _text_base(source))
        contexts.update(c.context for c in found.values())
        rules.extend(rules_of_specs(specs_of_dicts(documents), found))
    return rules, contexts


@dataclass
class Plan:
    """What a change does: ``apply`` (the manifests applied and built again) or the syncs,
    ``(container, image, action) -> [(file, target)]``."""

    apply: bool = False
    syncs: dict[tuple[str, str, str], list[tuple[Path, str]]] = field(default_factory=dict)
    contexts: dict[tuple[str, str, str], Path] = field(default_factory=dict)


def plan(files: Iterable[str], rules: Sequence[WatchRule], contexts: Iterable[Path]) -> Plan:
    """The plan for changed ``files``: under a context with rules, the first rule that
    holds a file decides; under a context without rules, or outside every context (a
    manifest), the change is applied."""
    from asynckubelet.images.watchrules import match

    roots = [c.resolve() for c in contexts]
    result = Plan()
    for name in files:
        file = Path(os.path.abspath(name))
        root = next((r for r in roots if r == file or r in file.parents), None)
        if root is None:
            result.apply = True
            continue
        mine = [r for r in rules if r.context == root]
        if not mine:
            result.apply = True
            continue
        found = match(file, mine)
        if found is None:
            continue
        rule, target = found
        if rule.action == "rebuild":
            result.apply = True
            continue
        if not os.path.lexists(file):
            continue
        key = (rule.container, rule.image, rule.action)
        result.syncs.setdefault(key, []).append((file, target))
        result.contexts[key] = rule.context
    return result


Restart = Callable[[str, str, list[str], int], Awaitable[list[str]]]
"""Restarts a pod's containers in place through its node: ``(namespace, pod, containers,
grace period) -> their IDs`` (the node's worker stops and starts each one: no sync of the
pod sees it stopped, see :mod:`asynckubelet.node.inplace`)."""


@dataclass(frozen=True)
class Target:
    """A running container a rule syncs into."""

    container_id: str
    namespace: str
    pod: str


@dataclass
class Syncer:
    """Carries out a plan's syncs on the engine at ``docker_host``, in the containers of
    the node ``node_name`` (of its pods marked ``owner``); ``restart`` is that node's."""

    docker_host: str | None
    node_name: str
    restart: Restart | None = None
    owner: str = ""
    """The owner mark of the node's pods (a ``run``'s; none for ``serve``'s)."""

    async def containers(self, docker: DockerClient, *, container: str, image: str) -> list[Target]:
        """The node's running containers named ``container`` on the image ``image`` names
        now."""
        from asynckubelet.runtime import naming

        image_id = str((await docker.inspect_image(image)).get("Id") or "")
        rows = await docker.list_containers(
            labels={
                naming.LABEL_TYPE: naming.TYPE_CONTAINER,
                naming.LABEL_CONTAINER_NAME: container,
                naming.LABEL_NODE: self.node_name,
            },
            all=False,
        )
        found = []
        for row in rows:
            labels = row.get("Labels") or {}
            if not image_id or row.get("ImageID") != image_id:
                continue
            if labels.get(naming.LABEL_OWNER, "") != self.owner:
                continue
            namespace = str(labels.get(naming.LABEL_POD_NAMESPACE) or "")
            pod = str(labels.get(naming.LABEL_POD_NAME) or "")
            found.append(Target(container_id=str(row["Id"]), namespace=namespace, pod=pod))
        return sorted(found, key=lambda t: (t.namespace, t.pod, t.container_id))

    async def sync(self, result: Plan) -> list[str]:
        """Every sync of the plan; one description per rule (``web: 2 files to 1
        container``)."""
        from asynckubelet import errors
        from asynckubelet.docker import DockerClient
        from asynckubelet.docker.archive import put_archive
        from asynckubelet.images.watchrules import sync_tar

        done = []
        async with DockerClient(url=self.docker_host) as docker:
            for (container, image, action), files in result.syncs.items():
                data = sync_tar(files, context=result.contexts[(container, image, action)])
                targets = await self.containers(docker, container=container, image=image)
                for target in targets:
                    await put_archive(docker, target.container_id, path="/", data=data)
                    if action == "sync+restart":
                        if self.restart is None:
                            raise errors.DaemonError("a restart in place needs the node")
                        await self.restart(target.namespace, target.pod, [container], RESTART_GRACE)
                count = f"{len(targets)} container{'' if len(targets) == 1 else 's'}"
                what = "synced to and restarted" if action == "sync+restart" else "synced to"
                done.append(f"{container}: {what} {count}")
        return done


def show(files: Sequence[str], text: str, *, error: bool = False) -> None:
    """One status line: the first changed file (and how many more), then ``text``."""
    first = os.path.relpath(files[0]) if files else "?"
    more = f" (and {len(files) - 1} more)" if len(files) > 1 else ""
    line = f"{escape(first)}{more} changed: {escape(text)}"
    err.print(f"[red]{line}[/red]" if error else line, highlight=False, soft_wrap=True)


@dataclass
class WatchState:
    """The rules of the manifests last applied, offered each change a watch sees."""

    docker_host: str | None = None
    rules: list[WatchRule] = field(default_factory=list)
    contexts: set[Path] = field(default_factory=set)
    node_name: str = ""
    """The node whose containers the rules sync into."""
    restart: Restart | None = None
    """That node's restart in place (``sync+restart``)."""
    owner: str = ""
    """The owner mark of that node's pods (a ``run``'s)."""

    def read(self, texts: Sequence[tuple[str, str]], *, docker_host: str | None) -> None:
        """The rules of ``texts``, kept for the changes to come (refused: a clear error,
        the rules kept before it stay)."""
        self.rules, self.contexts = rules_of_texts(texts)
        self.docker_host = docker_host

    def read_typed(
        self, manifests: Manifests, files: Sequence[str], *, docker_host: str | None
    ) -> None:
        """The rules of loaded manifests (``run``), before their images are pinned."""
        from asynckubelet.cli.building import _typed_specs, find_contexts, manifest_base

        found = find_contexts(_typed_specs(manifests), manifest_base(files))
        self.rules = rules_of_specs(_typed_specs(manifests), found)
        self.contexts = {c.context for c in found.values()}
        self.docker_host = docker_host

    def plan(self, files: Sequence[str]) -> Plan | None:
        """The syncs of a change; None when it is to be applied."""
        if not self.rules:
            return None
        result = plan(files, self.rules, self.contexts)
        return None if result.apply else result

    async def carry_out(self, files: Sequence[str], result: Plan) -> None:
        """The plan's syncs, one status line; an error shown, not raised."""
        from asynckubelet import errors

        if not result.syncs:
            show(files, "no rule syncs it")
            return
        try:
            syncer = Syncer(self.docker_host, self.node_name, self.restart, self.owner)
            done = await syncer.sync(result)
        except errors.AsyncKubeletError as e:
            show(files, f"sync failed: {e}", error=True)
            return
        show(files, "; ".join(done))

    def sync(self, files: list[str]) -> bool:
        """The change synced (True) or to be applied (False)."""
        from asynckubelet.cli.output import run_async

        result = self.plan(files)
        if result is None:
            return False
        run_async(self.carry_out, files, result)
        return True
