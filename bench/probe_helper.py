"""What one HTTP/TCP probe costs through the probe helper, against the alternative.

A node that cannot reach its pods (a remote daemon) runs probes in the pod's network
namespace with the project's probe program. Two ways, side by side on the same engine:

- ``exec``: a helper container started once per sandbox (``probe wait``), each probe one
  Docker exec of ``/probe tcp ...`` in it (what the node does);
- ``one-shot``: a fresh container per probe (``NetworkMode: container:<sandbox>``), created,
  started, waited for, its output read and removed.

Each probe is a TCP connect to a closed loopback port of the pod, so the connection itself
costs nothing and the figures are the Docker round trips. The engine is ``DOCKER_HOST``
(with ``DOCKER_TLS_VERIFY``/``DOCKER_CERT_PATH``) or the default socket; the images are the
project's own (the pause image must be present; the probe image is loaded when missing).
Everything made is labelled and removed.

Run: ``python bench/probe_helper.py [--rounds N]``. Prints medians in milliseconds.
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid

import anyio

from asynckubelet.docker import ContainerConfig, DockerClient
from asynckubelet.images import build as image_build
from asynckubelet.runtime import naming

PAUSE = image_build.DEFAULT_PAUSE_TAG
COMMAND = ["/probe", "tcp", "127.0.0.1", "1", "1000"]


async def _median_ms(fn: object, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        await fn()  # type: ignore[operator]
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


async def main(rounds: int) -> None:
    node = f"akl-bench-{uuid.uuid4().hex[:8]}"
    labels = {naming.LABEL_NODE: node}
    async with DockerClient() as docker:
        engine = docker.url
        probe_image = image_build.default_probe_tag()
        if not await docker.image_exists(probe_image):
            await image_build.build_probe_image(docker, tag=probe_image)
        made: list[str] = []
        try:
            sandbox = await docker.create_container(
                {"Image": PAUSE, "Labels": labels, "HostConfig": {"NetworkMode": "none"}},
                name=f"{node}-sandbox",
            )
            made.append(sandbox)
            await docker.start_container(sandbox)
            joined: ContainerConfig = {
                "Image": probe_image,
                "Labels": labels,
                "HostConfig": {"NetworkMode": f"container:{sandbox}"},
            }
            helper = await docker.create_container(
                {**joined, "Cmd": ["wait"]}, name=f"{node}-helper"
            )
            made.append(helper)
            await docker.start_container(helper)

            async def by_exec() -> None:
                result = await docker.exec_run(helper, COMMAND, timeout=30)
                assert result.stdout.startswith(b"dial "), result.output

            async def one_shot() -> None:
                cid = await docker.create_container(
                    {**joined, "Entrypoint": COMMAND[:1], "Cmd": COMMAND[1:]},
                    name=f"{node}-{uuid.uuid4().hex[:6]}",
                )
                try:
                    await docker.start_container(cid)
                    await docker.wait_container(cid)
                    lines = [line.text async for line in docker.logs(cid)]
                    assert lines, lines
                    assert lines[0].startswith("dial "), lines
                finally:
                    await docker.remove_container(cid, force=True)

            await by_exec()
            await one_shot()
            exec_ms = await _median_ms(by_exec, rounds)
            shot_ms = await _median_ms(one_shot, rounds)
        finally:
            with anyio.CancelScope(shield=True):
                for cid in reversed(made):
                    await docker.remove_container(cid, force=True)
    print(f"engine {engine}, {rounds} rounds, medians")
    print(f"exec in a running helper:       {exec_ms:7.1f} ms per probe")
    print(f"one-shot container per probe:   {shot_ms:7.1f} ms per probe")
    print(f"ratio one-shot / exec:          {shot_ms / exec_ms:7.1f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=30)
    anyio.run(main, parser.parse_args().rounds)
