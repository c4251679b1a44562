"""``asynckubelet validate``: the API server's verdict on manifests, creating nothing."""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer

from asynckubelet.cli.options import (
    AllowNamespacePolicyOpt,
    FilesArg,
    LenientOpt,
    LogOptions,
    NodeNameOpt,
    ReportFormatOpt,
    UsageError,
    ValidatePodSecurityOpt,
    check_pod_security,
)
from asynckubelet.cli.output import command, escape, out

if TYPE_CHECKING:
    from asynckubelet import errors
    from asynckubelet.manifests import ManifestReport


@command()
def validate(
    files: FilesArg,
    *,
    output: ReportFormatOpt = "text",
    lenient: LenientOpt = False,
    pod_security: ValidatePodSecurityOpt = "baseline",
    allow_namespace_policy: AllowNamespacePolicyOpt = False,
    node_name: NodeNameOpt = None,
    log: LogOptions,
) -> None:
    """Check manifests as an API server would, creating nothing (exit 1 when rejected)."""
    from asynckubelet.manifests import inspect_manifests

    if output not in ("text", "json"):
        raise UsageError(f"--output must be text or json, not {output!r}")
    level = check_pod_security(pod_security)
    report = inspect_manifests(
        files,
        lenient=lenient,
        pod_security=level,
        allow_namespace_policy=allow_namespace_policy,
        node_name=node_name or None,
    )
    if output == "json":
        print_json(report)
    else:
        print_text(report)
    raise typer.Exit(0 if report.accepted else 1)


def _entry(e: errors.FieldError) -> dict[str, str]:
    return {
        "source": e.source,
        "field": e.field,
        "reason": e.reason,
        "detail": e.detail,
        "message": str(e),
    }


def _ref(meta: object) -> dict[str, str | None]:
    return {k: getattr(meta, k, None) for k in ("namespace", "name", "uid")}


def print_json(report: ManifestReport) -> None:
    import json

    m = report.manifests
    document = {
        "accepted": report.accepted,
        "errors": [_entry(e) for e in report.errors],
        "warnings": [_entry(w) for w in report.warnings],
        "pods": [_ref(p.metadata) for p in m.pods],
        "configmaps": [_ref(c.metadata) for c in m.configmaps],
        "secrets": [_ref(s.metadata) for s in m.secrets],
        "objects": [{"kind": o.kind, **_ref(o.metadata)} for o in m.objects],
    }
    print(json.dumps(document, indent=2))


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def print_text(report: ManifestReport) -> None:
    for w in report.warnings:
        out.print(f"[yellow]warning:[/yellow] {escape(w.source)}: {escape(str(w))}")
    for e in report.errors:
        out.print(f"[red]error:[/red] {escape(e.source)}: {escape(str(e))}")
    m = report.manifests
    if report.accepted:
        others: dict[str, int] = {}
        for obj in m.objects:
            others[obj.kind.lower()] = others.get(obj.kind.lower(), 0) + 1
        more = "".join(f"{_count(n, kind)}, " for kind, n in others.items())
        out.print(
            f"accepted: {_count(len(m.pods), 'pod')}, {_count(len(m.configmaps), 'configmap')}, "
            f"{_count(len(m.secrets), 'secret')}, {more}{_count(len(report.warnings), 'warning')}"
        )
    else:
        out.print(f"rejected: {_count(len(report.errors), 'error')}")
