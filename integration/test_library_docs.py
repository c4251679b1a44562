"""The runnable example of ``docs/library.md`` runs as written against the real engine.

The block is taken from the page itself, so the page cannot drift from the API. Only the
node name and the two image names are swapped for the test's own (the test images are
the same local builds under the test prefix; nothing is pulled).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from integration.harness import BUSYBOX_IMAGE, PAUSE_IMAGE, Engine

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "library.md"
MARKER = "<!-- runnable example: integration/test_library_docs.py -->"


def example() -> str:
    text = PAGE.read_text(encoding="utf-8")
    found = re.search(re.escape(MARKER) + r"\s*```python\n(.*?)\n```", text, re.DOTALL)
    assert found is not None, f"no python block after {MARKER} in {PAGE}"
    return found.group(1)


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
    script = tmp_path / "example.py"
    script.write_text(code, encoding="utf-8")
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    done = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, "PYTHONPATH": path, "DOCKER_HOST": docker_engine.url},
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[:4] == ["ready: Running", "stdout 1", "stdout 2", "stdout 3"]
    assert "exec: 0 42" in lines
    watched = [line for line in lines if line.startswith("watch:")]
    assert watched[-1] == "watch: DELETED"
    assert set(watched[:-1]) == {"watch: MODIFIED"}
    events = {line.removeprefix("event: ") for line in lines if line.startswith("event:")}
    assert {"Created", "Started", "Killing"} <= events
