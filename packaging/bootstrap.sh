#!/usr/bin/env bash
# One entry point for a fresh Debian 12 machine:
#   packaging/bootstrap.sh run    install, build, and launch LatentLab on its demo workspace
#   packaging/bootstrap.sh test   install, build, and run every test
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
mode="${1:-run}"
build="${LATENTLAB_BUILD_DIR:-$root/build}"
jobs="$(nproc)"

bash packaging/deps-debian.sh
bash packaging/setup-venv.sh

# ccache: hits across clones (paths relative to the project) and with the
# precompiled torch header.
export CCACHE_BASEDIR="$root"
export CCACHE_SLOPPINESS="pch_defines,time_macros,include_file_mtime,include_file_ctime"

cmake_args=(-S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release)
if [ "${CI:-}" = "true" ]; then cmake_args+=(-DLATENTLAB_WERROR=ON); fi
cmake "${cmake_args[@]}" >/dev/null
case "$mode" in
  test)
    cmake --build "$build" -j "$jobs"
    ctest --test-dir "$build" -L 'unit|ui|e2e' --output-on-failure -j "$jobs" --timeout 900
    ;;
  run)
    if [ -n "${DISPLAY:-}${WAYLAND_DISPLAY:-}" ]; then
      cmake --build "$build" -j "$jobs" --target latentlab latentlab-engine
      exec "$build/ui/latentlab"
    fi
    # No display (a server): the same demo workspace, headless.
    echo "bootstrap: no display; running the demo headless (latentlab-engine demo)"
    cmake --build "$build" -j "$jobs" --target latentlab-engine
    exec "$build/app/latentlab-engine" demo --workspace "${LATENTLAB_WORKSPACE:-$HOME/.local/share/latentlab/demo}"
    ;;
  *)
    echo "usage: packaging/bootstrap.sh run|test" >&2
    exit 1
    ;;
esac
