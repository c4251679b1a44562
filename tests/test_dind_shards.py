"""CI's Docker-in-Docker job runs one shard of the integration modules per commit: every
module must be in exactly one shard, so a new module cannot be left out of DinD."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from integration.dind import shards

ROOT = Path(__file__).resolve().parent.parent


def test_the_shards_cover_every_integration_module_exactly_once() -> None:
    on_disk = sorted(f"integration/{p.name}" for p in (ROOT / "integration").glob("test_*.py"))
    assert on_disk
    placed = Counter(m for shard in shards.split(shards.modules()) for m in shard)
    assert sorted(placed) == on_disk
    assert {m for m, n in placed.items() if n != 1} == set()


@pytest.mark.parametrize("count", [1, 2, 3, 4, 7])
def test_any_number_of_shards_covers_every_module_once(count: int) -> None:
    split = shards.split(shards.modules(), count=count)
    assert len(split) == count
    placed = [m for shard in split for m in shard]
    assert sorted(placed) == shards.modules()


def test_a_new_module_lands_in_a_shard_with_the_unmeasured_weight() -> None:
    names = [*shards.modules(), "integration/test_brand_new.py"]
    assert shards.weight("integration/test_brand_new.py") == shards.UNMEASURED
    placed = [m for shard in shards.split(names) for m in shard]
    assert placed.count("integration/test_brand_new.py") == 1


def test_every_measured_module_exists() -> None:
    names = {Path(m).name for m in shards.modules()}
    assert set(shards.SECONDS) - names == set()


def test_the_shards_differ_by_less_than_their_heaviest_module() -> None:
    split = shards.split(shards.modules())
    totals = [sum(shards.weight(m) for m in shard) for shard in split]
    heaviest = max(shards.weight(m) for m in shards.modules())
    assert max(totals) - min(totals) <= heaviest


def test_the_cli_prints_the_chosen_shards_modules_and_names_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert shards.main(["--count", "3", "--shard", "2"]) == 0
    out, err = capsys.readouterr()
    assert out.split() == shards.split(shards.modules(), count=3)[1]
    assert err.startswith("DinD shard 2 of 3 (--shard): ")


def test_without_a_shard_the_commit_number_picks_it(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(shards, "rotation_number", lambda: 7)
    assert shards.main(["--count", "3"]) == 0
    out, err = capsys.readouterr()
    assert out.split() == shards.split(shards.modules(), count=3)[7 % 3]
    assert "shard 2 of 3 (commit or day number 7)" in err


@pytest.mark.parametrize("args", [["--shard", "0"], ["--shard", "4"], ["--count", "0"]])
def test_a_shard_out_of_range_is_refused_naming_the_option(
    args: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        shards.main(["--count", "3", *args] if args[0] == "--shard" else args)
    assert exited.value.code == 2
    assert args[0] in capsys.readouterr().err


def test_ci_runs_the_smoke_subset_and_the_rotating_shard_inside_dind() -> None:
    script = (ROOT / ".ci" / "run").read_text()
    assert "python3 -m integration.dind.shards" in script
    assert "tox -e dind" in script
    smoke = ["integration/test_run_cli.py", "integration/test_harness.py"]
    assert all(m in script for m in smoke)
    assert all((ROOT / m).is_file() for m in smoke)


def _yaml_blocks(text: str) -> list[Any]:
    blocks = re.findall(r"```yaml\n(.*?)```", text, flags=re.S)
    return [yaml.safe_load(b) for b in blocks]


def _shape_a_commands(text: str) -> list[str]:
    return [
        line.strip()
        for line in text.splitlines()
        if "tox -e dind --" in line and "integration.dind.shards --shard" in line
    ]


@pytest.mark.parametrize("page", ["README.md", "docs/ci.md"])
def test_the_ci_jobs_run_every_shard_inside_dind(page: str) -> None:
    text = (ROOT / page).read_text()
    jobs = [b for b in _yaml_blocks(text) if isinstance(b, dict)]
    matrices = [
        job["strategy"]["matrix"]["shard"]
        for block in jobs
        for job in (block.get("jobs") or {}).values()
        if "strategy" in job
    ]
    parallel = [job["parallel"] for block in jobs for job in block.values()
                if isinstance(job, dict) and "parallel" in job]  # fmt: skip
    assert matrices == [list(range(1, shards.COUNT + 1))]
    assert parallel == [shards.COUNT]
    commands = _shape_a_commands(text)
    assert len(commands) == 2
    assert all('-m "not dind"' in c for c in commands)
