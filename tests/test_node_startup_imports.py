"""What keeps a node cheap to start for a command that runs pods and leaves (``run``):
the kubelet and the composition root load neither ``prometheus_client`` nor the workload
controllers until a node asks for them, and a node that keeps no metrics never loads it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from asynckubelet.node.kubelet import Kubelet, KubeletConfig
from asynckubelet.node.metrics import NodeMetrics, NoMetrics
from asynckubelet.testing import FakeDocker

REPO = Path(__file__).resolve().parent.parent
HEAVY = ("prometheus_client", "asynckubelet.workloads")


def _fresh(code: str) -> str:
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={"PYTHONPATH": str(REPO)},
        check=True,
    )
    return result.stdout + result.stderr


def test_importing_the_kubelet_and_the_node_loads_no_metrics_library_nor_controllers() -> None:
    out = _fresh(
        "import sys\n"
        "import asynckubelet.node.kubelet, asynckubelet.nodeapp\n"
        "from asynckubelet.nodeapp import NodeConfig\n"
        "NodeConfig(controllers=False)\n"
        f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))\n"
    )
    assert out.splitlines() == ["[]"]


def test_a_kubelet_without_metrics_never_loads_the_metrics_library() -> None:
    out = _fresh(
        "import sys\n"
        "from asynckubelet.node.kubelet import Kubelet, KubeletConfig\n"
        "from asynckubelet.testing import FakeDocker\n"
        "k = Kubelet(KubeletConfig(node_name='n1', metrics=False), docker=FakeDocker())\n"
        "print(repr(k.metrics.render()), 'prometheus_client' in sys.modules)\n"
        "Kubelet(KubeletConfig(node_name='n1'), docker=FakeDocker())\n"
        "print('prometheus_client' in sys.modules)\n"
    )
    assert out.splitlines() == ["'' False", "True"]


def test_services_get_the_default_ranges_when_none_are_given() -> None:
    from asynckubelet.nodeapp.config import ServicesConfig
    from asynckubelet.workloads.allocation import ServiceRanges

    assert ServicesConfig().ranges == ServiceRanges()


@pytest.mark.parametrize("metrics", [True, False])
def test_a_kubelet_keeps_metrics_only_when_asked(metrics: bool) -> None:
    kubelet = Kubelet(KubeletConfig(node_name="n1", metrics=metrics), docker=FakeDocker())
    assert isinstance(kubelet.metrics, NodeMetrics if metrics else NoMetrics)
    kubelet.metrics.pod_start_duration.observe(1.0)
    kubelet.metrics.operation_failed("sync_pod")
    rendered = kubelet.metrics.render()
    assert ("kubelet_pod_start_duration_seconds_count 1.0" in rendered) is metrics
