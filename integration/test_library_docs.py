"""The library examples of ``docs/library.md`` and of the README run as written against
the real engine.

The blocks are taken from the pages themselves, so the pages cannot drift from the API.
Only the node name and the two image names are swapped for the test's own (the test
images are the same local builds under the test prefix; nothing is pulled).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from asynckubelet.docker.labels import LABEL_NODE
from integration.harness import BUSYBOX_IMAGE, PAUSE_IMAGE, Engine

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "library.md"
MARKER = "<!-- runnable example: integration/test_library_docs.py -->"
README = ROOT / "README.md"
README_MARKER = "<!-- library example: integration/test_library_docs.py -->"


def example(page: Path = PAGE, marker: str = MARKER) -> str:
    text = page.read_text(encoding="utf-8")
    found = re.search(re.escape(marker) + r"\s*```python\n(.*?)\n```", text, re.DOTALL)
    assert found is not None, f"no python block after {marker} in {page}"
    return found.group(1)


def run_example(code: str, *, cwd: Path, docker_url: str) -> subprocess.CompletedProcess[str]:
    script = cwd / "example.py"
    script.write_text(code, encoding="utf-8")
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    return subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, "PYTHONPATH": path, "DOCKER_HOST": docker_url},
        cwd=cwd,
    )


def test_the_page_names_the_projects_local_images() -> None:
    code = example()
    assert "asynckubelet.local/busybox:1.35" in code
    assert "asynckubelet.local/pause:3.10" in code


def test_the_library_example_runs_as_written(
    docker_engine: Engine, test_images: dict[str, str], node_name: str, tmp_path: Path
) -> None:
    code = (
        example()
        .replace("asynckubelet.local/busybox:1.35", BUSYBOX_IMAGE)
        .replace("asynckubelet.local/pause:3.10", PAUSE_IMAGE)
        .replace('node_name="laptop"', f'node_name="{node_name}"')
    )
    assert node_name in code
    done = run_example(code, cwd=tmp_path, docker_url=docker_engine.url)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[:4] == ["ready: Running", "stdout 1", "stdout 2", "stdout 3"]
    assert "exec: 0 42" in lines
    watched = [line for line in lines if line.startswith("watch:")]
    assert watched[-1] == "watch: DELETED"
    assert set(watched[:-1]) == {"watch: MODIFIED"}
    events = {line.removeprefix("event: ") for line in lines if line.startswith("event:")}
    assert {"Created", "Started", "Killing"} <= events


def test_the_readme_library_example_runs_as_written_and_leaves_nothing(
    docker_engine: Engine, test_images: dict[str, str], node_name: str, tmp_path: Path
) -> None:
    code = example(README, README_MARKER)
    assert "from asynckubelet import" in code
    assert "Node(" in code
    config = 'KubeletConfig(node_name="laptop")'
    assert config in code
    code = code.replace(
        config, f'KubeletConfig(node_name="{node_name}", pause_image="{PAUSE_IMAGE}")'
    )
    (tmp_path / "examples").mkdir()
    hello = (ROOT / "examples" / "hello.yaml").read_text(encoding="utf-8")
    assert "asynckubelet.local/busybox:1.35" in hello
    (tmp_path / "examples" / "hello.yaml").write_text(
        hello.replace("asynckubelet.local/busybox:1.35", BUSYBOX_IMAGE), encoding="utf-8"
    )
    done = run_example(code, cwd=tmp_path, docker_url=docker_engine.url)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "hello: Succeeded",
        "Hello from pod hello in namespace default",
    ]
    left = subprocess.run(
        [
            "docker",
            "-H",
            docker_engine.url,
            "ps",
            "-aq",
            "--filter",
            f"label={LABEL_NODE}={node_name}",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert left.stdout.split() == []
