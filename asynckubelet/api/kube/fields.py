"""Field selectors as the API server reads them (``?fieldSelector=status.phase=Running``).

Terms are comma-separated ``key=value``, ``key==value`` or ``key!=value``; every resource
takes ``metadata.name`` (and ``metadata.namespace`` when namespaced), and some take more
(:data:`FIELDS`, upstream's ``GetAttrs`` of each registry). A key a resource does not
take is a 400 worded as the API server words it: ``field label not supported: <key>``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

FIELDS: Mapping[str, tuple[str, ...]] = {
    "pods": (
        "spec.nodeName",
        "spec.restartPolicy",
        "spec.schedulerName",
        "spec.serviceAccountName",
        "spec.hostNetwork",
        "status.phase",
        "status.podIP",
        "status.nominatedNodeName",
    ),
    "nodes": ("spec.unschedulable",),
    "events": (
        "involvedObject.kind",
        "involvedObject.namespace",
        "involvedObject.name",
        "involvedObject.uid",
        "involvedObject.apiVersion",
        "involvedObject.resourceVersion",
        "involvedObject.fieldPath",
        "reason",
        "reportingComponent",
        "source",
        "type",
    ),
    "events.events.k8s.io": (
        "regarding.kind",
        "regarding.namespace",
        "regarding.name",
        "regarding.uid",
        "regarding.apiVersion",
        "regarding.resourceVersion",
        "regarding.fieldPath",
        "reason",
        "reportingController",
        "type",
    ),
}
"""Fields beyond ``metadata.name``/``metadata.namespace``, by resource."""
_DEFAULTS = {"spec.hostNetwork": "false", "spec.unschedulable": "false"}
_PATHS = {"source": "source.component"}
"""Fields a selector names otherwise than their place in the object."""


@dataclass(frozen=True)
class Term:
    key: str
    value: str
    equal: bool


def parse(text: str, *, resource: str, namespaced: bool, extra: tuple[str, ...] = ()) -> list[Term]:
    """The terms of ``text`` for ``resource``; ValueError with the API server's message for
    a key it does not take or a term that is not one."""
    allowed = {"metadata.name", *FIELDS.get(resource, ()), *extra}
    if namespaced:
        allowed.add("metadata.namespace")
    terms = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        op = next((o for o in ("!=", "==", "=") if o in part), None)
        if op is None:
            raise ValueError(f"invalid selector: '{text}'; can't understand '{part}'")
        key, _, value = part.partition(op)
        equal = op != "!="
        key = key.strip()
        if key not in allowed:
            raise ValueError(f"field label not supported: {key}")
        terms.append(Term(key, value.strip(), equal))
    return terms


def value_of(body: Mapping[str, Any], key: str) -> str:
    """The field ``key`` (dotted) of a JSON object, as a selector compares it."""
    node: Any = body
    for part in _PATHS.get(key, key).split("."):
        node = node.get(part) if isinstance(node, Mapping) else None
    if node is None:
        return _DEFAULTS.get(key, "")
    if isinstance(node, bool):
        return "true" if node else "false"
    return str(node)


def matcher(terms: list[Term]) -> Callable[[Mapping[str, Any]], bool]:
    """Whether a JSON object meets every term."""

    def matches(body: Mapping[str, Any]) -> bool:
        return all((value_of(body, t.key) == t.value) == t.equal for t in terms)

    return matches


__all__ = ["FIELDS", "Term", "matcher", "parse", "value_of"]
