#!/usr/bin/env bash
# The key-design runs of bench/README.md ("Key-design workloads"): each workload
# without and with even distribution (64 buckets), and the hot key again with a
# per-slice capacity of 1000 writes/s, ROUNDS times, the two of a pair back to
# back and in alternating order. Each run starts its own local cluster, runs one
# workload for 10 s (default concurrency), writes its --json to OUT, and stops
# the cluster. Then it prints the medians (bench/key-design-summary.ts).
#
#   npx tsc -p . && bench/key-design.sh [OUT_DIR] [ROUNDS]
#   node dist/bench/key-design-summary.js OUT_DIR [MORE_DIRS...]   # medians over several sittings' folders
#
# LOAD (default dist/bench/load.js) is the compiled load generator to run.
set -u
OUT=${1:-bench-key-design-$(date -u +%Y%m%dT%H%M%SZ)}
ROUNDS=${2:-3}
LOAD=${LOAD:-dist/bench/load.js}
SUMMARY=${SUMMARY:-$(dirname "$LOAD")/key-design-summary.js}
COMMON="--duration 10 --ops 1000000 --json"
mkdir -p "$OUT"

# Each line: a name, then the flags of the run. Pairs are "without;with".
PAIRS=(
  "hotkey:--workload hotkey;hotkey-even:--workload hotkey --even 64"
  "lowcard:--workload lowcard;lowcard-even:--workload lowcard --even 64"
  "monotonic:--workload monotonic"
  "usertime:--workload usertime;usertime-even:--workload usertime --even 64"
  "hotkey-cap:--workload hotkey --capacity 1000;hotkey-cap-even:--workload hotkey --capacity 1000 --even 64"
)

run() { # name flags...
  local name=$1 round=$2
  shift 2
  local file="$OUT/r$round-$name.json"
  # The load average before each run: the machine may be shared.
  echo "$(date -u +%H:%M:%S) round $round: node $LOAD $* $COMMON  (loadavg $(cut -d' ' -f1-3 /proc/loadavg))" | tee -a "$OUT/runs.log" >&2
  # shellcheck disable=SC2086
  node "$LOAD" "$@" $COMMON >"$file" 2>"$OUT/r$round-$name.err"
  local rc=$?
  if ((rc != 0)); then echo "  FAILED (exit $rc); see $OUT/r$round-$name.err" | tee -a "$OUT/runs.log" >&2; fi
}

for round in $(seq 1 "$ROUNDS"); do
  for pair in "${PAIRS[@]}"; do
    IFS=';' read -r -a members <<<"$pair"
    # Odd rounds: without, then with; even rounds: with, then without.
    if ((round % 2 == 0)) && ((${#members[@]} == 2)); then members=("${members[1]}" "${members[0]}"); fi
    for m in "${members[@]}"; do
      name=${m%%:*}
      # shellcheck disable=SC2086
      run "$name" "$round" ${m#*:}
    done
  done
done
node "$SUMMARY" "$OUT"
