#!/usr/bin/env bash
# The engine installed by `cmake --install` runs from its prefix alone: its
# RUNPATH names no build or venv folder, and it runs (version, devices, init,
# inspect, eval over random token ids) with the venv and the build folder
# hidden behind empty folders in a private mount namespace, so nothing can
# be loaded from either. Prints the prefix's size and what it holds.
#   install_test.sh BUILD_DIR VENV_DIR
set -euo pipefail
build="$(cd "$1" && pwd)"
venv="$(cd "$2" && pwd)"
work="$(mktemp -d "${TMPDIR:-/tmp}/latentlab-install-XXXXXX")"
trap 'rm -rf "$work"' EXIT
prefix="$work/prefix"

start=$(date +%s)
cmake --install "$build" --prefix "$prefix" > "$work/install.log"
grep "LibTorch and CUDA libraries" "$work/install.log"
echo "install: $(( $(date +%s) - start )) s"

engine="$prefix/bin/latentlab-engine"
test -x "$engine" || { echo "FAIL: $engine was not installed"; exit 1; }
for program in "$engine" "$prefix/bin/latentlab"; do
  [ -e "$program" ] || continue
  runpath="$(readelf -d "$program" | sed -n 's/.*(RUNPATH).*\[\(.*\)\]/\1/p;s/.*(RPATH).*\[\(.*\)\]/\1/p')"
  echo "$(basename "$program") RUNPATH: $runpath"
  if [ "$runpath" != '$ORIGIN/../lib/latentlab/torch/lib' ]; then
    echo "FAIL: $(basename "$program") keeps a RUNPATH other than its prefix's"
    exit 1
  fi
done

# What the prefix holds.
echo "prefix: $(du -sh --apparent-size "$prefix" | cut -f1) in all"
for d in bin lib/latentlab/torch/lib lib/latentlab/nvidia share; do
  [ -e "$prefix/$d" ] && echo "  $d: $(du -sh --apparent-size "$prefix/$d" | cut -f1), $(find "$prefix/$d" -type f | wc -l) files"
done
ls "$prefix/lib/latentlab/nvidia" 2>/dev/null | tr '\n' ' ' && echo

# The checks, run from the prefix with nothing else on the library path.
cat > "$work/run.sh" <<RUN
set -euo pipefail
unset LD_LIBRARY_PATH
cd "$work"
"$engine" version
"$engine" devices --json
"$engine" init --arch demo-gqa --vocab 65536 --out "$work/model" > /dev/null
"$engine" inspect "$work/model" | head -3
head -c 8194 /dev/urandom > "$work/ids.u16"
"$engine" eval "$work/model" --tokens "$work/ids.u16" --token-format u16 --seq-len 64 --json
RUN

mkdir -p "$work/empty"
if unshare --mount --propagation private true 2> /dev/null; then
  echo "running with $venv and $build hidden (a private mount namespace)"
  unshare --mount --propagation private bash -c "
    mount --bind '$work/empty' '$venv' && mount --bind '$work/empty' '$build' &&
    test ! -e '$venv/bin' && bash '$work/run.sh'"
else
  # No mount namespace here: the loader must still resolve nothing outside the prefix.
  echo "unshare --mount is not permitted here: checking the loader's choices instead"
  if ldd "$engine" | grep -E "$venv|$build"; then
    echo "FAIL: the installed engine resolves libraries from the venv or the build folder"
    exit 1
  fi
  bash "$work/run.sh"
fi
echo "PASS"
