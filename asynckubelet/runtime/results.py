"""What one ``sync_pod`` or ``kill_pod`` did, step by step, in the kubelet's words.

The kubelet's ``PodSyncResult``: one :class:`SyncResult` per step (kill, create sandbox,
set up network, start init container, start container...), each with an error name from
the kubelet's vocabulary (``CrashLoopBackOff``, ``RunContainerError``, ...) when it failed.
Status and event code read reasons from here, so no step's failure is lost.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field


class SyncAction(enum.Enum):
    START_CONTAINER = "StartContainer"
    KILL_CONTAINER = "KillContainer"
    CREATE_POD_SANDBOX = "CreatePodSandbox"
    CONFIG_POD_SANDBOX = "ConfigPodSandbox"
    KILL_POD_SANDBOX = "KillPodSandbox"
    SETUP_NETWORK = "SetupNetwork"
    TEARDOWN_NETWORK = "TeardownNetwork"
    INIT_CONTAINER = "InitContainer"
    REMOVE_CONTAINER = "RemoveContainer"


class SyncError(enum.StrEnum):
    """The kubelet's error names for failed steps (also container waiting reasons)."""

    CRASH_LOOP_BACK_OFF = "CrashLoopBackOff"
    RUN_CONTAINER = "RunContainerError"
    RUN_INIT_CONTAINER = "RunInitContainerError"
    KILL_CONTAINER = "KillContainerError"
    CREATE_POD_SANDBOX = "CreatePodSandboxError"
    CONFIG_POD_SANDBOX = "ConfigPodSandboxError"
    KILL_POD_SANDBOX = "KillPodSandboxError"
    SETUP_NETWORK = "SetupNetworkError"
    TEARDOWN_NETWORK = "TeardownNetworkError"
    IMAGE_PULL = "ErrImagePull"
    IMAGE_PULL_BACK_OFF = "ImagePullBackOff"
    IMAGE_NEVER_PULL = "ErrImageNeverPull"
    INVALID_IMAGE_NAME = "InvalidImageName"
    CREATE_CONTAINER_CONFIG = "CreateContainerConfigError"
    CREATE_CONTAINER = "CreateContainerError"
    POST_START_HOOK = "PostStartHookError"


@dataclass
class SyncResult:
    action: SyncAction
    target: str
    error: SyncError | None = None
    message: str = ""

    def fail(self, error: SyncError, message: str) -> None:
        self.error = error
        self.message = message


@dataclass
class PodSyncResult:
    results: list[SyncResult] = field(default_factory=list)
    containers_reset: bool = False
    """The sync removed every container of the pod for a restart in place (the caller
    syncs again at once, to start them anew)."""
    resized: bool = False
    """The sync changed a running container's CPU or memory in place (the caller reads the
    pod again at once, to report it)."""
    resize_error: str = ""
    """Why an in-place resize failed (the message of ``PodResizeInProgress``, reason
    ``Error``); '' when none did."""

    def add(self, action: SyncAction, target: str) -> SyncResult:
        result = SyncResult(action, target)
        self.results.append(result)
        return result

    @property
    def ok(self) -> bool:
        return all(r.error is None for r in self.results)

    @property
    def errors(self) -> list[SyncResult]:
        return [r for r in self.results if r.error is not None]

    def waiting_reasons(self) -> dict[str, tuple[str, str]]:
        """Container name -> (reason, message) of failed container starts, for status."""
        reasons: dict[str, tuple[str, str]] = {}
        for r in self.results:
            if r.error is not None and r.action in (
                SyncAction.START_CONTAINER,
                SyncAction.INIT_CONTAINER,
            ):
                reasons[r.target] = (str(r.error), r.message)
        return reasons

    def failed_in_runtime(self) -> bool:
        """True when a Docker operation failed (a sandbox, network or container that could
        not be made, started or stopped), as opposed to a wait (back-off, config error)."""
        return any(r.error in RUNTIME_FAILURES for r in self.results)


RUNTIME_FAILURES = frozenset(
    {
        SyncError.CREATE_POD_SANDBOX,
        SyncError.CONFIG_POD_SANDBOX,
        SyncError.KILL_POD_SANDBOX,
        SyncError.SETUP_NETWORK,
        SyncError.TEARDOWN_NETWORK,
        SyncError.CREATE_CONTAINER,
        SyncError.RUN_CONTAINER,
        SyncError.RUN_INIT_CONTAINER,
        SyncError.KILL_CONTAINER,
    }
)
