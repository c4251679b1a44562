"""Reading manifests: files, directories, stdin, multi-document YAML and ``kind: List``.

This is the one entry point from text to typed objects. Each document goes through the
same stages as on an API server (strict decode, defaulting, validation, then Pod Security
admission once every Namespace document has been seen), and every problem in every document
is collected, tagged with ``file[document index]``, so one run shows the user everything.
The stages are :mod:`~asynckubelet.manifests.loader`'s; what they give,
:class:`~asynckubelet.manifests.results.Manifests` and
:class:`~asynckubelet.manifests.results.ManifestReport`, is
:mod:`~asynckubelet.manifests.results`'.
"""

from __future__ import annotations

from collections.abc import Sequence

from lightkube.models.core_v1 import Namespace

from asynckubelet.errors import ManifestError
from asynckubelet.manifests.decoding import MAX_DOCUMENT_BYTES
from asynckubelet.manifests.loader import _Loader
from asynckubelet.manifests.messages import error_budget
from asynckubelet.manifests.results import ManifestReport, Manifests
from asynckubelet.manifests.security import Level
from asynckubelet.manifests.sources import (
    _ERROR_BUDGET,
    DOCUMENT,
    MAX_ERRORS,
    ObjectRef,
    Source,
    _read_sources,
    manifest_files,
    object_refs,
    read_sources,
)

__all__ = [
    "DOCUMENT",
    "MAX_DOCUMENT_BYTES",
    "MAX_ERRORS",
    "ObjectRef",
    "Source",
    "inspect_manifests",
    "inspect_manifests_text",
    "load_manifests",
    "load_manifests_text",
    "manifest_files",
    "object_refs",
    "read_sources",
]


def load_manifests(
    source: Source | Sequence[Source],
    *,
    lenient: bool = False,
    pod_security: Level = "baseline",
    allow_namespace_policy: bool = False,
    node_name: str | None = None,
    node_labels: bool = False,
) -> Manifests:
    """Load, default, validate and admit manifests; raise :class:`ManifestError` if any fail.

    ``source`` is a file, a directory (its ``*.yaml``, ``*.yml`` and ``*.json`` files),
    ``"-"`` for stdin, or a sequence of those.
    """
    report = inspect_manifests(
        source,
        lenient=lenient,
        pod_security=pod_security,
        allow_namespace_policy=allow_namespace_policy,
        node_name=node_name,
        node_labels=node_labels,
    )
    return _accepted_or_raise(report)


def load_manifests_text(
    text: str,
    *,
    source_name: str = "<text>",
    lenient: bool = False,
    pod_security: Level = "baseline",
    allow_namespace_policy: bool = False,
    node_name: str | None = None,
    namespaces: Sequence[Namespace] = (),
    node_labels: bool = False,
) -> Manifests:
    """:func:`load_manifests` for YAML already in memory.

    ``namespaces`` are Namespaces already known (stored by an API server): their Pod
    Security label counts for the pods of ``text`` as a Namespace document in it would."""
    report = inspect_manifests_text(
        text,
        source_name=source_name,
        lenient=lenient,
        pod_security=pod_security,
        allow_namespace_policy=allow_namespace_policy,
        node_name=node_name,
        namespaces=namespaces,
        node_labels=node_labels,
    )
    return _accepted_or_raise(report)


def inspect_manifests(
    source: Source | Sequence[Source],
    *,
    lenient: bool = False,
    pod_security: Level = "baseline",
    allow_namespace_policy: bool = False,
    node_name: str | None = None,
    node_labels: bool = False,
) -> ManifestReport:
    """Like :func:`load_manifests`, but return the errors instead of raising them."""
    loader = _Loader.create(
        lenient=lenient,
        level=pod_security,
        allow_namespace_policy=allow_namespace_policy,
        node_name=node_name,
        node_labels=node_labels,
    )
    with error_budget(_ERROR_BUDGET):
        for name, text in _read_sources(source, loader):
            loader.add_text(text, name)
        return loader.finish()


def inspect_manifests_text(
    text: str,
    *,
    source_name: str = "<text>",
    lenient: bool = False,
    pod_security: Level = "baseline",
    allow_namespace_policy: bool = False,
    node_name: str | None = None,
    namespaces: Sequence[Namespace] = (),
    node_labels: bool = False,
) -> ManifestReport:
    """Like :func:`load_manifests_text`, but return the errors instead of raising them."""
    loader = _Loader.create(
        lenient=lenient,
        level=pod_security,
        allow_namespace_policy=allow_namespace_policy,
        node_name=node_name,
        node_labels=node_labels,
    )
    for known in namespaces:
        loader.know_namespace(known)
    with error_budget(_ERROR_BUDGET):
        loader.add_text(text, source_name)
        return loader.finish()


def _accepted_or_raise(report: ManifestReport) -> Manifests:
    if report.errors:
        n = len(report.errors)
        raise ManifestError(
            f"manifests rejected: {n} {'error' if n == 1 else 'errors'}", list(report.errors)
        )
    return report.manifests
