"""Fields a single node accepts but does not act on, each reported as a warning.

Users bring manifests written for clusters, full of scheduling and identity fields that mean
nothing without a scheduler, a service-account controller or an API server. Rejecting them
would make every real manifest fail; dropping them silently is the complaint users have
about other tools. So each one that is set yields one warning naming the field and saying
why this node does not honour it.

Fields whose value the node cannot carry out at all (a user namespace, an image volume,
pod-level limits) are not warned about here: admission refuses the pod
(:mod:`asynckubelet.node.podfeatures`).

Every field of the Pod and Container models is listed below as honoured, refused or warned
about; a test walks the models, so a field a new Kubernetes release adds cannot pass
through unclassified.
"""

from __future__ import annotations

from lightkube.models.core_v1 import Pod, PodSpec

from asynckubelet.errors import FieldError
from asynckubelet.manifests.messages import ignored
from asynckubelet.manifests.volumes import VOLUME_TYPES

__all__ = [
    "HONOURED_CONTAINER_FIELDS",
    "HONOURED_SPEC_FIELDS",
    "REFUSED_SPEC_FIELDS",
    "SUPPORTED_VOLUME_TYPES",
    "WARNED_CONTAINER_FIELDS",
    "WARNED_SPEC_FIELDS",
    "unhonoured_fields",
]

_NO_SCHEDULER = "there is no scheduler: the pod runs here whatever it asks for"
_NO_API = "there is no API server"
_SERVICE_ACCOUNT = (
    f"{_NO_API}: no API-access token is mounted and no image pull secrets come from it; "
    "projected serviceAccountToken volumes name it, in tokens from this node's own issuer"
)

_SPEC_FIELDS: tuple[tuple[str, str], ...] = (
    ("nodeSelector", _NO_SCHEDULER),
    ("affinity", _NO_SCHEDULER),
    ("tolerations", _NO_SCHEDULER),
    ("topologySpreadConstraints", _NO_SCHEDULER),
    ("priorityClassName", f"{_NO_SCHEDULER}, and nothing is preempted"),
    ("priority", f"{_NO_SCHEDULER}, and nothing is preempted"),
    ("preemptionPolicy", f"{_NO_SCHEDULER}, and nothing is preempted"),
    (
        "readinessGates",
        f"{_NO_API}: only a write of the pod's status through the Kubernetes API of `serve` "
        "(pods/status) sets the conditions they wait for",
    ),
    ("serviceAccountName", _SERVICE_ACCOUNT),
    ("serviceAccount", _SERVICE_ACCOUNT),
    ("runtimeClassName", "every container runs on the Docker engine's default runtime"),
    ("overhead", "no RuntimeClass accounts for pod overhead"),
    ("resourceClaims", "there is no dynamic resource allocation"),
    ("schedulingGroup", f"{_NO_SCHEDULER}, and no group is placed together"),
    ("evictionResponders", f"{_NO_API} to send eviction requests to respond to"),
    (
        "hostnameOverride",
        "the pod's hostname is spec.hostname or its name; hostnameOverride is not applied",
    ),
)
_CONTAINER_FIELDS: tuple[tuple[str, str], ...] = (
    ("volumeDevices", "raw block devices are not supported by this node"),
)

HONOURED_SPEC_FIELDS = frozenset(
    {
        "containers",
        "initContainers",
        "ephemeralContainers",
        "volumes",
        "restartPolicy",
        "terminationGracePeriodSeconds",
        "activeDeadlineSeconds",
        "dnsPolicy",
        "dnsConfig",
        "hostNetwork",
        "hostPID",
        "hostIPC",
        "shareProcessNamespace",
        "hostname",
        "subdomain",
        "setHostnameAsFQDN",
        "hostAliases",
        "imagePullSecrets",
        "securityContext",
        "schedulingGates",
        "enableServiceLinks",
        "os",
        "resources",
    }
)
"""Pod spec fields the node carries out (``os`` and pod-level requests at admission)."""
REFUSED_SPEC_FIELDS = frozenset({"hostUsers"})
"""Pod spec fields whose value the node cannot carry out: admission refuses the pod
(:mod:`asynckubelet.node.podfeatures`), as it does pod-level limits and image volumes."""
WARNED_SPEC_FIELDS = frozenset(
    {name for name, _ in _SPEC_FIELDS}
    | {"schedulerName", "nodeName", "automountServiceAccountToken"}
)
"""Pod spec fields that get a warning whenever their value asks for something not done."""
HONOURED_CONTAINER_FIELDS = frozenset(
    {
        "resizePolicy",
        "name",
        "image",
        "imagePullPolicy",
        "command",
        "args",
        "workingDir",
        "env",
        "envFrom",
        "ports",
        "volumeMounts",
        "resources",
        "lifecycle",
        "livenessProbe",
        "readinessProbe",
        "startupProbe",
        "restartPolicy",
        "restartPolicyRules",
        "securityContext",
        "stdin",
        "stdinOnce",
        "tty",
        "terminationMessagePath",
        "terminationMessagePolicy",
    }
)
WARNED_CONTAINER_FIELDS = frozenset(name for name, _ in _CONTAINER_FIELDS)

SUPPORTED_VOLUME_TYPES = frozenset(
    {
        "emptyDir",
        "hostPath",
        "configMap",
        "secret",
        "downwardAPI",
        "projected",
        "persistentVolumeClaim",
    }
)
_PROJECTED_UNSUPPORTED = ("clusterTrustBundle", "podCertificate")
_REFUSED_VOLUME_TYPES = frozenset({"image"})
"""Volume types admission refuses (:mod:`asynckubelet.node.podfeatures`)."""


def unhonoured_fields(pod: Pod, *, node_name: str, node_labels: bool = False) -> list[FieldError]:
    """One warning per field set on ``pod`` that this node accepts but does not honour.

    ``node_labels``: the node knows its labels, so admission checks ``nodeSelector`` and
    node affinity (pod affinity still gets its warning)."""
    spec = pod.spec
    if spec is None:
        return []
    checked = {"nodeSelector"} if node_labels else set()
    if node_labels and (
        spec.affinity is None
        or (spec.affinity.podAffinity is None and spec.affinity.podAntiAffinity is None)
    ):
        checked.add("affinity")
    warnings = [
        ignored(f"spec.{field}", why)
        for field, why in _SPEC_FIELDS
        if field not in checked and getattr(spec, field, None) not in (None, [], {}, "")
    ]
    if spec.schedulerName not in (None, "", "default-scheduler"):
        warnings.append(ignored("spec.schedulerName", _NO_SCHEDULER))
    if spec.nodeName and spec.nodeName != node_name:
        warnings.append(
            ignored("spec.nodeName", f"the pod runs on this node ({node_name}) regardless")
        )
    warnings.extend(_unhonoured_container_fields(spec))
    if spec.automountServiceAccountToken:
        warnings.append(
            ignored(
                "spec.automountServiceAccountToken",
                f"{_NO_API} to issue service-account tokens",
            )
        )
    warnings.extend(_unhonoured_volume_fields(spec))
    return warnings


def _unhonoured_container_fields(spec: PodSpec) -> list[FieldError]:
    warnings: list[FieldError] = []
    for kind, containers in (
        ("containers", spec.containers),
        ("initContainers", spec.initContainers),
    ):
        for i, ctr in enumerate(containers or []):
            warnings.extend(
                ignored(f"spec.{kind}[{i}].{field}", why)
                for field, why in _CONTAINER_FIELDS
                if getattr(ctr, field, None) not in (None, [], {}, "")
            )
    return warnings


def _unhonoured_volume_fields(spec: PodSpec) -> list[FieldError]:
    warnings: list[FieldError] = []
    for i, vol in enumerate(spec.volumes or []):
        path = f"spec.volumes[{i}]"
        for kind in VOLUME_TYPES:
            if kind in _REFUSED_VOLUME_TYPES:
                continue
            if kind not in SUPPORTED_VOLUME_TYPES and getattr(vol, kind, None) is not None:
                warnings.append(
                    ignored(f"{path}.{kind}", f"{kind} volumes are not supported by this node")
                )
        if vol.projected is not None:
            for j, source in enumerate(vol.projected.sources or []):
                for kind in _PROJECTED_UNSUPPORTED:
                    if getattr(source, kind, None) is not None:
                        warnings.append(
                            ignored(
                                f"{path}.projected.sources[{j}].{kind}",
                                f"{_NO_API} to issue it, so it is not mounted",
                            )
                        )
    return warnings
