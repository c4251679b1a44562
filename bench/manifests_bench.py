"""How long loading and validating one typical pod takes, from YAML text to admitted Pod.

The target is well under a millisecond per pod, so that a directory of manifests, or a
re-apply on every change, costs nothing next to a container start. Run:
``python bench/manifests_bench.py [iterations]``.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

from asynckubelet.manifests import load_manifests_text

_EXAMPLES = Path(__file__).resolve().parents[1] / "tests" / "data" / "examples"
_EXAMPLE = _EXAMPLES / "two-container-pod.yaml"


def main(iterations: int = 5000) -> float:
    text = _EXAMPLE.read_text()
    for _ in range(200):
        load_manifests_text(text, node_name="bench")
    samples = []
    for _ in range(iterations):
        start = time.perf_counter()
        manifests = load_manifests_text(text, node_name="bench")
        samples.append(time.perf_counter() - start)
        assert len(manifests.pods) == 1
    median_us = statistics.median(samples) * 1e6
    p90_us = statistics.quantiles(samples, n=10)[-1] * 1e6
    print(f"load+default+validate+admit one pod: median {median_us:.0f} us, p90 {p90_us:.0f} us")
    return median_us


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5000)
