#!/usr/bin/env bash
# Builds the Python module `ioswitch` and runs its pytest suite.
#
# A virtual environment under target/ (reused when present) gets maturin, pytest and mypy (for stubtest) from
# PyPI; the wheel is built with `maturin build` (abi3: one wheel for CPython >= 3.11), in
# cargo's dev profile, which reuses what `cargo test --workspace` built (a release build
# recompiled the library and its dependencies: about half of this stage's 72 s), into
# target/wheels and installed into it. IOSWITCH_PY_RELEASE=1 builds it with --release. Extra arguments go to pytest.
# Exits non-zero when the build or a test fails.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
venv="$root/target/ioswitch-py-venv"
wheels="$root/target/wheels/ioswitch-py"
python="${PYTHON:-python3}"

if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
  echo "run-tests.sh: $("$python" --version 2>&1) is too old: the module needs CPython >= 3.11" >&2
  exit 1
fi
if [ ! -x "$venv/bin/python" ]; then
  echo "==== creating $venv"
  "$python" -m venv "$venv"
fi
if ! "$venv/bin/python" -c 'import pytest, mypy.stubtest' 2>/dev/null || ! [ -x "$venv/bin/maturin" ]; then
  echo "==== installing maturin, pytest and mypy"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check 'maturin>=1.5,<2.0' pytest 'mypy>=1.10,<2'
fi

profile=()
[ "${IOSWITCH_PY_RELEASE:-0}" = 1 ] && profile=(--release)
echo "==== building the wheel (maturin build ${profile[*]:-(dev profile)})"
rm -rf "$wheels"
(cd "$here" && "$venv/bin/maturin" build "${profile[@]}" --quiet --interpreter "$venv/bin/python" --out "$wheels")
wheel=("$wheels"/ioswitch-*.whl)
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --force-reinstall --no-deps "${wheel[0]}"

cd "$here"
# The stubs (python/ioswitch/*.pyi) against the installed module: mypy's stubtest (mypy
# is installed into the venv above); only on a full run (no pytest arguments).
if [ $# -eq 0 ]; then
  echo "==== mypy stubtest ioswitch"
  "$venv/bin/python" -m mypy.stubtest ioswitch
fi

echo "==== pytest"
[ $# -gt 0 ] || set -- tests
exec "$venv/bin/python" -m pytest -q "$@"
