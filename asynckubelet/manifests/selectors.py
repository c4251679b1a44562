"""Label selectors: validated, matched and parsed as the API server and kubectl do.

A workload owns the pods its selector selects, and ``kubectl get -l`` lists what a
selector written on the command line selects, so both must read a selector exactly as a
cluster does, and refuse one with the API server's words. Mirrors apimachinery's
``pkg/apis/meta/v1/validation/validation.go`` (``ValidateLabelSelector``),
``pkg/apis/meta/v1/helpers.go`` (``LabelSelectorAsSelector``) and ``pkg/labels/selector.go``
(``Matches``, ``Parse``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from lightkube.models.meta_v1 import LabelSelector

from asynckubelet.errors import FieldError
from asynckubelet.manifests.messages import (
    GoValue,
    forbidden,
    go_map,
    go_quote,
    invalid,
    is_qualified_name,
    is_valid_label_value,
    required,
)
from asynckubelet.manifests.objectmeta import validate_labels

__all__ = [
    "go_label_selector",
    "parse_label_selector",
    "selector_matches",
    "validate_label_selector",
]

_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


def go_label_selector(selector: Mapping[str, Any] | None) -> GoValue:
    """A label selector as the API server prints it in an error (``%#v`` of a pointer)."""
    if selector is None:
        return GoValue("(*v1.LabelSelector)(nil)")
    labels = selector.get("matchLabels")
    expressions = selector.get("matchExpressions")
    if expressions:
        shown = ", ".join(
            "v1.LabelSelectorRequirement{"
            f"Key:{go_quote(str(e.get('key') or ''))}, "
            f"Operator:{go_quote(str(e.get('operator') or ''))}, "
            f"Values:{_go_strings(e.get('values'))}}}"
            for e in expressions
        )
        exprs = f"[]v1.LabelSelectorRequirement{{{shown}}}"
    else:
        exprs = "[]v1.LabelSelectorRequirement(nil)"
    return GoValue(f"&v1.LabelSelector{{MatchLabels:{go_map(labels)}, MatchExpressions:{exprs}}}")


def _go_strings(values: Sequence[str] | None) -> str:
    if values is None:
        return "[]string(nil)"
    return "[]string{" + ", ".join(go_quote(str(v)) for v in values) + "}"


def _selector_dict(selector: LabelSelector | None) -> dict[str, Any] | None:
    return selector.to_dict() if selector is not None else None


def validate_label_selector(selector: LabelSelector | None, path: str) -> list[FieldError]:
    """``ValidateLabelSelector`` (label values in expressions checked strictly)."""
    if selector is None:
        return []
    errs = validate_labels(selector.matchLabels, f"{path}.matchLabels")
    for i, expr in enumerate(selector.matchExpressions or []):
        at = f"{path}.matchExpressions[{i}]"
        if expr.operator in ("In", "NotIn"):
            if not expr.values:
                errs.append(
                    required(f"{at}.values", "must be specified when `operator` is 'In' or 'NotIn'")
                )
        elif expr.operator in ("Exists", "DoesNotExist"):
            if expr.values:
                errs.append(
                    forbidden(
                        f"{at}.values",
                        "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
                    )
                )
        else:
            errs.append(invalid(f"{at}.operator", expr.operator, "not a valid selector operator"))
        errs.extend(invalid(f"{at}.key", expr.key, m) for m in is_qualified_name(expr.key))
        for j, value in enumerate(expr.values or []):
            errs.extend(invalid(f"{at}.values[{j}]", value, m) for m in is_valid_label_value(value))
    return errs


def _selector_valid(selector: LabelSelector | None) -> bool:
    """Whether ``LabelSelectorAsSelector`` would accept it (operators known, values given)."""
    if selector is None:
        return True
    for expr in selector.matchExpressions or []:
        if expr.operator not in _OPERATORS:
            return False
        if expr.operator in ("In", "NotIn") and not expr.values:
            return False
    return True


def selector_matches(
    selector: LabelSelector | Mapping[str, Any] | None, labels: Mapping[str, str]
) -> bool:
    """Whether ``labels`` match ``selector`` (``matchLabels`` and ``matchExpressions``);
    an empty selector matches everything, a missing one nothing."""
    if selector is None:
        return False
    data = selector.to_dict() if isinstance(selector, LabelSelector) else dict(selector)
    for key, value in (data.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in data.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        present = key in labels
        if op == "In" and (not present or labels[key] not in values):
            return False
        if op == "NotIn" and present and labels[key] in values:
            return False
        if op == "Exists" and not present:
            return False
        if op == "DoesNotExist" and present:
            return False
        if op not in _OPERATORS:
            return False
    return True


_SET_TERM = re.compile(r"^\s*(!?)\s*([^\s!=(),]+)\s*(?:(in|notin)\s*\(([^)]*)\))?\s*$")


def parse_label_selector(text: str) -> dict[str, Any]:
    """A label selector as kubectl's ``-l`` takes it (``app=web,tier!=db,env in (a,b),
    !legacy``), as a ``LabelSelector`` dict; raise :class:`ValueError` with the API
    server's words for a key or value it refuses (``unable to parse requirement: key:
    Invalid value: ...``), or naming the term it cannot read."""
    labels: dict[str, str] = {}
    expressions: list[dict[str, Any]] = []
    for term in _split_terms(text):
        if not term.strip():
            continue
        for op, kind in (("!=", "NotIn"), ("==", "In"), ("=", "In")):
            if op in term:
                key, _, value = term.partition(op)
                key, value = key.strip(), value.strip()
                _check_requirement(key, [value])
                if kind == "In" and labels.get(key, value) == value:
                    labels[key] = value
                else:
                    expressions.append({"key": key, "operator": kind, "values": [value]})
                break
        else:
            match = _SET_TERM.match(term)
            if match is None:
                raise ValueError(f"unable to parse requirement: invalid term {term.strip()!r}")
            negated, key, op, values = match.groups()
            if op is not None:
                if negated:
                    raise ValueError(f"unable to parse requirement: invalid term {term.strip()!r}")
                items = [v.strip() for v in values.split(",") if v.strip()]
                _check_requirement(key, items)
                expressions.append(
                    {"key": key, "operator": "In" if op == "in" else "NotIn", "values": items}
                )
            else:
                _check_requirement(key, [])
                expressions.append(
                    {"key": key, "operator": "DoesNotExist" if negated else "Exists"}
                )
    selector: dict[str, Any] = {}
    if labels:
        selector["matchLabels"] = labels
    if expressions:
        selector["matchExpressions"] = expressions
    return selector


def _check_requirement(key: str, values: list[str]) -> None:
    """Raise the API server's error for a selector term's key or values."""
    problems = is_qualified_name(key)
    if problems:
        raise ValueError(
            f"unable to parse requirement: key: Invalid value: {go_quote(key)}: "
            + "; ".join(problems)
        )
    for i, value in enumerate(values):
        problems = is_valid_label_value(value)
        if problems:
            raise ValueError(
                f"unable to parse requirement: values[{i}][{key}]: Invalid value: "
                f"{go_quote(value)}: " + "; ".join(problems)
            )


def _split_terms(text: str) -> list[str]:
    """Terms separated by commas outside parentheses."""
    terms: list[str] = []
    current: list[str] = []
    depth = 0
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            terms.append("".join(current))
            current = []
        else:
            current.append(ch)
    terms.append("".join(current))
    return terms
