"""Reading manifest files as ``kubectl -f`` names them (files, folders with ``-R``, ``-`` for
stdin), each bounded (:data:`~asynckubelet.manifests.decoding.MAX_DOCUMENT_BYTES`), and
the objects a file names without validating them (what ``delete -f`` needs)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import yaml

from asynckubelet.errors import FieldError, ManifestError
from asynckubelet.manifests import decoding
from asynckubelet.manifests.decoding import MAX_DOCUMENT_BYTES
from asynckubelet.manifests.messages import error_budget, go_quote

DOCUMENT = "<document>"
"""The field named by errors about a whole document (YAML syntax, not an object)."""

Source = str | os.PathLike[str]
_SUFFIXES = (".yaml", ".yml", ".json")
MAX_ERRORS = 1000
"""Errors (and, apart, warnings) kept per load; more are counted in one last entry."""
_ERROR_BUDGET = 2 * MAX_ERRORS + 10


class ErrorSink(Protocol):
    """Where a reader records what it could not read."""

    def record(self, error: FieldError) -> None: ...


def read_sources(
    source: Source | Sequence[Source], *, recursive: bool = False
) -> list[tuple[str, str]]:
    """The ``(name, text)`` of every file named (a folder's manifest files, those of its
    sub-folders too with ``recursive``, as kubectl's ``-R``; ``"-"`` for stdin, read
    once), each bounded as :func:`load_manifests` reads them; raise
    :class:`ManifestError` when any cannot be read. For callers that must keep the exact
    text they validate (``apply``)."""
    recorder = _ReadErrors()
    texts = list(_read_sources(source, recorder, recursive=recursive))
    if recorder.errors:
        n = len(recorder.errors)
        raise ManifestError(
            f"manifests rejected: {n} {'error' if n == 1 else 'errors'}", recorder.errors
        )
    return texts


@dataclass(frozen=True)
class ObjectRef:
    """An object named in a manifest: what ``delete -f`` needs, and nothing else."""

    kind: str
    namespace: str
    """``""`` for a Namespace; ``default`` when the document names none."""
    name: str


def object_refs(texts: Sequence[tuple[str, str]]) -> list[ObjectRef]:
    """The objects the ``(source name, text)`` files name, in order (``kind: List`` items
    included), read without validating them as kubectl reads a file it deletes; raise
    :class:`ManifestError` naming any document that is not YAML or names no object."""
    refs: list[ObjectRef] = []
    problems: list[FieldError] = []
    with error_budget(_ERROR_BUDGET):
        for name, text in texts:
            if _oversized(text):
                problems.append(_too_long(name))
                continue
            try:
                documents = list(decoding.load_documents(text))
            except (yaml.YAMLError, RecursionError) as e:
                problem = getattr(e, "problem", None) or type(e).__name__
                problems.append(FieldError(DOCUMENT, "Invalid YAML", problem, source=name))
                continue
            for index, doc in enumerate(documents):
                if doc is None:
                    continue
                items = (
                    doc.get("items")
                    if isinstance(doc, dict) and doc.get("kind") == "List"
                    else [doc]
                )
                for item in items if isinstance(items, list) else [None]:
                    ref = _ref(item)
                    if ref is None:
                        problems.append(
                            FieldError(
                                DOCUMENT,
                                "Required value",
                                "kind and metadata.name",
                                source=f"{name}[{index}]",
                            )
                        )
                    else:
                        refs.append(ref)
    if problems:
        n = len(problems)
        raise ManifestError(f"manifests rejected: {n} {'error' if n == 1 else 'errors'}", problems)
    return refs


def _ref(doc: Any) -> ObjectRef | None:
    if not isinstance(doc, dict) or not isinstance(doc.get("kind"), str):
        return None
    meta = doc.get("metadata")
    if not isinstance(meta, dict) or not isinstance(meta.get("name"), str) or not meta["name"]:
        return None
    kind = doc["kind"]
    namespace = meta.get("namespace") if isinstance(meta.get("namespace"), str) else None
    return ObjectRef(
        kind=kind,
        namespace="" if kind == "Namespace" else (namespace or "default"),
        name=meta["name"],
    )


@dataclass
class _ReadErrors:
    errors: list[FieldError] = field(default_factory=list)

    def record(self, error: FieldError) -> None:
        self.errors.append(error)


def manifest_files(folder: Path, *, recursive: bool = False) -> list[Path]:
    """The manifest files of a folder as kubectl reads ``-f DIR``: names ending in
    ``.yaml``, ``.yml`` or ``.json``, in lexical order; with ``recursive`` those of its
    sub-folders too, in the walk's lexical order (a link to a folder is not followed)."""
    found: list[Path] = []
    for path in sorted(folder.iterdir()):
        if path.is_dir():
            if recursive and not path.is_symlink():
                found += manifest_files(path, recursive=True)
        elif path.suffix in _SUFFIXES and path.is_file():
            found.append(path)
    return found


def _read_sources(
    source: Source | Sequence[Source],
    loader: ErrorSink,
    *,
    recursive: bool = False,
) -> Iterator[tuple[str, str]]:
    items: Sequence[Source] = [source] if isinstance(source, (str, os.PathLike)) else source
    for item in items:
        name = os.fspath(item)
        if name == "-":
            yield "<stdin>", sys.stdin.read(MAX_DOCUMENT_BYTES + 1)
            continue
        path = Path(name)
        try:
            files = manifest_files(path, recursive=recursive) if path.is_dir() else [path]
        except OSError as e:
            loader.record(_unreadable(name, e))
            continue
        for file in files:
            text = _read_file(file, loader)
            if text is not None:
                yield str(file), text


def _unreadable(name: str, e: OSError) -> FieldError:
    return FieldError(DOCUMENT, "Unreadable", e.strerror or type(e).__name__, source=name)


def _read_file(file: Path, loader: ErrorSink) -> str | None:
    """The file's text, or None once its error is recorded. At most one byte more than the
    limit is read, so a huge file (or ``/dev/zero``) costs nothing."""
    name = str(file)
    try:
        with file.open("rb") as f:
            data = f.read(MAX_DOCUMENT_BYTES + 1)
    except FileNotFoundError:
        loader.record(FieldError(DOCUMENT, "Not found", go_quote(name), source=name))
        return None
    except OSError as e:
        loader.record(_unreadable(name, e))
        return None
    if len(data) > MAX_DOCUMENT_BYTES:
        loader.record(_too_long(name))
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        detail = f"invalid UTF-8 at byte {e.start}"
        loader.record(FieldError(DOCUMENT, "Unreadable", detail, source=name))
        return None


def _too_long(name: str) -> FieldError:
    detail = f"must have at most {MAX_DOCUMENT_BYTES} bytes"
    return FieldError(DOCUMENT, "Too long", detail, source=name)


def _oversized(text: str) -> bool:
    if len(text) * 4 <= MAX_DOCUMENT_BYTES:
        return False
    return len(text) > MAX_DOCUMENT_BYTES or (
        len(text.encode("utf-8", "surrogatepass")) > MAX_DOCUMENT_BYTES
    )


__all__ = [
    "DOCUMENT",
    "MAX_ERRORS",
    "ErrorSink",
    "ObjectRef",
    "Source",
    "manifest_files",
    "object_refs",
    "read_sources",
]
