#!/usr/bin/env bash
# Creates the project-local virtual environment .venv with the pinned torch
# wheel (LibTorch for the C++ build) and the test peers. Reuses pip's cache.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${LATENTLAB_VENV:-$root/.venv}"
req="$root/packaging/requirements.txt"
stamp="$venv/.latentlab-requirements"

if [ -x "$venv/bin/python" ] && [ -f "$stamp" ] && cmp -s "$req" "$stamp"; then
  echo "setup-venv: $venv is up to date"
  exit 0
fi
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
"$venv/bin/python" -m pip install --disable-pip-version-check -q -r "$req"
"$venv/bin/python" - <<'PY'
import torch
assert torch.compiled_with_cxx11_abi(), "LibTorch must use the C++11 ABI (like Debian's Qt)"
print("setup-venv: torch", torch.__version__, "BLAS:", "mkl" if torch.backends.mkl.is_available() else "other")
PY
cp "$req" "$stamp"
