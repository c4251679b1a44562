"""Whether an image is on the engine: those asking about one image while the engine is
being asked share its answer, so a burst of pods of one image asks once, not once a pod."""

from __future__ import annotations

import anyio
import pytest
from daemon_helpers import IMAGES

from asynckubelet import errors
from asynckubelet.manifests import load_manifests_text
from asynckubelet.runtime.images import ImageManager
from asynckubelet.runtime.manager import RuntimeConfig, RuntimeManager
from asynckubelet.testing import FakeDocker

pytestmark = pytest.mark.anyio

IMAGE = "busybox:1.35"


async def ask_at_once(images: ImageManager, refs: list[str]) -> list[bool | BaseException]:
    answers: list[bool | BaseException] = [False] * len(refs)

    async def ask(i: int, ref: str) -> None:
        try:
            answers[i] = await images.is_present(ref)
        except errors.DockerError as e:
            answers[i] = e

    async with anyio.create_task_group() as tg:
        for i, ref in enumerate(refs):
            tg.start_soon(ask, i, ref)
    return answers


async def test_those_asking_about_one_image_at_once_share_one_question() -> None:
    docker = FakeDocker(images=IMAGES)
    answer = docker.hold("image_exists")
    images = ImageManager(docker)
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(ask_at_once, images, [IMAGE] * 5)
            await anyio.wait_all_tasks_blocked()
            assert docker.count("image_exists") == 1
            answer.set()
    assert docker.count("image_exists") == 1


async def test_each_image_is_asked_about_and_every_asker_gets_its_own_answer() -> None:
    docker = FakeDocker(images=IMAGES)
    answers_of = [docker.hold("image_exists", target=ref) for ref in (IMAGE, "nginx:1")]
    images = ImageManager(docker)
    with anyio.fail_after(5):
        answers = await _released(answers_of, images, [IMAGE, "nginx:1", IMAGE, "nginx:1"])
    assert answers == [True, False, True, False]
    assert sorted(docker.targets("image_exists")) == [IMAGE, "nginx:1"]


async def _released(
    answers: list[anyio.Event], images: ImageManager, refs: list[str]
) -> list[bool | BaseException]:
    """The answers to ``refs`` asked at once, the engine answering once all have asked."""
    result: list[bool | BaseException] = []

    async def run() -> None:
        result.extend(await ask_at_once(images, refs))

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        await anyio.wait_all_tasks_blocked()
        for answer in answers:
            answer.set()
    return result


async def test_a_question_after_the_answer_asks_the_engine_again() -> None:
    docker = FakeDocker(images=IMAGES)
    images = ImageManager(docker)
    assert await images.is_present(IMAGE)
    docker.images.clear()
    assert not await images.is_present(IMAGE)
    assert docker.count("image_exists") == 2


async def test_the_engines_error_reaches_everyone_who_asked() -> None:
    docker = FakeDocker(images=IMAGES)
    answer = docker.hold("image_exists")
    docker.fail("image_exists", errors.RuntimeUnavailable("engine gone"), times=1)
    images = ImageManager(docker)
    with anyio.fail_after(5):
        answers = await _released([answer], images, [IMAGE] * 3)
    assert all(isinstance(a, errors.RuntimeUnavailable) for a in answers)
    assert docker.count("image_exists") == 1
    assert await images.is_present(IMAGE)


async def test_when_the_one_asking_is_cancelled_the_others_ask_again() -> None:
    docker = FakeDocker(images=IMAGES)
    answer = docker.hold("image_exists")
    images = ImageManager(docker)
    first = anyio.CancelScope()
    others: list[bool | BaseException] = []

    async def ask_first() -> None:
        with first:
            await images.is_present(IMAGE)

    async def ask_others() -> None:
        others.extend(await ask_at_once(images, [IMAGE] * 2))

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(ask_first)
            await anyio.wait_all_tasks_blocked()
            tg.start_soon(ask_others)
            await anyio.wait_all_tasks_blocked()
            first.cancel()
    assert others == [True, True]
    # The held question, then at least one more.
    assert docker.count("image_exists") > 1
    answer.set()


POD = """\
apiVersion: v1
kind: Pod
metadata: {name: NAME}
spec:
  containers:
  - {name: a, image: busybox:1.35}
  - {name: b, image: busybox:1.35}
"""


async def test_a_burst_of_pods_of_one_image_asks_the_engine_about_it_once() -> None:
    docker = FakeDocker(images=IMAGES)
    answer = docker.hold("image_exists", target=IMAGE)
    pods = [
        load_manifests_text(POD.replace("NAME", f"p{i}"), node_name="n1").pods[0] for i in range(5)
    ]
    async with RuntimeManager(RuntimeConfig(node_name="n1"), docker=docker) as rm:
        with anyio.fail_after(5):
            async with anyio.create_task_group() as tg:
                for pod in pods:
                    tg.start_soon(rm.sync_pod, pod)
                try:
                    # Each pod asks about its image before it makes its sandbox; making
                    # one reads files in worker threads, which no task waits for.
                    while docker.count("create_container") < len(pods):
                        await anyio.wait_all_tasks_blocked()
                        await anyio.sleep(0.005)
                finally:
                    answer.set()
    assert docker.targets("image_exists").count(IMAGE) == 1
    assert len(docker.containers) == 15
