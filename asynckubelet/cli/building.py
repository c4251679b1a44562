"""``--build``: the images the manifests name, built on the engine before their pods start.

Each container image whose build context is known (see :mod:`asynckubelet.images.contexts`)
is built once through the engine's build API, its steps shown as pulls are shown (one
``IMAGE: Step N/M : ...`` line each), and every container naming it is pinned to the built
image ID with ``imagePullPolicy: IfNotPresent``: a rebuild changes the pod's spec (a
Deployment rolls, a pod restarts), never hidden behind a tag that already ran.

``--build-arg KEY=VALUE`` (``KEY`` alone: its value from the environment, left out when
unset, as ``docker build`` does) and ``--target STAGE`` apply to every image built, over
what an annotation gives; each is checked before anything is built.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from asynckubelet.cli.output import err, escape, fail

if TYPE_CHECKING:
    from asynckubelet.docker import DockerClient
    from asynckubelet.images.contexts import BuildContext
    from asynckubelet.manifests import Manifests

__all__ = [
    "BuildOptions",
    "build_images",
    "build_options",
    "manifest_base",
    "pin_dicts",
    "pin_manifests",
    "specs_of_dicts",
]

Spec = tuple[Mapping[str, str], list[Any]]
"""A pod (or pod template)'s annotations and its containers (init containers included)."""


def manifest_base(files: Sequence[str]) -> Path:
    """The directory build contexts are found in: the manifests' own (one for all)."""
    bases = set()
    for name in files:
        if name == "-":
            bases.add(Path.cwd().resolve())
            continue
        path = Path(name).resolve()
        bases.add(path if path.is_dir() else path.parent)
    if len(bases) != 1:
        raise fail(
            "--build: the manifests are in different directories "
            f"({', '.join(sorted(map(str, bases)))}): give files of one directory"
        )
    return bases.pop()


def _typed_specs(manifests: Manifests) -> Iterator[Spec]:
    templates = [
        obj.spec.template
        for obj in manifests.objects
        if getattr(getattr(obj, "spec", None), "template", None) is not None
    ]
    jobs = [
        obj.spec.jobTemplate.spec.template
        for obj in manifests.objects
        if getattr(getattr(obj, "spec", None), "jobTemplate", None) is not None
    ]
    for holder in [*manifests.pods, *templates, *jobs]:
        meta = holder.metadata
        spec = holder.spec
        if spec is None:
            continue
        annotations = dict((meta.annotations if meta else None) or {})
        yield annotations, [*(spec.initContainers or []), *spec.containers]


def specs_of_dicts(documents: Iterable[Any]) -> Iterator[Spec]:
    """The pod specs of parsed YAML documents (pods, workloads' templates, List items)."""
    for doc in documents:
        if not isinstance(doc, dict):
            continue
        if doc.get("kind") == "List":
            yield from specs_of_dicts(doc.get("items") or [])
            continue
        holder: Any = doc
        spec = doc.get("spec")
        if isinstance(spec, dict) and isinstance(spec.get("jobTemplate"), dict):
            spec = spec["jobTemplate"].get("spec")
        if doc.get("kind") != "Pod":
            holder = spec.get("template") if isinstance(spec, dict) else None
        if not isinstance(holder, dict) or not isinstance(holder.get("spec"), dict):
            continue
        meta = holder.get("metadata") if isinstance(holder.get("metadata"), dict) else {}
        annotations = meta.get("annotations") if isinstance(meta, dict) else None
        pod = holder["spec"]
        containers = [
            c
            for c in [*(pod.get("initContainers") or []), *(pod.get("containers") or [])]
            if isinstance(c, dict)
        ]
        yield dict(annotations or {}), containers


@dataclass(frozen=True)
class BuildOptions:
    """The command line's build arguments and target, over each context's own."""

    args: Mapping[str, str] = field(default_factory=dict)
    target: str = ""


def build_options(
    build: bool,
    build_args: Sequence[str] | None,
    target: str | None,
    *,
    environ: Mapping[str, str] | None = None,
) -> BuildOptions:
    """``--build-arg`` and ``--target`` checked: a malformed argument or target is an error
    naming the flag and the value given, and either needs ``--build``."""
    from asynckubelet import errors
    from asynckubelet.images.contexts import check_arg

    if not build and (build_args or target is not None):
        raise fail("--build-arg and --target need --build")
    env = os.environ if environ is None else environ
    args: dict[str, str] = {}
    for given in build_args or []:
        key, sep, value = given.partition("=")
        from_env = not sep
        if from_env:
            value = env.get(key, "")
        shown = given if len(given) <= 64 else given[:61] + "..."
        try:
            check_arg(key, value, field_name=f"--build-arg {shown!r}")
        except errors.ImageBuildError as e:
            raise fail(str(e)) from None
        if not from_env or key in env:
            args[key] = value
    if target is not None and not target:
        raise fail("--target: give a stage name")
    return BuildOptions(args, target or "")


def _with_options(contexts: dict[str, BuildContext], options: BuildOptions | None) -> None:
    """Each context with the command line's arguments and target over its own, the target
    checked against its Dockerfile's stages."""
    from asynckubelet import errors
    from asynckubelet.images.contexts import check_target

    if options is None:
        return
    for image, context in list(contexts.items()):
        changed = dataclasses.replace(
            context, args={**context.args, **options.args}, target=options.target or context.target
        )
        if options.target:
            try:
                check_target(changed, options.target, field_name=f"--target (image {image})")
            except errors.ImageBuildError as e:
                raise fail(str(e)) from None
        contexts[image] = changed


def _name_image(container: Any) -> tuple[str, str]:
    if isinstance(container, dict):
        return str(container.get("name") or ""), str(container.get("image") or "")
    return container.name or "", container.image or ""


def find_contexts(specs: Iterable[Spec], base: Path) -> dict[str, BuildContext]:
    """The build context of each image the specs name that has one (one per image)."""
    from asynckubelet import errors
    from asynckubelet.images.contexts import find_context

    found: dict[str, BuildContext] = {}
    for notes, containers in specs:
        for container in containers:
            name, image = _name_image(container)
            if not image:
                continue
            try:
                context = find_context(image, container=name, annotations=dict(notes), base=base)
            except errors.ImageBuildError as e:
                raise fail(str(e)) from None
            if context is None:
                continue
            if image in found and found[image] != context:
                raise fail(f"image {image}: two different build contexts name it")
            found[image] = context
    return found


_FROM = re.compile(r"^\s*FROM\s+(?:--\S+\s+)*(\S+)", re.IGNORECASE | re.MULTILINE)


def _bases(context: BuildContext) -> list[str]:
    """The images the context's Dockerfile starts ``FROM`` (its first 1 MiB read)."""
    with (context.context / context.dockerfile).open("rb") as handle:
        text = handle.read(1 << 20).decode(errors="replace")
    return _FROM.findall(text)


async def _make_local_base(
    docker: DockerClient, ref: str, line: Callable[[str, str], None]
) -> None:
    """Make one of the project's own images (busybox...) a Dockerfile starts from, when
    the engine lacks it: no registry is asked for it."""
    from asynckubelet.images.build import local_image

    local = local_image(ref)
    if local is None or await docker.image_exists(ref):
        return
    line(ref, f"building from {local.source}")
    await local.build(docker)


def _shown(path: Path) -> str:
    """``path`` relative to the working directory when under it, else absolute."""
    relative = os.path.relpath(path)
    return str(path) if relative.startswith("..") else relative


def build_images(
    contexts: Mapping[str, BuildContext], *, docker_host: str | None
) -> dict[str, str]:
    """Build every context (in the order given); the built image ID of each image."""
    from asynckubelet import errors
    from asynckubelet.cli.output import run_async
    from asynckubelet.docker import DockerClient
    from asynckubelet.images.contexts import context_tar

    def line(image: str, text: str) -> None:
        err.print(f"{escape(image)}: {escape(text)}", highlight=False, soft_wrap=True)

    shown = {image: _shown(c.context) for image, c in contexts.items()}

    bases = sorted({base for c in contexts.values() for base in _bases(c)})

    async def go() -> dict[str, str]:
        built: dict[str, str] = {}
        async with DockerClient(url=docker_host) as docker:
            for base in bases:
                await _make_local_base(docker, base, line)
            for image, context in contexts.items():
                line(image, f"building {shown[image]}")
                data = context_tar(context.context)
                async for kind, text in docker.build_image(
                    data,
                    tag=image,
                    dockerfile=context.dockerfile,
                    target=context.target,
                    args=context.args,
                ):
                    if kind == "step":
                        line(image, text)
                    elif kind == "id":
                        built[image] = text
                line(image, f"built {built[image]}")
        return built

    try:
        return run_async(go)
    except errors.ImageBuildError as e:
        raise fail(str(e)) from None


def _pin(containers: Iterable[Any], built: Mapping[str, str]) -> None:
    for container in containers:
        _, image = _name_image(container)
        if image not in built:
            continue
        if isinstance(container, dict):
            container["image"] = built[image]
            container["imagePullPolicy"] = "IfNotPresent"
        else:
            container.image = built[image]
            container.imagePullPolicy = "IfNotPresent"


def pin_manifests(manifests: Manifests, built: Mapping[str, str]) -> None:
    """Point the typed pods' and templates' containers at the built image IDs."""
    for _, containers in _typed_specs(manifests):
        _pin(containers, built)


def pin_dicts(documents: Iterable[Any], built: Mapping[str, str]) -> None:
    """Point the parsed documents' containers at the built image IDs."""
    for _, containers in specs_of_dicts(documents):
        _pin(containers, built)


def build_typed(
    manifests: Manifests,
    files: Sequence[str],
    *,
    docker_host: str | None,
    options: BuildOptions | None = None,
) -> None:
    """``run --build``: build what the loaded manifests name and pin their containers."""
    contexts = find_contexts(_typed_specs(manifests), manifest_base(files))
    if not contexts:
        raise fail("--build: no image of the manifests has a build context")
    _with_options(contexts, options)
    pin_manifests(manifests, build_images(contexts, docker_host=docker_host))


def _text_base(source: str) -> Path:
    path = Path(source)
    if source and source != "-" and path.is_file():
        return path.resolve().parent
    return Path.cwd().resolve()


def build_texts(
    texts: list[tuple[str, str]],
    *,
    docker_host: str | None,
    watched: set[Path] | None = None,
    options: BuildOptions | None = None,
) -> list[tuple[str, str]]:
    """``apply --build``: build what the texts name (each file's contexts beside it) and
    return the texts with their containers pinned to the built image IDs; ``watched``
    receives the context directories found (before any is built)."""
    import yaml

    parsed: list[list[Any]] = []
    contexts: dict[str, BuildContext] = {}
    for source, text in texts:
        try:
            documents = list(yaml.safe_load_all(text))
        except yaml.YAMLError as e:
            raise fail(f"{source}: {e}") from None
        parsed.append(documents)
        for image, context in find_contexts(specs_of_dicts(documents), _text_base(source)).items():
            if image in contexts and contexts[image] != context:
                raise fail(f"image {image}: two different build contexts name it")
            contexts[image] = context
    if not contexts:
        raise fail("--build: no image of the manifests has a build context")
    if watched is not None:
        watched.update(c.context for c in contexts.values())
    _with_options(contexts, options)
    built = build_images(contexts, docker_host=docker_host)
    pinned: list[tuple[str, str]] = []
    for (source, text), documents in zip(texts, parsed, strict=True):
        names = {image for _, cs in specs_of_dicts(documents) for _, image in map(_name_image, cs)}
        if names & built.keys():
            pin_dicts(documents, built)
            text = yaml.safe_dump_all(documents, sort_keys=False)
        pinned.append((source, text))
    return pinned
