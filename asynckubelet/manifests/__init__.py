"""Kubernetes v1 manifests, loaded, defaulted, validated and admitted as an API server would.

Users bring YAML written for real clusters; the same file must mean the same thing here, and
a mistake must be caught before anything is created, in the words a Kubernetes user already
knows. The stages live in their own modules: ``loading`` (files and documents in, the entry
points), ``loader`` (the pipeline, document by document), ``results`` (what it gives),
``strict`` (unknown fields and types, from the lightkube-models schema), ``defaults``
(``SetDefaults_Pod``), ``validation`` (``ValidatePod``, with its parts ``objectmeta``,
``volumes``, ``containers``, ``probes`` and ``securitycontext``), ``workloads``, ``jobs``
and ``selectors`` (the apps and batch kinds, label selectors), ``security`` (Pod Security
Standards), ``quantity`` (resource quantities) and ``honour`` (fields accepted but not acted
on by a single node).
"""

from asynckubelet.manifests.loader import pod_uid
from asynckubelet.manifests.loading import (
    ObjectRef,
    Source,
    inspect_manifests,
    inspect_manifests_text,
    load_manifests,
    load_manifests_text,
    manifest_files,
    object_refs,
    read_sources,
)
from asynckubelet.manifests.results import ManifestReport, Manifests
from asynckubelet.manifests.security import LEVELS, Level

__all__ = [
    "LEVELS",
    "Level",
    "ManifestReport",
    "Manifests",
    "ObjectRef",
    "Source",
    "inspect_manifests",
    "inspect_manifests_text",
    "load_manifests",
    "load_manifests_text",
    "manifest_files",
    "object_refs",
    "pod_uid",
    "read_sources",
]
