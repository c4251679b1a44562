"""What the worst inputs we know of cost the loader: time, and peak memory as traced.

Anyone who can write a manifest can hand the node these, so each must end in field errors
at a cost its size allows. Each case is loaded once untraced (time) and once under
``tracemalloc`` (peak bytes Python allocated). Run: ``python bench/manifests_hostile.py``.
"""

from __future__ import annotations

import sys
import time
import tracemalloc
from collections.abc import Callable

from asynckubelet.errors import ManifestError
from asynckubelet.manifests import load_manifests_text

MIB = 1024 * 1024
LIMIT = 3 * MIB
POD = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n"


def laughs(levels: int = 9, fanout: int = 10) -> str:
    """The classic "billion laughs": ``fanout ** levels`` strings from a few lines."""
    text = "a0: &a0 lol\n"
    for level in range(1, levels + 1):
        text += f"a{level}: &a{level} [{', '.join([f'*a{level - 1}'] * fanout)}]\n"
    return text


def env_bomb(width: int = 10_000) -> str:
    """A valid-looking pod of ``width`` aliased containers with ``width`` aliased env vars
    each: 10^8 env vars, from 80 KB, along a path the schema walks."""
    envs = ", ".join(["*e"] * (width - 1))
    containers = ", ".join(["*c"] * (width - 1))
    return (
        POD
        + "  initContainers:\n"
        + "  - &c {name: a, image: b, env: [&e {name: A, value: x}, "
        + envs
        + "]}\n"
        + f"  containers: [{containers}]\n"
    )


def flat_list() -> str:
    head = POD + "  containers: [{name: a, image: b, args: ["
    return head + "1," * ((LIMIT - len(head) - 8) // 2) + "1]}]\n"


def many_containers() -> str:
    item = "{name: A, image: b, ports: [{containerPort: 0}]},"
    head = POD + "  containers: ["
    return head + item * ((LIMIT - len(head) - 8) // len(item)) + "]\n"


def many_quantities() -> str:
    item = "{name: a, image: b, resources: {limits: {cpu: 1e999}}},"
    head = POD + "  containers: ["
    return head + item * ((LIMIT - len(head) - 8) // len(item)) + "]\n"


CASES: dict[str, Callable[[], str]] = {
    "billion laughs (10^9 strings)": laughs,
    "alias bomb (10^8 env vars in a pod)": env_bomb,
    "3 MiB flow list (1.5 million scalars)": flat_list,
    "3 MiB of invalid containers": many_containers,
    "3 MiB of 1e999 quantities": many_quantities,
    "3 MiB + 1 byte": lambda: "#" * (LIMIT + 1),
    "10^100000 integer": lambda: POD + f"  activeDeadlineSeconds: 1{'0' * 100_000}\n",
}


def load(text: str) -> str:
    try:
        manifests = load_manifests_text(text, node_name="bench", pod_security="privileged")
    except ManifestError as e:
        first = e.errors[0] if e.errors else None
        return f"{len(e.errors)} errors, first: {str(first)[:70]}"
    return f"accepted {len(manifests.pods)} pods"


def main() -> None:
    print(f"{'input':40} {'bytes':>9} {'time s':>7} {'peak MiB':>9}  outcome")
    for name, make in CASES.items():
        text = make()
        start = time.perf_counter()
        outcome = load(text)
        seconds = time.perf_counter() - start
        tracemalloc.start()
        load(text)
        peak = tracemalloc.get_traced_memory()[1] / MIB
        tracemalloc.stop()
        print(f"{name:40} {len(text):9d} {seconds:7.2f} {peak:9.1f}  {outcome}")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
