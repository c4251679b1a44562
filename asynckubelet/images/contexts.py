"""The build contexts of the images a manifest names, found and checked before a build.

An image's context is found two ways, the annotation first:

- the annotation ``build.asynckubelet.dev/<container>`` on a pod (or a workload's pod
  template): ``context=PATH[,dockerfile=PATH][,target=T][,arg.NAME=VALUE...]``, with
  ``PATH`` relative to the manifest's directory, ``T`` a stage the Dockerfile declares
  and each ``NAME`` an identifier (a value holds no comma);
- podman's convention: a directory beside the manifests named after the image's
  repository's last part (image ``web:dev`` or ``localhost/web:dev``: ``./web/``) holding
  a ``Containerfile`` or ``Dockerfile``.

A manifest is hostile: a context must resolve (symlinks followed) inside the manifest's
directory, the Dockerfile inside the context, and the context's tar is bounded in size
and in entries. Files are sent as a tar so the build works against a remote engine.
"""

from __future__ import annotations

import io
import os
import re
import stat
import tarfile
from dataclasses import dataclass, field
from pathlib import Path

from asynckubelet.errors import ImageBuildError

__all__ = [
    "ANNOTATION_PREFIX",
    "MAX_ARG_VALUE",
    "MAX_CONTEXT_BYTES",
    "MAX_CONTEXT_ENTRIES",
    "BuildContext",
    "check_arg",
    "check_target",
    "context_tar",
    "find_context",
    "parse_annotation",
    "stages",
]

ANNOTATION_PREFIX = "build.asynckubelet.dev/"
"""Followed by a container's name: that container's image's build context."""
MAX_CONTEXT_BYTES = 256 * 1024 * 1024
"""The most file bytes a build context may hold."""
MAX_CONTEXT_ENTRIES = 50_000
"""The most files and directories a build context may hold."""
MAX_ARG_VALUE = 32 * 1024
"""The most characters a build argument's value may hold."""
DOCKERFILES = ("Containerfile", "Dockerfile")
_ARG_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
_TARGET = re.compile(r"[A-Za-z][A-Za-z0-9_.-]{0,127}")
_STAGE = re.compile(
    r"^[ \t]*FROM[ \t]+(?:--\S+[ \t]+)*\S+[ \t]+AS[ \t]+(\S+)[ \t\r]*$",
    re.IGNORECASE | re.MULTILINE,
)
_CONTINUED = re.compile(r"\\[ \t]*\r?\n")


@dataclass(frozen=True)
class BuildContext:
    """How one image is built: its context directory, its Dockerfile (relative to the
    context, ``/``-separated), a target stage and build arguments."""

    image: str
    context: Path
    dockerfile: str
    target: str = ""
    args: dict[str, str] = field(default_factory=dict)


def _inside(path: Path, root: Path, *, what: str, field_name: str) -> Path:
    resolved = path.resolve()
    root = root.resolve()
    if resolved != root and root not in resolved.parents:
        raise ImageBuildError(f"{field_name}: {what} {str(path)!r} is outside {str(root)!r}")
    return resolved


def _dockerfile(context: Path, given: str | None, *, field_name: str) -> str:
    if given is None:
        for name in DOCKERFILES:
            if (context / name).is_file():
                return name
        raise ImageBuildError(f"{field_name}: no Containerfile or Dockerfile in {str(context)!r}")
    if not given or os.path.isabs(given):
        raise ImageBuildError(
            f"{field_name}: dockerfile {given!r} must be a path relative to the context"
        )
    resolved = _inside(context / given, context, what="dockerfile", field_name=field_name)
    if not resolved.is_file():
        raise ImageBuildError(f"{field_name}: dockerfile {given!r} is not a file in the context")
    return resolved.relative_to(context).as_posix()


def check_arg(name: str, value: str, *, field_name: str) -> None:
    """Refuse a build argument whose name is not an identifier or whose value holds a NUL
    or is longer than ``MAX_ARG_VALUE``; the error names ``field_name``."""
    if not _ARG_NAME.fullmatch(name):
        raise ImageBuildError(
            f"{field_name}: {name!r} is not a build argument name (letters, digits and _, "
            "not starting with a digit)"
        )
    if "\0" in value:
        raise ImageBuildError(f"{field_name}: build argument {name} holds a NUL character")
    if len(value) > MAX_ARG_VALUE:
        raise ImageBuildError(
            f"{field_name}: build argument {name} is longer than {MAX_ARG_VALUE} characters"
        )


def stages(dockerfile: Path) -> list[str]:
    """The stage names a Dockerfile declares (``FROM IMAGE AS NAME``), its first 1 MiB read."""
    with dockerfile.open("rb") as handle:
        text = handle.read(1 << 20).decode(errors="replace")
    return _STAGE.findall(_CONTINUED.sub(" ", text))


def check_target(context: BuildContext, target: str, *, field_name: str) -> None:
    """Refuse a target that is not a stage name or that the context's Dockerfile lacks; the
    error names ``field_name`` and the stages there are."""
    if not _TARGET.fullmatch(target):
        raise ImageBuildError(
            f"{field_name}: target {target!r} is not a stage name (a letter, then letters, "
            "digits, '_', '.', '-')"
        )
    declared = stages(context.context / context.dockerfile)
    if target.lower() not in (name.lower() for name in declared):
        there = ", ".join(declared) if declared else "none"
        raise ImageBuildError(
            f"{field_name}: target {target!r} is not a stage of {context.dockerfile} "
            f"(stages: {there})"
        )


def parse_annotation(value: str, *, image: str, base: Path, field_name: str) -> BuildContext:
    """The context an annotation's value names; ``base`` is the manifest's directory."""
    items: dict[str, str] = {}
    args: dict[str, str] = {}
    for part in value.split(","):
        part = part.strip()
        if not part:
            continue
        key, sep, val = part.partition("=")
        if not sep:
            raise ImageBuildError(f"{field_name}: {part!r} is not KEY=VALUE")
        if key.startswith("arg."):
            name = key[4:]
            check_arg(name, val, field_name=field_name)
            if name in args:
                raise ImageBuildError(f"{field_name}: arg.{name} given twice")
            args[name] = val
        elif key in ("context", "dockerfile", "target"):
            if key in items:
                raise ImageBuildError(f"{field_name}: {key} given twice")
            items[key] = val
        else:
            raise ImageBuildError(
                f"{field_name}: unknown key {key!r} (context, dockerfile, target, arg.NAME)"
            )
    given = items.get("context")
    if not given:
        raise ImageBuildError(f"{field_name}: context=PATH is required")
    if os.path.isabs(given):
        raise ImageBuildError(f"{field_name}: context {given!r} must be relative to the manifest")
    context = _inside(base / given, base, what="context", field_name=field_name)
    if not context.is_dir():
        raise ImageBuildError(f"{field_name}: context {given!r} is not a directory")
    dockerfile = _dockerfile(context, items.get("dockerfile"), field_name=field_name)
    found = BuildContext(image, context, dockerfile, items.get("target", ""), args)
    if found.target:
        check_target(found, found.target, field_name=field_name)
    return found


def repository_dir(image: str) -> str:
    """The directory podman's convention names for ``image``: its repository's last part."""
    name = image.split("@", 1)[0]
    last = name.rsplit("/", 1)[-1]
    return last.split(":", 1)[0]


def find_context(
    image: str, *, container: str, annotations: dict[str, str], base: Path
) -> BuildContext | None:
    """The build context of a container's image, or None when nothing names one."""
    key = ANNOTATION_PREFIX + container
    if key in annotations:
        return parse_annotation(
            annotations[key], image=image, base=base, field_name=f"annotation {key}"
        )
    directory = repository_dir(image)
    if not directory or directory in (".", ".."):
        return None
    candidate = base / directory
    if candidate.is_symlink() or not candidate.is_dir():
        return None
    if not any((candidate / name).is_file() for name in DOCKERFILES):
        return None
    context = _inside(candidate, base, what="context", field_name=f"image {image}")
    return BuildContext(image, context, _dockerfile(context, None, field_name=f"image {image}"))


def context_tar(
    context: Path,
    *,
    max_bytes: int = MAX_CONTEXT_BYTES,
    max_entries: int = MAX_CONTEXT_ENTRIES,
) -> bytes:
    """The context directory as a tar, symlinks kept as links (never followed), bounded.

    Files named in a ``.dockerignore`` are not skipped: the engine applies it, and the
    bound counts what is sent.
    """
    buffer = io.BytesIO()
    total = 0
    entries = 0
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for root, dirs, files in os.walk(context, followlinks=False):
            dirs.sort()
            for name in sorted(dirs) + sorted(files):
                path = Path(root) / name
                info = path.lstat()
                entries += 1
                if entries > max_entries:
                    raise ImageBuildError(
                        f"build context {str(context)!r} holds more than {max_entries} entries"
                    )
                arcname = path.relative_to(context).as_posix()
                if stat.S_ISREG(info.st_mode):
                    total += info.st_size
                    if total > max_bytes:
                        raise ImageBuildError(
                            f"build context {str(context)!r} is larger than {max_bytes} bytes"
                        )
                    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
                    with os.fdopen(fd, "rb") as handle:
                        tar.addfile(tar.gettarinfo(arcname=arcname, fileobj=handle), handle)
                elif stat.S_ISDIR(info.st_mode) or stat.S_ISLNK(info.st_mode):
                    tar.add(str(path), arcname, recursive=False)
    return buffer.getvalue()
