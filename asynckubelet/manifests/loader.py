"""One run of loading: every document through the API server's stages, every problem kept.

Each document goes through the same stages as on an API server's create path (kind and
version, strict decode, defaulting, validation, then Pod Security admission once every
Namespace document has been seen); the core kinds (Pod, ConfigMap, Secret, Service,
Namespace) have rules of their own here, the others go through their entry in
:mod:`~asynckubelet.manifests.kinds`. A failure of any stage becomes a field error tagged
with ``file[document index]``, never an exception, and errors past a bound are counted,
not kept, so one run shows the user everything a hostile input can make it show.
"""

from __future__ import annotations

import base64
import binascii
import itertools
import socket
import uuid
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

import yaml
from lightkube.models.core_v1 import ConfigMap, Namespace, Pod, Secret, Service
from lightkube.models.meta_v1 import ObjectMeta

from asynckubelet.errors import FieldError
from asynckubelet.manifests import (
    decoding,
    defaults,
    honour,
    kinds,
    objectmeta,
    security,
    service,
    strict,
    validation,
)
from asynckubelet.manifests.messages import (
    DROPPED,
    MAX_SHOWN,
    go_quote,
    ignored,
    invalid,
    not_supported,
    required,
    shown,
)
from asynckubelet.manifests.results import ManifestReport, Manifests
from asynckubelet.manifests.security import ENFORCE_LABEL, LEVELS, Level
from asynckubelet.manifests.sources import DOCUMENT, MAX_ERRORS, _oversized, _too_long

__all__ = ["pod_uid"]

_SUPPORTED_KINDS = tuple(sorted([*kinds.KINDS, "List"]))
_END = object()
_UID_NAMESPACE = uuid.UUID("6f1d3c0e-8a4b-5c2d-9e7f-a1b2c3d4e5f6")
_T = TypeVar("_T")


def pod_uid(*, node_name: str, namespace: str, name: str) -> str:
    """The UID of a pod that has none: the same on every load, on the same node."""
    return str(uuid.uuid5(_UID_NAMESPACE, f"{node_name}/{namespace}/{name}"))


def _type_meta(doc: dict[str, Any]) -> kinds.KindInfo | FieldError:
    """The kind a document names, or the first problem with its ``kind`` and ``apiVersion``."""
    kind = doc.get("kind")
    if not kind:
        return required("kind")
    found = kinds.info(kind) if isinstance(kind, str) else None
    if found is None:
        return not_supported("kind", kind, _SUPPORTED_KINDS)
    api_version = doc.get("apiVersion")
    if not api_version:
        return required("apiVersion")
    if api_version != found.api_version:
        return not_supported("apiVersion", api_version, (found.api_version,))
    return found


@dataclass
class _Loader:
    lenient: bool
    level: Level
    allow_namespace_policy: bool
    node_name: str
    node_labels: bool = False
    errors: list[FieldError] = field(default_factory=list)
    warnings: list[FieldError] = field(default_factory=list)
    pods: dict[tuple[str, str], tuple[Pod, str]] = field(default_factory=dict)
    configmaps: dict[tuple[str, str], tuple[ConfigMap, str]] = field(default_factory=dict)
    secrets: dict[tuple[str, str], tuple[Secret, str]] = field(default_factory=dict)
    secret_data: dict[tuple[str, str], dict[str, bytes]] = field(default_factory=dict)
    namespaces: dict[tuple[str, str], tuple[Namespace, str]] = field(default_factory=dict)
    objects: dict[tuple[str, str, str], tuple[Any, str]] = field(default_factory=dict)
    services: dict[tuple[str, str], tuple[Service, str]] = field(default_factory=dict)
    order: dict[tuple[str, str | None, str], None] = field(default_factory=dict)
    levels: dict[str, Level] = field(default_factory=dict)
    dropped_errors: int = 0
    dropped_warnings: int = 0

    @classmethod
    def create(
        cls,
        *,
        lenient: bool,
        level: Level,
        allow_namespace_policy: bool,
        node_name: str | None,
        node_labels: bool = False,
    ) -> _Loader:
        if level not in LEVELS:
            raise ValueError(f"pod security level must be one of {', '.join(LEVELS)}: {level!r}")
        return cls(
            lenient=lenient,
            level=level,
            allow_namespace_policy=allow_namespace_policy,
            node_name=node_name or socket.gethostname(),
            node_labels=node_labels,
        )

    def know_namespace(self, ns: Namespace) -> None:
        """A Namespace stored earlier: its Pod Security label, when valid and allowed to
        set this level, applies to the pods loaded after (no error or warning is made
        about it again)."""
        labels = (ns.metadata.labels if ns.metadata else None) or {}
        level = labels.get(ENFORCE_LABEL)
        if ns.metadata is None or not ns.metadata.name or level not in LEVELS:
            return
        chosen = cast(Level, level)
        if self.allow_namespace_policy or LEVELS.index(chosen) >= LEVELS.index(self.level):
            self.levels[ns.metadata.name] = chosen

    def add_text(self, text: str, name: str) -> None:
        """Every document of ``text``; any failure becomes a field error, never an exception."""
        if _oversized(text):
            self.record(_too_long(name))
            return
        documents = decoding.load_documents(text)
        for index in itertools.count():
            try:
                doc = next(documents, _END)
            except yaml.YAMLError as e:
                mark = getattr(e, "problem_mark", None)
                where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
                problem = getattr(e, "problem", None) or type(e).__name__
                self.record(FieldError(DOCUMENT, "Invalid YAML", f"{where}{problem}", source=name))
                return
            except RecursionError:
                self.record(FieldError(DOCUMENT, "Invalid YAML", "nested too deeply", source=name))
                return
            except Exception as e:
                self.record(_internal(e, "reading the YAML", name))
                return
            if doc is _END:
                return
            source = f"{name}[{index}]"
            try:
                self.add_document(doc, source)
            except RecursionError:
                self.record(
                    FieldError(DOCUMENT, "Invalid value", "nested too deeply", source=source)
                )
            except Exception as e:
                self.record(_internal(e, "checking this document", source))

    def record(self, error: FieldError, *, warning: bool = False) -> None:
        """Keep ``error`` with its field and detail cut to a readable length; past
        :data:`MAX_ERRORS` only count it."""
        into = self.warnings if warning else self.errors
        if error is DROPPED or len(into) >= MAX_ERRORS:
            if warning:
                self.dropped_warnings += 1
            else:
                self.dropped_errors += 1
            return
        into.append(
            FieldError(
                shown(error.field, MAX_SHOWN // 2),
                error.reason,
                shown(error.detail, 4 * MAX_SHOWN),
                source=shown(error.source, MAX_SHOWN // 2),
            )
        )

    def add_document(self, doc: Any, source: str) -> None:
        if doc is None:
            return
        if not isinstance(doc, dict):
            self._error(invalid(DOCUMENT, type(doc).__name__, "must be an object"), source)
            return
        kind = doc.get("kind")
        if kind == "List":
            items = doc.get("items")
            if not isinstance(items, list):
                self._error(invalid("items", items, "must be a list"), source)
                return
            for j, item in enumerate(items):
                self._add_object(item, source, f"items[{j}].")
            return
        self._add_object(doc, source, "")

    def _error(self, error: FieldError, source: str, prefix: str = "") -> None:
        if error is DROPPED:
            self.record(error)
            return
        path = f"{prefix}{error.field}" if prefix and error.field != DOCUMENT else error.field
        self.record(FieldError(path, error.reason, error.detail, source=source))

    def _warn(self, warning: FieldError, source: str, prefix: str = "") -> None:
        if warning is DROPPED:
            self.record(warning, warning=True)
            return
        path = f"{prefix}{warning.field}" if prefix else warning.field
        self.record(FieldError(path, warning.reason, warning.detail, source=source), warning=True)

    def _add_object(self, doc: Any, source: str, prefix: str) -> None:
        if not isinstance(doc, dict):
            self._error(invalid(DOCUMENT, type(doc).__name__, "must be an object"), source, prefix)
            return
        found = _type_meta(doc)
        if isinstance(found, FieldError):
            self._error(found, source, prefix)
            return
        kind = found.kind
        absent = frozenset(path for path in found.nullable if _lookup(doc, path) is None)
        problems = strict.check_document(doc, found.model)
        for path in problems.unknown:
            detail = f"unknown field {go_quote(path)}"
            if self.lenient:
                self._warn(FieldError(path, "Ignored", detail), source, prefix)
            else:
                self._error(FieldError(path, "strict decoding error", detail), source, prefix)
        if problems.errors:
            for error in problems.errors:
                self._error(error, source, prefix)
            return
        self._place(kind, doc.get("metadata"))
        if kind == "Pod":
            self._add_pod(doc, source, prefix)
        elif kind == "ConfigMap":
            self._add_configmap(doc, source, prefix)
        elif kind == "Secret":
            self._add_secret(doc, source, prefix)
        elif kind == "Service":
            self._add_service(doc, source, prefix)
        elif kind == "Namespace":
            self._add_namespace(doc, source, prefix)
        else:
            self._add_generic(found, doc, source, prefix, absent=absent)

    def _place(self, kind: str, meta: Any) -> None:
        """Note where the input holds the object (:attr:`Manifests.order`)."""
        if isinstance(meta, dict) and isinstance(meta.get("name"), str):
            namespace = meta.get("namespace")
            self.order.setdefault(
                (kind, namespace if isinstance(namespace, str) else None, meta["name"])
            )

    def _build(self, cls: type[_T], doc: dict[str, Any], source: str, prefix: str) -> _T | None:
        try:
            return cast(_T, cls.from_dict(doc))  # type: ignore[attr-defined]
        except (TypeError, ValueError) as e:
            text = str(e)
            where = text.rpartition("at `$.")[2].rstrip("`") if "at `$." in text else DOCUMENT
            self._error(FieldError(where, "Invalid value", text.split(" - at ")[0]), source, prefix)
            return None

    def _add_pod(self, doc: dict[str, Any], source: str, prefix: str) -> None:
        defaults.default_pod(doc)
        meta = doc["metadata"]
        status = doc.pop("status", None)
        if status:
            why = "status is reported by the node, never read"
            self._warn(ignored("status", why), source, prefix)
        if not meta.get("uid") and meta.get("name"):
            meta["uid"] = pod_uid(
                node_name=self.node_name, namespace=meta["namespace"], name=meta["name"]
            )
        pod = self._build(Pod, doc, source, prefix)
        if pod is None:
            return
        for warning in honour.unhonoured_fields(
            pod, node_name=self.node_name, node_labels=self.node_labels
        ):
            self._warn(warning, source, prefix)
        errors = validation.validate_pod(pod)
        for error in errors:
            self._error(error, source, prefix)
        if errors:
            return
        key = (meta["namespace"], meta["name"])
        self._replace(self.pods, key, (pod, source), "pod", source, prefix)

    def _add_generic(
        self,
        found: kinds.KindInfo,
        doc: dict[str, Any],
        source: str,
        prefix: str,
        *,
        absent: frozenset[str] = frozenset(),
    ) -> None:
        """A kind of the table without rules of its own here: defaulted, built, validated;
        its pod template checked as the pods it makes would be."""
        if found.default is not None:
            found.default(doc)
        if doc.pop("status", None):
            why = "status is written by the node's controllers, never read"
            self._warn(ignored("status", why), source, prefix)
        obj = self._build(found.model, doc, source, prefix)
        if obj is None:
            return
        template = kinds.pod_template(obj)
        if template is not None:
            # The daemon controller itself matches the node and its taints.
            daemon = found.kind == "DaemonSet"
            for warning in honour.unhonoured_fields(
                _template_pod(obj, template),
                node_name=self.node_name,
                node_labels=self.node_labels or daemon,
            ):
                if daemon and warning.field == "spec.tolerations":
                    continue
                path = f"{found.template_path}.{warning.field}"
                self._warn(FieldError(path, warning.reason, warning.detail), source, prefix)
        errors = found.validate(obj, absent=absent) if found.validate is not None else []
        for error in errors:
            self._error(error, source, prefix)
        meta = obj.metadata
        if errors or meta is None or not meta.name:
            return
        key = (found.kind, meta.namespace or "" if found.namespaced else "", meta.name)
        self._replace(self.objects, key, (obj, source), found.resource, source, prefix)

    def _replace(
        self,
        table: dict[Any, tuple[_T, str]],
        key: tuple[str, ...],
        entry: tuple[_T, str],
        kind: str,
        source: str,
        prefix: str,
    ) -> None:
        earlier = table.pop(key, None)
        if earlier is not None:
            self._warn(
                FieldError(
                    "metadata.name",
                    "Duplicate value",
                    f"{go_quote(key[1])}: {kind} {'/'.join(filter(None, key))} is also defined in "
                    f"{earlier[1]}; this later definition replaces it",
                ),
                source,
                prefix,
            )
        table[key] = entry

    def _add_configmap(self, doc: dict[str, Any], source: str, prefix: str) -> None:
        defaults.default_configmap(doc)
        cm = self._build(ConfigMap, doc, source, prefix)
        if cm is None:
            return
        errors = objectmeta.validate_object_meta(cm.metadata, namespaced=True)
        errors += validation.validate_configmap_data(cm.data, cm.binaryData)
        for key, value in (cm.binaryData or {}).items():
            try:
                base64.b64decode(value, validate=True)
            except (binascii.Error, ValueError, TypeError):
                errors.append(
                    FieldError(
                        f"binaryData[{key}]",
                        "Invalid value",
                        f"illegal base64 data at input byte {_bad_base64_offset(str(value))}",
                    )
                )
        for error in errors:
            self._error(error, source, prefix)
        if not errors and cm.metadata is not None and cm.metadata.name:
            key = (cm.metadata.namespace or "default", cm.metadata.name)
            self._replace(self.configmaps, key, (cm, source), "configmap", source, prefix)

    def _add_secret(self, doc: dict[str, Any], source: str, prefix: str) -> None:
        defaults.default_secret(doc)
        decoded: dict[str, bytes] = {}
        errors: list[FieldError] = []
        for key, value in (doc.get("data") or {}).items():
            try:
                decoded[key] = base64.b64decode(value, validate=True)
            except (binascii.Error, ValueError):
                errors.append(
                    FieldError(
                        f"data[{key}]",
                        "Invalid value",
                        f"illegal base64 data at input byte {_bad_base64_offset(value)}",
                    )
                )
        for key, value in (doc.pop("stringData", None) or {}).items():
            decoded[key] = value.encode("utf-8")
        doc["data"] = {k: base64.b64encode(v).decode("ascii") for k, v in decoded.items()}
        secret = self._build(Secret, doc, source, prefix)
        if secret is None:
            return
        errors += objectmeta.validate_object_meta(secret.metadata, namespaced=True)
        errors += validation.validate_secret_data(decoded)
        errors += validation.validate_secret_type(secret.type, decoded)
        for error in errors:
            self._error(error, source, prefix)
        if not errors and secret.metadata is not None and secret.metadata.name:
            key = (secret.metadata.namespace or "default", secret.metadata.name)
            self._replace(self.secrets, key, (secret, source), "secret", source, prefix)
            self.secret_data[key] = decoded

    def _add_service(self, doc: dict[str, Any], source: str, prefix: str) -> None:
        service.default_service(doc)
        doc.pop("status", None)
        svc = self._build(Service, doc, source, prefix)
        if svc is None:
            return
        meta = svc.metadata
        errors = [
            e
            for e in objectmeta.validate_object_meta(meta, namespaced=True)
            if e.field != "metadata.name"
        ]
        errors = service.validate_service_name(meta.name if meta else None) + errors
        errors += service.validate_service(svc)
        for error in errors:
            self._error(error, source, prefix)
        for warning in service.unhonoured_service_fields(svc):
            self._warn(warning, source, prefix)
        if not errors and svc.metadata is not None and svc.metadata.name:
            key = (svc.metadata.namespace or "default", svc.metadata.name)
            self._replace(self.services, key, (svc, source), "service", source, prefix)

    def _add_namespace(self, doc: dict[str, Any], source: str, prefix: str) -> None:
        ns = self._build(Namespace, doc, source, prefix)
        if ns is None:
            return
        errors = objectmeta.validate_object_meta(ns.metadata, namespaced=False, label_name=True)
        labels = (ns.metadata.labels if ns.metadata else None) or {}
        level = labels.get(ENFORCE_LABEL)
        path = f"metadata.labels[{ENFORCE_LABEL}]"
        if level is not None and level not in LEVELS:
            errors.append(
                invalid(path, str(level), "must be one of privileged, baseline, restricted")
            )
        for error in errors:
            self._error(error, source, prefix)
        if errors or ns.metadata is None or not ns.metadata.name:
            return
        name = ns.metadata.name
        self._replace(self.namespaces, ("", name), (ns, source), "namespace", source, prefix)
        self.levels.pop(name, None)
        if level is None:
            return
        version = labels.get(security.ENFORCE_VERSION_LABEL)
        if version not in (None, "latest"):
            self._warn(
                ignored(
                    f"metadata.labels[{security.ENFORCE_VERSION_LABEL}]",
                    "only the latest policy version is enforced",
                ),
                source,
                prefix,
            )
        chosen = cast(Level, level)
        if not self.allow_namespace_policy and LEVELS.index(chosen) < LEVELS.index(self.level):
            self._warn(
                ignored(
                    path,
                    f'a namespace may only make this node\'s "{self.level}:latest" stricter; '
                    "relaxing it is the operator's choice (--allow-namespace-policy)",
                ),
                source,
                prefix,
            )
            return
        self.levels[ns.metadata.name] = chosen

    def finish(self) -> ManifestReport:
        objects = []
        forbidden: list[tuple[FieldError, str, str]] = []
        for (kind, namespace, name), (obj, source) in self.objects.items():
            template = kinds.pod_template(obj)
            level = self.levels.get(namespace, self.level)
            results = (
                security.check_pod(_template_pod(obj, template), level=level)
                if template is not None
                else None
            )
            if results:
                path = kinds.KINDS[kind].template_path or "spec.template"
                message = security.violation_message(level, results)
                before = len(self.errors)
                self.record(FieldError(f"{path}.spec", "Forbidden", message, source=source))
                if len(self.errors) > before:
                    forbidden.append((self.errors[-1], kind, name))
            else:
                objects.append(obj)
        pods = []
        for (namespace, name), (pod, source) in self.pods.items():
            level = self.levels.get(namespace, self.level)
            results = security.check_pod(pod, level=level)
            if results:
                message = security.violation_message(level, results)
                before = len(self.errors)
                self.record(FieldError("spec", "Forbidden", message, source=source))
                if len(self.errors) > before:
                    forbidden.append((self.errors[-1], "Pod", name))
            else:
                pods.append(pod)
        if self.dropped_errors:
            self.errors.append(_dropped(self.dropped_errors, "errors"))
        if self.dropped_warnings:
            self.warnings.append(_dropped(self.dropped_warnings, "warnings"))
        manifests = Manifests(
            pods=tuple(pods),
            configmaps=tuple(cm for cm, _ in self.configmaps.values()),
            secrets=tuple(s for s, _ in self.secrets.values()),
            secret_data=dict(self.secret_data),
            warnings=tuple(self.warnings),
            namespaces=tuple(ns for ns, _ in self.namespaces.values()),
            objects=tuple(objects),
            services=tuple(s for s, _ in self.services.values()),
            order=tuple(self.order),
        )
        return ManifestReport(manifests, tuple(self.errors), tuple(forbidden))


def _lookup(doc: Any, path: str) -> Any:
    """The value at a dotted ``path`` of a document, or None."""
    for part in path.split("."):
        if not isinstance(doc, dict):
            return None
        doc = doc.get(part)
    return doc


def _template_pod(obj: Any, template: Any) -> Pod:
    """The pod a workload's template makes, for the checks a pod gets (its namespace,
    its template's labels and spec)."""
    meta = obj.metadata
    labels = (template.metadata.labels if template.metadata is not None else None) or {}
    return Pod(
        metadata=ObjectMeta(
            name=meta.name if meta is not None else None,
            namespace=(meta.namespace if meta is not None else None) or "default",
            labels=dict(labels),
        ),
        spec=template.spec,
    )


def _dropped(count: int, what: str) -> FieldError:
    return FieldError(DOCUMENT, "Too many", f"{count} more {what} not shown (at most {MAX_ERRORS})")


def _internal(e: BaseException, doing: str, source: str) -> FieldError:
    """A failure no rule foresaw: named by its type only, since its text may quote input."""
    return FieldError(
        DOCUMENT, "Internal error", f"{type(e).__name__} while {doing}", source=source
    )


def _bad_base64_offset(value: str) -> int:
    alphabet = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")
    for i, ch in enumerate(value):
        if ch == "=":
            return i if i < len(value) - 2 or len(value) % 4 else len(value)
        if ch not in alphabet:
            return i
    return len(value) - len(value) % 4
