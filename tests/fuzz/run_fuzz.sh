#!/usr/bin/env bash
# Builds the parser fuzz targets with clang, libFuzzer, AddressSanitizer and
# UBSan in build-fuzz/ and runs each for a bounded number of inputs (default
# 20000; the first argument sets it), starting from tests/fuzz/corpus.
# Not part of the test command:  bash tests/fuzz/run_fuzz.sh [RUNS]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
runs="${1:-20000}"
build="${LATENTLAB_FUZZ_BUILD_DIR:-$root/build-fuzz}"
command -v clang++ >/dev/null || { echo "run_fuzz: clang++ is needed (apt-get install clang)" >&2; exit 1; }
cmake -S "$root/tests/fuzz" -B "$build" -G Ninja -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLATENTLAB_FUZZ_RUNS="$runs" >/dev/null
cmake --build "$build" -j "$(nproc)"
status=0
ctest --test-dir "$build" -L fuzz --output-on-failure -V >"$build/fuzz.log" 2>&1 || status=$?
grep -E "^[0-9]+: (Done|stat::number_of_executed_units|stat::new_units_added|INFO: seed corpus)|SUMMARY|ERROR|Test +#|tests passed|Passed|Failed" \
  "$build/fuzz.log" || true
exit "$status"
