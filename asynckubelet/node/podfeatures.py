"""Pod features the API server accepts and this node cannot carry out on Docker.

A kubelet whose runtime lacks a feature a pod needs refuses the pod at admission rather
than run it without (``PodFeatureUnsupported``, ``PodLevelResourcesNotSupported`` in
``pkg/kubelet/lifecycle``): a pod that asked for its own user namespace and ran with the
node's user IDs, or whose pod-level memory limit bound nothing, would look as asked for
and be something else. Each refusal names the field and says why.

- ``spec.hostUsers: false``: the Docker engine gives no single container a user namespace
  of its own; only a daemon-wide ``userns-remap`` does, for every container alike.
- ``spec.volumes[].image``: the engine mounts no image as a volume.
- ``spec.resources.limits``: the containers' cgroups sit under a pod cgroup only with a
  local engine and pod cgroups on, and nothing writes limits into it; pod-level
  *requests* are taken (admission counts them, as the scheduler would).
"""

from __future__ import annotations

from lightkube.models.core_v1 import PodSpec

__all__ = [
    "POD_FEATURE_UNSUPPORTED",
    "POD_LEVEL_RESOURCES_NOT_SUPPORTED",
    "unsupported_feature",
]

POD_FEATURE_UNSUPPORTED = "PodFeatureUnsupported"
POD_LEVEL_RESOURCES_NOT_SUPPORTED = "PodLevelResourcesNotSupported"


def unsupported_feature(spec: PodSpec) -> tuple[str, str] | None:
    """The reason and message refusing the first feature of ``spec`` the node cannot
    carry out, or None."""
    if spec.hostUsers is False:
        return (
            POD_FEATURE_UNSUPPORTED,
            "spec.hostUsers: false asks for a user namespace of the pod's own, which the "
            "Docker engine cannot give one pod (only a daemon-wide userns-remap maps "
            "every container's users)",
        )
    for i, volume in enumerate(spec.volumes or []):
        if volume.image is not None:
            return (
                POD_FEATURE_UNSUPPORTED,
                f"spec.volumes[{i}].image: image volumes are not supported by this node "
                "(the Docker engine does not mount an image as a volume)",
            )
    if spec.resources is not None and spec.resources.limits:
        names = ", ".join(sorted(spec.resources.limits))
        return (
            POD_LEVEL_RESOURCES_NOT_SUPPORTED,
            f"spec.resources.limits ({names}): pod-level limits are not enforced by this "
            "node (no pod cgroup carries them); set the limits on the containers",
        )
    return None
