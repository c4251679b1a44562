#!/usr/bin/env bash
# Install the project's Python dependencies (runtime, test and the grpc extra, as tox's
# environments have them) for the DinD image's Python into a host folder with
# `pip --target`, when missing, and print the folder. The folder is mounted into the
# container as its site-packages (its Python version in .python-version), so a dependency
# change means a new folder, never a new image.
#
# Usage: deps.sh IMAGE. Environment: PYTHON (the interpreter whose pip installs; default
# python3), AKL_DIND_CACHE (default ~/.cache/asynckubelet-dind).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
image="$1"
python="${PYTHON:-python3}"
cache="${AKL_DIND_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/asynckubelet-dind}"

inner_version="$(docker run --rm --network none --entrypoint python3 "$image" \
    -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
requirements="$("$python" - "$repo/pyproject.toml" <<'PY'
import sys, tomllib
with open(sys.argv[1], "rb") as f:
    project = tomllib.load(f)["project"]
extras = project["optional-dependencies"]
print("\n".join(project["dependencies"] + extras["test"] + extras["grpc"]))
PY
)"
hash="$(printf '%s\n%s\n' "$inner_version" "$requirements" | sha256sum | cut -c1-16)"
target="$cache/deps-$hash"
if [ -d "$target" ]; then
    echo "$target"
    exit 0
fi

mkdir -p "$cache"
partial="$(mktemp -d "$cache/.partial.XXXXXX")"
trap 'rm -rf "$partial"' EXIT
printf '%s\n' "$requirements" >"$partial.txt"
trap 'rm -rf "$partial" "$partial.txt"' EXIT
echo "deps.sh: installing dependencies for Python $inner_version into $target" >&2
"$python" -m pip install -q --disable-pip-version-check --no-compile --target "$partial" \
    --python-version "$inner_version" --implementation cp --only-binary=:all: \
    -r "$partial.txt" >&2
echo "$inner_version" >"$partial/.python-version"
mv "$partial" "$target"
find "$cache" -mindepth 1 -maxdepth 1 -name 'deps-*' ! -name "deps-$hash" -exec rm -rf {} +
echo "$target"
