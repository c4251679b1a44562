"""The in-package fake engine answers as Docker does where the project depends on it, counts
calls, and fails or holds calls when a test scripts it to."""

from __future__ import annotations

import anyio
import pytest

from asynckubelet import errors
from asynckubelet.docker import DockerAPI, ExecResult, LogLine, PullProgress
from asynckubelet.images.build import File, ImageConfig, image_archive
from asynckubelet.testing import Call, FakeDocker

pytestmark = pytest.mark.anyio


async def test_a_created_and_started_container_is_listed_running_with_its_labels() -> None:
    docker: DockerAPI = FakeDocker(images=["busybox"])
    cid = await docker.create_container({"Image": "busybox", "Labels": {"owner": "n1"}}, name="web")
    await docker.start_container(cid)
    (row,) = await docker.list_containers(labels={"owner": "n1"})
    assert (row["Id"], row["Names"], row["State"]) == (cid, ["/web"], "running")
    assert (await docker.inspect_container(cid))["State"]["Running"] is True


async def test_the_list_filters_by_label_value_label_presence_and_name() -> None:
    docker = FakeDocker()
    docker.add_container(id="a", name="akl_a", labels={"node": "n1", "x": "1"})
    docker.add_container(id="b", name="akl_b", labels={"node": "n2"})
    assert [r["Id"] for r in await docker.list_containers(labels={"node": "n1"})] == ["a"]
    assert [r["Id"] for r in await docker.list_containers(labels={"x": None})] == ["a"]
    assert [r["Id"] for r in await docker.list_containers(name="^/akl_b$")] == ["b"]


async def test_a_taken_name_is_a_conflict_and_an_absent_image_is_image_not_found() -> None:
    docker = FakeDocker(images=["busybox:1.36"])
    await docker.create_container({"Image": "busybox:1.36"}, name="web")
    with pytest.raises(errors.Conflict):
        await docker.create_container({"Image": "busybox:1.36"}, name="web")
    with pytest.raises(errors.ImageNotFound):
        await docker.create_container({"Image": "nginx"}, name="other")


async def test_an_absent_container_is_not_found_unless_its_removal_allows_it() -> None:
    docker = FakeDocker()
    with pytest.raises(errors.NotFound):
        await docker.inspect_container("nope")
    await docker.remove_container("nope")
    with pytest.raises(errors.NotFound):
        await docker.remove_container("nope", missing_ok=False)


async def test_stop_and_kill_end_the_container_with_the_signals_exit_code() -> None:
    docker = FakeDocker()
    docker.add_container(id="a", state="running")
    docker.add_container(id="b", state="running")
    await docker.stop_container("a", grace_period=2)
    await docker.kill_container("b")
    assert await docker.wait_container("a") == 0
    assert (await docker.inspect_container("b"))["State"]["ExitCode"] == 137


async def test_a_wait_returns_when_the_container_exits() -> None:
    docker = FakeDocker()
    docker.add_container(id="a", state="running")
    codes: list[int] = []
    async with anyio.create_task_group() as tg:

        async def waiter() -> None:
            codes.append(await docker.wait_container("a"))

        tg.start_soon(waiter)
        await anyio.wait_all_tasks_blocked()
        docker.exit("a", exit_code=3)
    assert codes == [3]


async def test_every_call_is_counted_with_what_it_was_about() -> None:
    docker = FakeDocker()
    docker.add_container(id="a", state="running")
    await docker.inspect_container("a")
    await docker.exec_run("a", ["true"])
    await docker.inspect_container("a")
    assert docker.count("inspect_container") == 2
    assert docker.targets("inspect_container") == ["a", "a"]
    assert Call("exec_run", "a", ("true",)) in docker.calls


async def test_a_scripted_failure_fails_the_next_calls_then_stops() -> None:
    docker = FakeDocker()
    docker.fail("list_containers", errors.RuntimeUnavailable("engine gone"), times=2)
    for _ in range(2):
        with pytest.raises(errors.RuntimeUnavailable, match="engine gone"):
            await docker.list_containers()
    assert await docker.list_containers() == []


async def test_a_failure_scripted_for_one_target_leaves_the_others_alone() -> None:
    docker = FakeDocker()
    docker.add_container(id="a")
    docker.add_container(id="b")
    docker.fail("start_container", errors.DockerAPIError("no"), target="a", times=None)
    await docker.start_container("b")
    for _ in range(3):
        with pytest.raises(errors.DockerAPIError):
            await docker.start_container("a")
    docker.recover()
    await docker.start_container("a")


async def test_only_methods_of_the_engine_can_be_scripted() -> None:
    with pytest.raises(AttributeError):
        FakeDocker().fail("start_contianer", errors.DockerAPIError("typo"))


async def test_a_held_call_waits_until_the_test_lets_it_go() -> None:
    docker = FakeDocker()
    docker.add_container(id="a")
    gate = docker.hold("inspect_container", target="a")
    done: list[str] = []
    async with anyio.create_task_group() as tg:

        async def inspect() -> None:
            done.append((await docker.inspect_container("a"))["Id"])

        tg.start_soon(inspect)
        await anyio.wait_all_tasks_blocked()
        assert docker.count("inspect_container") == 1
        assert done == []
        gate.set()
    assert done == ["a"]


async def test_an_unreachable_engine_pings_false() -> None:
    docker = FakeDocker()
    docker.fail("ping", errors.RuntimeUnavailable("down"))
    assert await docker.ping() is False
    assert await docker.ping() is True


async def test_exec_answers_come_from_the_script_and_need_a_running_container() -> None:
    docker = FakeDocker()
    docker.add_container(id="a", state="running")
    docker.add_container(id="b", state="exited")
    docker.exec_results = [ExecResult(1, b"out", b""), TimeoutError()]
    assert (await docker.exec_run("a", ["check"])).exit_code == 1
    with pytest.raises(TimeoutError):
        await docker.exec_run("a", ["check"])
    assert (await docker.exec_run("a", ["check"])).exit_code == 0
    with pytest.raises(errors.Conflict):
        await docker.exec_run("b", ["check"])


async def test_a_pull_reports_its_stream_and_makes_the_image_present() -> None:
    docker = FakeDocker()
    docker.pull_stream = [PullProgress(layer="ab", status="Downloading")]
    seen: list[PullProgress] = []
    assert not await docker.image_exists("busybox")
    await docker.pull_image("busybox", on_progress=seen.append)
    assert seen == docker.pull_stream
    assert await docker.image_exists("busybox:latest")
    assert (await docker.inspect_image("busybox"))["RepoTags"] == ["busybox:latest"]


async def test_a_loaded_archive_makes_its_tags_present() -> None:
    docker = FakeDocker()
    archive = image_archive(
        repo_tag="asynckubelet.local/x:1",
        files=[File(path="/x", data=b"x", mode=0o755)],
        config=ImageConfig(entrypoint=("/x",)),
    )
    await docker.load_image(archive)
    assert await docker.image_exists("asynckubelet.local/x:1")
    with pytest.raises(errors.ImageError):
        await docker.load_image(b"not an archive")


async def test_each_event_stream_ends_as_a_restarting_engine_ends_it() -> None:
    docker = FakeDocker()
    docker.event_streams = [[{"Action": "start"}]]
    seen = []

    async def read() -> None:
        async for event in docker.events():
            seen.append(event["Action"])

    with pytest.raises(errors.RuntimeUnavailable):
        await read()
    assert seen == ["start"]


async def test_logs_give_the_lines_put_there_with_tail() -> None:
    docker = FakeDocker()
    docker.add_container(id="a", state="exited")
    docker.log_lines["a"] = [LogLine("stdout", "1"), LogLine("stderr", "2"), LogLine("stdout", "3")]
    assert [line.text async for line in docker.logs("a", tail=2)] == ["2", "3"]
    assert [line.text async for line in docker.logs("a", stderr=False)] == ["1", "3"]
