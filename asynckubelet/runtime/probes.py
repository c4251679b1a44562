"""Probe results as the rest of the runtime sees them.

The prober lives in ``node``; the runtime only reads its latest verdict per container
instance (keyed by Docker container id), the way the kubelet's ``computePodActions`` reads
``proberesults.Manager``. A container with no entry has not been probed yet, which is
different from ``UNKNOWN`` (probed, no verdict).
"""

from __future__ import annotations

import enum


class ProbeResult(enum.Enum):
    """The kubelet's ``proberesults.Result``."""

    SUCCESS = "Success"
    FAILURE = "Failure"
    UNKNOWN = "Unknown"
