"""Pod start-up time: asynckubelet's sync_pod path against the minimal raw Docker sequence.

The pod: a pause sandbox, 1 init container, 3 app containers. Measured from the first call
to the moment all 3 app containers run, side by side in one run (the two paths alternate,
so machine noise hits both alike):

- ``raw``: bare aiodocker calls, the least any runtime must do: create and start the
  pause container; create, start and wait for the init container; create and start the
  3 app containers concurrently.
- ``asynckubelet``: a pod worker as ``asynckubelet run`` has it: get_pod_status, sync_pod
  (sandbox, init), woken by Docker's ``die`` event, get_pod_status, sync_pod (apps).

Run: ``python bench/pod_startup.py [--rounds N] [--pods 20]``. Images are built offline
when missing. Prints medians and the ratio asynckubelet / raw.
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid
from typing import Any

import aiodocker
import anyio
from lightkube.models.core_v1 import Pod

from asynckubelet.docker import DockerClient
from asynckubelet.images import build as image_build
from asynckubelet.manifests import load_manifests_text
from asynckubelet.runtime import naming
from asynckubelet.runtime.backoff import Backoff
from asynckubelet.runtime.manager import RuntimeConfig, RuntimeManager
from asynckubelet.runtime.types import ContainerState

BUSYBOX = image_build.DEFAULT_BUSYBOX_TAG
PAUSE = image_build.DEFAULT_PAUSE_TAG
NODE = "akl-bench"

MANIFEST = f"""
apiVersion: v1
kind: Pod
metadata: {{name: NAME}}
spec:
  initContainers: [{{name: init, image: {BUSYBOX}, command: ["true"]}}]
  containers:
    - {{name: a, image: {BUSYBOX}, command: ["sleep", "600"]}}
    - {{name: b, image: {BUSYBOX}, command: ["sleep", "600"]}}
    - {{name: c, image: {BUSYBOX}, command: ["sleep", "600"]}}
"""


async def raw_pod(docker: aiodocker.Docker, name: str) -> float:
    labels = {naming.LABEL_NODE: NODE, "akl-bench": name}
    started = time.perf_counter()
    pause = await docker.containers.create(
        {
            "Image": PAUSE,
            "Labels": labels,
            "HostConfig": {"NetworkMode": "none", "IpcMode": "shareable"},
        },
        name=f"{name}-pause",
    )
    await pause.start()
    joined = {"NetworkMode": f"container:{pause.id}", "IpcMode": f"container:{pause.id}"}
    init = await docker.containers.create(
        {"Image": BUSYBOX, "Cmd": ["true"], "Labels": labels, "HostConfig": joined},
        name=f"{name}-init",
    )
    await init.start()
    await init.wait()

    async def app(i: int) -> None:
        c = await docker.containers.create(
            {"Image": BUSYBOX, "Cmd": ["sleep", "600"], "Labels": labels, "HostConfig": joined},
            name=f"{name}-app{i}",
        )
        await c.start()

    async with anyio.create_task_group() as tg:
        for i in range(3):
            tg.start_soon(app, i)
    return time.perf_counter() - started


async def akl_pod(rm: RuntimeManager, pod: Pod) -> float:
    """A pod worker loop: relist, sync, sleep until Docker reports a change."""
    assert pod.metadata is not None
    uid = pod.metadata.uid or ""
    backoff, image_backoff = Backoff(), Backoff()
    wake = anyio.Event()
    started = time.perf_counter()
    async with anyio.create_task_group() as tg:

        async def pleg() -> None:
            nonlocal wake
            filters = {"type": ["container"], "label": [f"{naming.LABEL_POD_UID}={uid}"]}
            async for event in rm.docker.events(filters=filters):
                if event.get("Action") in ("die", "start"):
                    wake.set()

        tg.start_soon(pleg)
        while True:
            status = await rm.get_status_of(pod)
            running = [c for c in status.containers if c.state is ContainerState.RUNNING]
            if len(running) == 3:
                break
            wake = anyio.Event()
            await rm.sync_pod(pod, status, backoff=backoff, image_backoff=image_backoff)
            with anyio.move_on_after(1.0):
                await wake.wait()
        elapsed = time.perf_counter() - started
        tg.cancel_scope.cancel()
    return elapsed


async def cleanup(docker: aiodocker.Docker) -> None:
    rows = await docker.containers.list(
        all=True, filters={"label": [f"{naming.LABEL_NODE}={NODE}"]}
    )
    async with anyio.create_task_group() as tg:
        for row in rows:
            tg.start_soon(lambda r=row: r.delete(force=True))


def pods(n: int) -> list[Pod]:
    found = []
    for _ in range(n):
        name = f"bench-{uuid.uuid4().hex[:8]}"
        found.extend(load_manifests_text(MANIFEST.replace("NAME", name), node_name=NODE).pods)
    return found


async def main(rounds: int, many: int) -> None:
    async with DockerClient() as client:
        for ref, builder in (
            (BUSYBOX, image_build.build_busybox_image),
            (PAUSE, image_build.build_pause_image),
        ):
            if not await client.image_exists(ref):
                await builder(client, tag=ref)
    docker = aiodocker.Docker()
    results: dict[str, list[float]] = {
        "raw 1": [],
        "akl 1": [],
        f"raw {many}": [],
        f"akl {many}": [],
    }
    try:
        async with RuntimeManager(RuntimeConfig(node_name=NODE, pause_image=PAUSE)) as rm:
            for _ in range(rounds):
                await cleanup(docker)
                results["raw 1"].append(await raw_pod(docker, f"bench-{uuid.uuid4().hex[:8]}"))
                await cleanup(docker)
                results["akl 1"].append(await akl_pod(rm, pods(1)[0]))
                await cleanup(docker)
                results[f"raw {many}"].append(await _many(lambda n: raw_pod(docker, n), many))
                await cleanup(docker)
                batch = pods(many)
                results[f"akl {many}"].append(await _many_pods(rm, batch))
                await cleanup(docker)
    finally:
        await cleanup(docker)
        await docker.close()
    med = {k: statistics.median(v) for k, v in results.items()}
    for key, values in results.items():
        spread = f"n={len(values)}, min {min(values):.3f}s, max {max(values):.3f}s"
        print(f"{key:>8}: median {med[key]:.3f}s  ({spread})")
    print(f"ratio 1 pod: {med['akl 1'] / med['raw 1']:.3f}")
    print(f"ratio {many} pods: {med[f'akl {many}'] / med[f'raw {many}']:.3f}")


async def _many(start: Any, n: int) -> float:
    began = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for _ in range(n):
            tg.start_soon(start, f"bench-{uuid.uuid4().hex[:8]}")
    return time.perf_counter() - began


async def _many_pods(rm: RuntimeManager, batch: list[Pod]) -> float:
    began = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for pod in batch:
            tg.start_soon(akl_pod, rm, pod)
    return time.perf_counter() - began


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--pods", type=int, default=20)
    args = parser.parse_args()
    anyio.run(main, args.rounds, args.pods)
