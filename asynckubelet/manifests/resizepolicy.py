"""A container's ``resizePolicy`` as the API server defaults and validates it.

``SetDefaults_Pod`` gives every regular container that requests or limits cpu or memory a
``NotRequired`` policy for that resource unless one is named; ``validateResizePolicy``
accepts each of ``cpu`` and ``memory`` once, with ``NotRequired`` or ``RestartContainer``,
and only ``NotRequired`` in a pod whose ``restartPolicy`` is ``Never``. Init containers
that are not sidecars (``restartPolicy: Always``) may not set it at all.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lightkube.models.core_v1 import ContainerResizePolicy

from asynckubelet.errors import FieldError
from asynckubelet.manifests.messages import (
    GoValue,
    duplicate,
    go_quote,
    invalid,
    not_supported,
    required,
)

RESIZE_RESOURCES = ("cpu", "memory")
RESIZE_RESTART_POLICIES = ("NotRequired", "RestartContainer")
_NEVER = "must be 'NotRequired' when `restartPolicy` is 'Never'"
_INIT = "must not be set for init containers"


def default_resize_policy(ctr: dict[str, Any]) -> None:
    """Append ``{resourceName, restartPolicy: NotRequired}`` for each of cpu and memory the
    container requests or limits and names no policy for, in place."""
    policies = ctr.get("resizePolicy")
    named = {p.get("resourceName") for p in policies or () if isinstance(p, dict)}
    resources = ctr.get("resources") or {}
    requests = resources.get("requests") or {}
    limits = resources.get("limits") or {}
    for name in RESIZE_RESOURCES:
        if name not in named and (name in requests or name in limits):
            ctr.setdefault("resizePolicy", []).append(
                {"resourceName": name, "restartPolicy": "NotRequired"}
            )


def validate_resize_policy(
    policies: Sequence[ContainerResizePolicy] | None,
    path: str,
    pod_restart_policy: str | None,
    errs: list[FieldError],
) -> None:
    """``validateResizePolicy`` of one container's ``resizePolicy`` at ``path``."""
    seen: set[str] = set()
    for i, policy in enumerate(policies or ()):
        name = policy.resourceName
        if name in seen:
            errs.append(duplicate(f"{path}[{i}]", name))
        seen.add(name)
        if not name:
            errs.append(required(path))
        elif name not in RESIZE_RESOURCES:
            errs.append(not_supported(path, name, RESIZE_RESOURCES))
        restart = policy.restartPolicy
        if not restart:
            errs.append(required(path))
        elif restart not in RESIZE_RESTART_POLICIES:
            errs.append(not_supported(path, restart, RESIZE_RESTART_POLICIES))
        if pod_restart_policy == "Never" and restart != "NotRequired":
            errs.append(invalid(path, _shown(policies or ()), _NEVER))


def validate_init_resize_policy(
    policies: Sequence[ContainerResizePolicy] | None,
    path: str,
    pod_restart_policy: str | None,
    errs: list[FieldError],
    *,
    restartable: bool,
) -> None:
    """A sidecar's policy is checked as a container's; another init container has none."""
    if restartable:
        validate_resize_policy(policies, path, pod_restart_policy, errs)
    elif policies:
        errs.append(invalid(path, _shown(policies), _INIT))


def _shown(policies: Sequence[ContainerResizePolicy]) -> GoValue:
    """The list as ``field.Invalid`` prints it, Go's ``%#v``."""
    items = ", ".join(
        "core.ContainerResizePolicy{"
        f"ResourceName:{go_quote(p.resourceName or '')}, "
        f"RestartPolicy:{go_quote(p.restartPolicy or '')}}}"
        for p in policies
    )
    return GoValue(f"[]core.ContainerResizePolicy{{{items}}}")
