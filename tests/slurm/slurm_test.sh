#!/usr/bin/env bash
# Runs on a real Slurm started here: munged, slurmctld and slurmd (Debian's
# slurm-wlm and munge) in a private folder, one node of 2 CPUs.
# 1. The CLI: a data-parallel run of 2 Gloo ranks submitted with
#    `latentlab-engine submit --cluster`, followed to completion through the
#    store; its losses equal those of the same spec run locally as 2 ranks.
# 2. The workbench (the test_slurm_jobs Qt test, real clicks and keys): the
#    same spec placed on the cluster from the Training tab and followed in the
#    Jobs table to completion; a run cancelled with the Cancel button (scancel)
#    and resubmitted with Retry, resuming from its checkpoint; a run requeued
#    mid-run with scontrol and followed by a reopened workbench. Their losses
#    equal the local 2-rank run's and an uninterrupted run's (1e-6), one per step.
# Prints the timings (submit to first metric, scancel to stopped, requeue to
# resumed). Exit 77 (skipped) only where the Slurm or munge programs are not
# installed.
#   slurm_test.sh ENGINE WORKBENCH_TEST
set -euo pipefail
engine="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
workbench="$(cd "$(dirname "$2")" && pwd)/$(basename "$2")"
for program in munged slurmctld slurmd sbatch squeue scancel scontrol sqlite3; do
  if ! command -v "$program" > /dev/null && [ ! -x "/usr/sbin/$program" ]; then
    echo "SKIP: $program is not installed (Debian packages slurm-wlm, munge and sqlite3; packaging/deps-debian.sh)"
    exit 77
  fi
done
export PATH="$PATH:/usr/sbin"
work="$(mktemp -d "${TMPDIR:-/tmp}/latentlab-slurm-XXXXXX")"
export SLURM_CONF="$work/slurm.conf"
host="$(hostname -s)"
base=$(( 20000 + ($$ % 2000) * 8 ))
cleanup() {
  # Jobs leave the queue first, so that no step daemon outlives its slurmd.
  for _ in $(seq 60); do
    [ -z "$(squeue -h 2> /dev/null)" ] && break
    sleep 0.5
  done
  [ -f "$work/slurmd.pid" ] && kill "$(cat "$work/slurmd.pid")" 2> /dev/null || true
  [ -f "$work/slurmctld.pid" ] && kill "$(cat "$work/slurmctld.pid")" 2> /dev/null || true
  [ -f "$work/munged.pid" ] && kill "$(cat "$work/munged.pid")" 2> /dev/null || true
  sleep 1
  rm -rf "$work"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*"
  for log in "$work"/log/*.log; do echo "--- $log"; tail -20 "$log"; done
  exit 1
}

mkdir -p "$work/state" "$work/spool" "$work/log"
head -c 1024 /dev/urandom > "$work/munge.key"
chmod 400 "$work/munge.key"
munged --force --socket="$work/munge.socket" --key-file="$work/munge.key" --log-file="$work/log/munged.log" \
  --pid-file="$work/munged.pid" --seed-file="$work/munge.seed"
cat > "$SLURM_CONF" << CONF
ClusterName=latentlab-test
SlurmctldHost=$host
SlurmctldPort=$base
SlurmdPort=$(( base + 1 ))
SlurmUser=$(id -un)
SlurmdUser=$(id -un)
AuthType=auth/munge
AuthInfo=socket=$work/munge.socket,cred_expire=10
CredType=cred/munge
StateSaveLocation=$work/state
SlurmdSpoolDir=$work/spool
SlurmctldPidFile=$work/slurmctld.pid
SlurmdPidFile=$work/slurmd.pid
SlurmctldLogFile=$work/log/slurmctld.log
SlurmdLogFile=$work/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
KillWait=60
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
JobAcctGatherType=jobacct_gather/none
NodeName=$host CPUs=2 State=UNKNOWN
PartitionName=test Nodes=$host Default=YES MaxTime=INFINITE State=UP
CONF
slurmctld -f "$SLURM_CONF" || fail "slurmctld did not start"
slurmd -f "$SLURM_CONF" || fail "slurmd did not start"
for _ in $(seq 60); do
  sinfo -h -o %t 2> /dev/null | grep -q idle && break
  sleep 1
done
sinfo -h -o %t | grep -q idle || fail "the node never became idle: $(sinfo 2>&1)"
echo "slurm: $(sinfo -h -o '%P %D node(s) %c CPUs %t')"

ws="$work/ws"
mkdir -p "$ws/clusters" "$work/local" "$work/straight"
cat > "$ws/clusters/local.json" << JSON
{"tasks_per_node": 2, "cpus_per_task": 1, "device": "cpu", "time": "00:20:00", "port": $(( base + 2 ))}
JSON
spec() {  # spec NAME STEPS CHECKPOINT_EVERY
  cat << JSON
{"version": 1, "name": "$1", "kind": "pretrain", "architecture": "demo-gqa",
 "data": {"corpus": "/usr/share/doc/python3.11/html/_sources/tutorial", "tokenizer_vocab": 512, "seq_len": 64,
          "validation_share": 0.05},
 "steps": $2, "micro_batch": 2, "eval_every": 4, "eval_batches": 2, "checkpoint_every": $3, "seed": 3, "device": "cpu"}
JSON
}
spec "two ranks on slurm" 8 4 > "$work/spec.json"
db="$ws/runs.db"
# sqlite3 that waits for the engines' writes instead of failing on a busy database.
sql() { sqlite3 -cmd ".timeout 10000" "$@"; }
status() { sql "$db" "select status from runs where id=$1"; }
metrics() { sql "$db" "select count(*) from metrics where run_id=$1 and name='train/loss'" 2> /dev/null || echo 0; }
now() { date +%s.%N; }
# submit SPEC: submits it with the local profile; sets $run and $job.
submit() {
  local out
  out="$("$engine" submit "$1" --db "$db" --cluster local)" || fail "submit: $out"
  echo "submit: $out"
  run=$(echo "$out" | sed 's/.*"run":\([0-9]*\).*/\1/')
  job=$(echo "$out" | sed 's/.*"slurm_job":\([0-9]*\).*/\1/')
}
# trainsPast RUN N: waits (up to a minute) until the run has stored more than N train losses.
trainsPast() {
  for _ in $(seq 300); do
    [ "$(metrics "$1")" -gt "$2" ] && return 0
    sleep 0.2
  done
  fail "run $1 never trained past step $2: $(tail -5 "$ws/runs/$1"/slurm-*.out 2> /dev/null)"
}

# 1. Submitted, followed to completion, the same losses as a local 2-rank run.
t0=$(now)
submit "$work/spec.json"
grep -q "srun --kill-on-bad-exit=1" "$ws/runs/$run/slurm.sbatch" || fail "the batch script has no srun line"
first=""
for _ in $(seq 600); do
  [ -z "$first" ] && [ "$(metrics "$run")" -gt 0 ] && first=$(now)
  st="$(status "$run")"
  [ "$st" = completed ] || [ "$st" = failed ] && break
  sleep 0.2
done
[ "$(status "$run")" = completed ] || fail "run $run (job $job) ended $(status "$run"): $(tail -5 "$ws/runs/$run/slurm-$job.out")"
[ -n "$first" ] || first=$(now)
echo "submit to first metric: $(awk "BEGIN { printf \"%.1f\", $first - $t0 }") s; submit to completed: $(awk "BEGIN { printf \"%.1f\", $(now) - $t0 }") s"
grep -q "2 ranks over gloo (slurm)" "$ws/runs/$run/slurm-$job.out" || fail "the job did not run 2 ranks: $(head "$ws/runs/$run/slurm-$job.out")"
port=$(( base + 3 ))
for r in 0 1; do
  env -u SLURM_CONF RANK=$r WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
    "$engine" run "$work/spec.json" --db "$work/local/runs.db" --quiet > "$work/local/rank$r.log" 2>&1 &
done
wait || fail "the local 2-rank run failed: $(tail -3 "$work/local/rank0.log")"
sql "$db" "select step, value from metrics where run_id=$run and name in ('train/loss','val/loss') order by name, step" > "$work/slurm.txt"
sql "$work/local/runs.db" "select step, value from metrics where run_id=1 and name in ('train/loss','val/loss') order by name, step" > "$work/local.txt"
[ "$(wc -l < "$work/slurm.txt")" -ge 10 ] || fail "the Slurm run stored $(wc -l < "$work/slurm.txt") loss rows"
paste -d'|' "$work/slurm.txt" "$work/local.txt" | awk -F'|' '
  { if ($1 != $3) { print "step " $1 " against " $3; bad = 1 }
    d = $2 - $4; if (d < 0) d = -d; if (d > 1e-6) { print "step " $1 ": " $2 " against " $4; bad = 1 } }
  END { exit bad }' || fail "the Slurm run's losses differ from the local 2-rank run's"
echo "losses: $(wc -l < "$work/slurm.txt") rows equal to the local 2-rank run's within 1e-6"

# 2. The workbench: the same spec from the Training tab; a run cancelled and
# resubmitted; a run requeued mid-run. Same losses, one per step.
spec "cancelled and resubmitted" 40 0 > "$work/long.json"
spec "requeued on slurm" 40 10 > "$work/requeue.json"
wb="$work/work bench 100%"  # a space and a per cent sign, which sbatch's --output reads as a pattern
mkdir -p "$wb/clusters"
cp "$ws/clusters/local.json" "$wb/clusters/"
t1=$(now)
QT_QPA_PLATFORM=offscreen OMP_NUM_THREADS=1 HOME="$work/home" XDG_RUNTIME_DIR="$work/home" \
  LATENTLAB_ENGINE="$engine" LATENTLAB_SLURM_WORKSPACE="$wb" LATENTLAB_SLURM_NODE="$host" \
  LATENTLAB_SLURM_SPEC="$work/spec.json" LATENTLAB_SLURM_LONG_SPEC="$work/long.json" \
  LATENTLAB_SLURM_REQUEUE_SPEC="$work/requeue.json" \
  "$workbench" > "$work/workbench.log" 2>&1 || { cat "$work/workbench.log"; fail "the workbench test failed"; }
grep -E "^(PASS|QINFO|Totals)" "$work/workbench.log"
echo "workbench part: $(awk "BEGIN { printf \"%.1f\", $(now) - $t1 }") s"
wdb="$wb/runs.db"
sql "$wdb" "select step, value from metrics where run_id=1 and name in ('train/loss','val/loss') order by name, step" > "$work/wb1.txt"
paste -d'|' "$work/wb1.txt" "$work/local.txt" | awk -F'|' '
  { d = $2 - $4; if (d < 0) d = -d; if ($1 != $3 || d > 1e-6) { print "step " $1 ": " $2 " against " $4; bad = 1 } }
  END { exit bad }' || fail "the workbench's Slurm run differs from the local 2-rank run"
[ "$(wc -l < "$work/wb1.txt")" = "$(wc -l < "$work/local.txt")" ] || fail "the workbench's Slurm run stored other rows"
echo "workbench run: $(wc -l < "$work/wb1.txt") rows equal to the local 2-rank run's within 1e-6"
for r in 0 1; do
  env -u SLURM_CONF RANK=$r WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$(( base + 4 )) \
    "$engine" run "$work/requeue.json" --db "$work/straight/runs.db" --quiet > "$work/straight/rank$r.log" 2>&1 &
done
wait || fail "the uninterrupted local run failed: $(tail -3 "$work/straight/rank0.log")"
sql "$work/straight/runs.db" "select step, value from metrics where run_id=1 and name='train/loss' order by step" > "$work/straight.txt"
for run in 2 3; do
  sql "$wdb" "select step, value from metrics where run_id=$run and name='train/loss' order by step" > "$work/wb$run.txt"
  [ "$(wc -l < "$work/wb$run.txt")" = 40 ] || fail "run $run stored $(wc -l < "$work/wb$run.txt") losses, not one per step"
  paste -d'|' "$work/wb$run.txt" "$work/straight.txt" | awk -F'|' '
    { d = $2 - $4; if (d < 0) d = -d; if ($1 != $3 || d > 1e-6) { print "step " $1 ": " $2 " against " $4; bad = 1 } }
    END { exit bad }' || fail "run $run's losses differ from an uninterrupted run's"
  echo "run $run ($(sql "$wdb" "select name from runs where id=$run")): 40 losses equal an uninterrupted run's within 1e-6;" \
    "$(sql "$wdb" "select group_concat(message, '; ') from events where run_id=$run and kind in ('slurm', 'resume')")"
done
echo PASS
