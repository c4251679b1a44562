"""A process that restarts one pod over and over, to be killed at a random instant.

Used by the crash-safety trials: ``python -m integration.crash_worker NODE MANIFEST``
prints ``ready`` once its imports are done, then alternates ``kill_pod`` and ``sync_pod``
until it is killed.
"""

from __future__ import annotations

import sys

import anyio

from asynckubelet.manifests import load_manifests
from asynckubelet.runtime.backoff import Backoff
from asynckubelet.runtime.manager import RuntimeConfig, RuntimeManager
from integration.harness import PAUSE_IMAGE


async def main(node: str, manifest: str) -> None:
    pod = load_manifests(manifest, node_name=node).pods[0]
    async with RuntimeManager(RuntimeConfig(node_name=node, pause_image=PAUSE_IMAGE)) as rm:
        print("ready", flush=True)
        backoff = Backoff(initial=0.05, cap=0.1)
        while True:
            await rm.kill_pod(pod, grace_period=0)
            for _ in range(50):
                await rm.sync_pod(pod, backoff=backoff)
                await anyio.sleep(0.02)


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2])
