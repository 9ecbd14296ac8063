#!/usr/bin/env bash
# GPU check: builds LatentLab against the PyTorch installed on this machine
# (the LibTorch bundled in its wheel; nothing is downloaded), runs the CUDA
# tests (label gpu), a short real `latentlab-engine run` in bf16 (its
# tokens/s and its measured peak memory against the memory planner's
# prediction), and the training and decode benchmarks in bf16 on the GPU,
# printing as it goes so that a run cut short still shows what it measured.
# Budget: 10 minutes on a fresh machine (build ~3-4 min with 16 cores).
#
#   tests/bench/gpu_check.sh              # needs a CUDA device; says so and stops without one
#   tests/bench/gpu_check.sh --cpu-smoke  # no GPU: build and run the same steps on the CPU, quick
#
# Environment: PYTHON (interpreter with torch), LATENTLAB_GPU_BUILD (build
# folder, default build-gpu), LATENTLAB_GPU_JOBS (parallel compile jobs).
# On a machine without the SQLite, nlohmann/json, GoogleTest and Gloo
# development packages, bring them as a prefix made by
# tests/bench/pack_build_deps.sh and point CMAKE_PREFIX_PATH at it.
set -uo pipefail
start=$(date +%s)
say() { printf '[gpu-check %4ds] %s\n' "$(( $(date +%s) - start ))" "$*"; }

cpu_smoke=0
[[ "${1:-}" == "--cpu-smoke" ]] && cpu_smoke=1
src=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${LATENTLAB_GPU_BUILD:-$src/build-gpu}
jobs=${LATENTLAB_GPU_JOBS:-$(nproc)}

# 1. A Python with torch: $PYTHON, the project venv, then the PATH's.
py=""
for cand in "${PYTHON:-}" "$src/.venv/bin/python3" python3 python /usr/bin/python3; do
  [[ -z "$cand" ]] && continue
  if command -v "$cand" >/dev/null 2>&1 && "$cand" -c 'import torch' >/dev/null 2>&1; then
    py=$(command -v "$cand"); break
  fi
done
if [[ -z "$py" ]]; then
  say "no Python with torch found (tried \$PYTHON, .venv, python3, python); install the torch wheel or set PYTHON"
  exit 2
fi
say "python: $py"
"$py" - <<'PY'
import torch, torch.utils
print(f"  torch {torch.__version__}, CUDA build {torch.version.cuda}, cmake prefix {torch.utils.cmake_prefix_path}")
if torch.cuda.is_available():
    for i in range(torch.cuda.device_count()):
        p = torch.cuda.get_device_properties(i)
        print(f"  cuda:{i} {p.name}, {p.total_memory / 2**30:.0f} GiB, sm_{p.major}{p.minor}")
PY
has_cuda=$("$py" -c 'import torch; print(int(torch.cuda.is_available()))' 2>/dev/null || echo 0)
if [[ "$has_cuda" != 1 ]]; then
  if (( ! cpu_smoke )); then
    say "no CUDA device visible to torch: nothing to check on a GPU (run with --cpu-smoke to exercise the script on the CPU)"
    exit 3
  fi
  say "no CUDA device: --cpu-smoke runs the same steps on the CPU"
  device=cpu; dtype=f32
else
  device=cuda; dtype=bf16
fi

# 2. Configure and build only what the check runs (no GUI, no Python test peers needed).
for tool in c++ cmake; do
  command -v "$tool" >/dev/null 2>&1 || { say "no $tool on the PATH: a C++20 compiler and CMake are needed"; exit 4; }
done
say "$(c++ --version | head -1); $(cmake --version | head -1)"
generator=()
command -v ninja >/dev/null 2>&1 && generator=(-G Ninja)
say "configure $build"
mkdir -p "$build"
log="$build/gpu-check-configure.log"
cmake -S "$src" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DLATENTLAB_BUILD_GUI=OFF \
  -DLATENTLAB_TORCH_PYTHON="$py" -DLATENTLAB_PYTHON="$py" >"$log" 2>&1 \
  || { tail -30 "$log"; say "configure failed (log: $log)"; exit 4; }
grep -E 'LibTorch' "$log" | sed 's/^/  /'
say "build latentlab-bench latentlab-engine test_gpu with $jobs jobs"
blog="$build/gpu-check-build.log"
cmake --build "$build" -j "$jobs" --target latentlab-bench latentlab-engine test_gpu 2>&1 | tee "$blog" \
  | awk '/^\[[0-9]+\/[0-9]+\]/ { if (++n % 10 == 0) print; next } /error:|FAILED/' ; build_rc=${PIPESTATUS[0]}
(( build_rc == 0 )) || { say "build failed (log: $blog)"; exit 5; }
say "built"

# 3. CUDA tests.
say "ctest -L gpu"
ctest --test-dir "$build" -L gpu --output-on-failure --timeout 180 2>&1 | tail -15
tests_rc=${PIPESTATUS[0]}

# 4. A real training run through the engine (the trainer's own code path):
#    SmolLM-135M shape, bf16 weights with fp32 masters, 1024-token sequences.
engine="$build/app/latentlab-engine"
work="$build/gpu-check-run"
rm -rf "$work"; mkdir -p "$work"
if (( cpu_smoke )); then
  printf '{"kind":"pretrain","architecture":"demo-gqa","steps":5,"micro_batch":4,"precision":"fp32","device":"cpu",'\
'"eval_every":0,"checkpoint_every":0,"data":{"seq_len":128,"tokenizer_vocab":2048}}\n' >"$work/spec.json"
else
  printf '{"kind":"pretrain","architecture":"smollm-135m","steps":40,"micro_batch":8,"precision":"bf16","device":"cuda:0",'\
'"eval_every":0,"checkpoint_every":0,"data":{"seq_len":1024,"tokenizer_vocab":8192}}\n' >"$work/spec.json"
fi
say "memory plan: $engine run spec.json --check"
"$engine" run "$work/spec.json" --check 2>&1 | sed 's/^/  /'
say "engine run ($(cat "$work/spec.json" | tr -d '\n'))"
run_rc=0
timeout 240 "$engine" run "$work/spec.json" --db "$work/runs.db" --quiet >"$work/run.log" 2>&1 || run_rc=$?
tail -3 "$work/run.log" | sed 's/^/  /'
if (( run_rc == 0 )); then
  "$engine" runs show 1 --db "$work/runs.db" --json >"$work/run.json"
  "$py" - "$work/run.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))["summary"]
m = s.get("memory", {})
peak, plan = m.get("peak_bytes"), m.get("planned_peak_bytes")
print(f"  trainer: {s['tokens_per_s']:.0f} tokens/s over {s['steps']} steps ({m.get('precision')}), "
      f"final loss {s['final_train_loss']:.3f}")
if peak:
    print(f"  peak memory {peak / 2**20:.0f} MiB measured, {plan / 2**20:.0f} MiB planned ({100 * (plan - peak) / peak:+.1f}%)")
else:
    print(f"  peak memory not measured; {plan / 2**20:.0f} MiB planned")
PY
else
  say "engine run failed (rc=$run_rc, log: $work/run.log)"
fi

# 5. Benchmarks; rows stream to stderr as measured, the table follows each section.
bench=("$build/tests/bench/latentlab-bench" --device "$device" --dtype "$dtype")
(( cpu_smoke )) && bench+=(--quick)
bench_rc=0
for section in train decode; do
  left=$(( 590 - ($(date +%s) - start) ))
  if (( left < 30 )); then say "skipping bench $section: out of time"; bench_rc=1; continue; fi
  say "bench $section ($device $dtype, at most ${left}s)"
  timeout "$left" "${bench[@]}" "$section" 2>&1 || { bench_rc=1; say "bench $section did not finish"; }
done
say "done: tests rc=$tests_rc, engine run rc=$run_rc, bench rc=$bench_rc"
(( tests_rc == 0 && run_rc == 0 && bench_rc == 0 ))
