"""The file-based IPAM: one owner per address, idempotent per sandbox, round-robin."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from asynckubelet import errors
from asynckubelet.network.ipam import FileIPAM

pytestmark = pytest.mark.anyio


def _ipam(tmp_path: Path, subnet: str = "10.9.0.0/24") -> FileIPAM:
    return FileIPAM(directory=tmp_path / "ipam", subnet=subnet)


async def test_the_first_address_after_the_gateway_is_handed_out_first(tmp_path: Path) -> None:
    ipam = _ipam(tmp_path)
    allocation = await ipam.allocate(sandbox_id="a" * 64)
    assert (allocation.address, allocation.gateway, allocation.prefixlen) == (
        "10.9.0.2",
        "10.9.0.1",
        24,
    )


async def test_a_sandbox_asking_again_gets_the_address_it_holds(tmp_path: Path) -> None:
    ipam = _ipam(tmp_path)
    first = await ipam.allocate(sandbox_id="s1")
    await ipam.allocate(sandbox_id="s2")
    assert await ipam.allocate(sandbox_id="s1") == first


async def test_an_allocation_is_a_file_named_by_the_address_holding_the_sandbox_id(
    tmp_path: Path,
) -> None:
    ipam = _ipam(tmp_path)
    await ipam.allocate(sandbox_id="owner")
    assert (tmp_path / "ipam" / "10.9.0.2").read_text() == "owner"


async def test_release_frees_the_address_and_is_idempotent(tmp_path: Path) -> None:
    ipam = _ipam(tmp_path)
    await ipam.allocate(sandbox_id="s1")
    assert await ipam.release(sandbox_id="s1") == ["10.9.0.2"]
    assert await ipam.release(sandbox_id="s1") == []
    assert await ipam.get(sandbox_id="s1") is None
    assert await ipam.allocations() == {}


async def test_a_released_address_is_not_reused_at_once(tmp_path: Path) -> None:
    ipam = _ipam(tmp_path)
    await ipam.allocate(sandbox_id="s1")
    await ipam.release(sandbox_id="s1")
    assert (await ipam.allocate(sandbox_id="s2")).address == "10.9.0.3"


async def test_allocation_wraps_around_to_free_addresses(tmp_path: Path) -> None:
    ipam = _ipam(tmp_path, "10.9.0.0/29")
    for i in range(5):
        await ipam.allocate(sandbox_id=f"s{i}")
    await ipam.release(sandbox_id="s0")
    assert (await ipam.allocate(sandbox_id="late")).address == "10.9.0.2"


async def test_an_exhausted_subnet_is_a_network_error_naming_it(tmp_path: Path) -> None:
    ipam = _ipam(tmp_path, "10.9.0.0/30")
    await ipam.allocate(sandbox_id="only")
    with pytest.raises(errors.NetworkError, match=r"no free address left in 10\.9\.0\.0/30"):
        await ipam.allocate(sandbox_id="more")


@pytest.mark.parametrize("subnet", ["not-a-cidr", "10.9.0.1/24", "10.9.0.0/31"])
def test_a_bad_subnet_is_refused(tmp_path: Path, subnet: str) -> None:
    with pytest.raises(errors.NetworkError, match="pod CIDR"):
        FileIPAM(directory=tmp_path, subnet=subnet)


async def test_concurrent_allocators_on_one_directory_never_share_an_address(
    tmp_path: Path,
) -> None:
    got: dict[str, str] = {}

    async def one(i: int) -> None:
        allocation = await _ipam(tmp_path).allocate(sandbox_id=f"s{i}")
        got[f"s{i}"] = allocation.address

    async with anyio.create_task_group() as tg:
        for i in range(60):
            tg.start_soon(one, i)
    assert len(set(got.values())) == 60
    assert await _ipam(tmp_path).allocations() == {v: k for k, v in got.items()}


async def test_stray_files_in_the_directory_are_ignored(tmp_path: Path) -> None:
    ipam = _ipam(tmp_path)
    (tmp_path / "ipam").mkdir()
    (tmp_path / "ipam" / "README").write_text("not an allocation")
    (tmp_path / "ipam" / ".10.9.0.9.tmp").write_text("half-written")
    assert await ipam.allocations() == {}
