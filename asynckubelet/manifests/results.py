"""What loading manifests gives: the accepted objects, and the full verdict on the input.

Every caller (the node's sources, the local API, ``kubectl apply``, ``validate``) reads the
same two records, so what was accepted, refused or only warned about is decided once, by
:mod:`~asynckubelet.manifests.loading`. The objects are lightkube-models objects as the API
server would store them: a Secret's ``data`` is base64 text with ``stringData`` merged in,
and the decoded bytes live beside it in ``Manifests.secret_data``, keyed by ``(namespace,
name)``, so nothing downstream decodes twice or sees ``stringData``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from lightkube.models.core_v1 import ConfigMap, Namespace, Pod, Secret, Service

from asynckubelet.errors import FieldError

__all__ = ["ManifestReport", "Manifests"]


@dataclass(frozen=True)
class Manifests:
    """What was accepted, ready for the node.

    ``pods`` are defaulted and validated and carry their UID in ``metadata.uid``;
    ``secret_data`` maps ``(namespace, name)`` to each Secret's decoded bytes; ``warnings``
    lists fields that were accepted but are not honoured (and unknown fields when lenient).
    ``objects`` holds the typed objects of the other kinds of :mod:`~asynckubelet.
    manifests.kinds` (Deployments, Jobs...), defaulted and validated.
    """

    pods: tuple[Pod, ...] = ()
    configmaps: tuple[ConfigMap, ...] = ()
    secrets: tuple[Secret, ...] = ()
    secret_data: Mapping[tuple[str, str], Mapping[str, bytes]] = field(default_factory=dict)
    warnings: tuple[FieldError, ...] = ()
    namespaces: tuple[Namespace, ...] = ()
    services: tuple[Service, ...] = ()
    objects: tuple[Any, ...] = ()
    order: tuple[tuple[str, str | None, str], ...] = ()
    """``(kind, namespace as written, name)`` of every object, in the order the input
    holds them (an object given twice: where it came first), as ``kubectl apply`` reports
    them; the fields above hold them by kind."""

    def of_kind(self, kind: str) -> tuple[Any, ...]:
        """The typed objects of one kind (``Pod``, ``Deployment``...)."""
        core = {
            "Pod": self.pods,
            "ConfigMap": self.configmaps,
            "Secret": self.secrets,
            "Namespace": self.namespaces,
            "Service": self.services,
        }
        if kind in core:
            return core[kind]
        return tuple(o for o in self.objects if getattr(o, "kind", None) == kind)


@dataclass(frozen=True)
class ManifestReport:
    """The full verdict on some input: what would be accepted, and every error found."""

    manifests: Manifests
    errors: tuple[FieldError, ...] = ()
    forbidden: tuple[tuple[FieldError, str, str], ...] = ()
    """The PodSecurity rejections among ``errors``, each with the kind and name of the
    object it refuses."""

    @property
    def accepted(self) -> bool:
        return not self.errors

    @property
    def warnings(self) -> tuple[FieldError, ...]:
        return self.manifests.warnings
