#!/usr/bin/env bash
# The format check: every tracked C++ source and header as clang-format (the
# project's .clang-format, Debian 12's clang-format 14) writes it. Lists the
# files that differ and fails; `tools/check_format.sh --fix` rewrites them.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
format="${CLANG_FORMAT:-clang-format}"
if ! command -v "$format" >/dev/null; then
  echo "check_format: $format not found (Debian: apt-get install clang-format)" >&2
  exit 2
fi
mapfile -t files < <(git ls-files -- '*.cpp' '*.h' | grep -v -E '^core/io/unicode_(nfc_)?(tables|classes|compositions|decompositions)\.cpp$')
if [ "${1:-}" = "--fix" ]; then
  "$format" -i "${files[@]}"
  exit 0
fi
drift=()
for f in "${files[@]}"; do
  if ! "$format" --dry-run --Werror "$f" >/dev/null 2>&1; then drift+=("$f"); fi
done
if [ ${#drift[@]} -gt 0 ]; then
  echo "check_format: ${#drift[@]} of ${#files[@]} files differ from clang-format ($("$format" --version | head -1)):" >&2
  printf '  %s\n' "${drift[@]}" >&2
  echo "check_format: run tools/check_format.sh --fix" >&2
  exit 1
fi
echo "check_format: ${#files[@]} files as clang-format writes them"
