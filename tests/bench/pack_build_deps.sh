#!/usr/bin/env bash
# Copies the headers, libraries and CMake package files that the engine's build
# takes from Debian packages (SQLite, nlohmann/json, GoogleTest, Gloo: the
# library part of packaging/deps-debian.sh) into one prefix folder, for building
# the GPU check on an offline machine that has a compiler, CMake and PyTorch but
# not these development packages:
#
#   tests/bench/pack_build_deps.sh DIR        # here, where the packages are installed
#   CMAKE_PREFIX_PATH=$PWD/DIR tests/bench/gpu_check.sh   # there
#
# The prefix keeps /usr's layout (include/, lib/<multiarch>/, share/cmake/), so
# the packages' own CMake files find their files relative to themselves.
set -euo pipefail
dest=${1:?usage: pack_build_deps.sh DIR}
packages=(libsqlite3-dev libsqlite3-0 nlohmann-json3-dev libgtest-dev libgmock-dev libgloo-dev)
mkdir -p "$dest"
dest=$(cd "$dest" && pwd)
for pkg in "${packages[@]}"; do
  files=$(dpkg -L "$pkg" 2>/dev/null) || { echo "pack_build_deps: package $pkg is not installed" >&2; exit 2; }
  while IFS= read -r f; do
    case "$f" in
      /usr/include/*|/usr/lib/*|/usr/share/cmake/*) ;;
      *) continue ;;
    esac
    [[ -f "$f" || -L "$f" ]] || continue
    rel=${f#/usr/}
    mkdir -p "$dest/$(dirname "$rel")"
    cp -P "$f" "$dest/$rel"
  done <<<"$files"
done
# Development links to runtime libraries not packed here (libgloo.so: the build
# takes only Gloo's headers, its code is LibTorch's) would dangle: drop them.
find "$dest" -xtype l -delete
echo "pack_build_deps: $(find "$dest" -type f | wc -l) files, $(du -sh "$dest" | cut -f1) in $dest"
