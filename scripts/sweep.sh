#!/usr/bin/env bash
# Many small runs at once: every (configuration, seed) of a corpus without a final.json yet,
# JOBS training processes at a time. The paper's regime is dozens of 4.7M-parameter runs, which
# leave a large GPU mostly idle, so several processes share it (scripts/reproduce_gpu.sh measures how
# many pay). Stop it at any point: a rerun skips finished runs (study.py's rule: only those trained
# as asked now; any other is refused) and resumes the others from their last checkpoint.
#   bash scripts/sweep.sh CORPUS "CONFIGS" "SEEDS" [JOBS] [train.py options...]
#   bash scripts/sweep.sh programs "seq_only seq_depth tree_only" "$(seq 0 9)" 8 --setting python   # one GPU
#   OMP_NUM_THREADS=1 bash scripts/sweep.sh json "seq_only seq_depth" "$(seq 0 9)" 2 --steps 200   # 2 CPU cores:
#     two 1-thread runs at once train 1.28x the tokens/s of one 2-thread run (small models)
# Runs go under $OUT (default out); each run's output is in its folder as train.log. The sweep
# exits non-zero if any run failed, after the others have finished.
set -euo pipefail
# OUT and --data resolve from the folder it is run in, as train.py's own do: no cd into the repository
ROOT=$(cd "$(dirname "$0")/.." && pwd)   # the repository
export ROOT
if [ $# -lt 3 ]; then
  echo 'usage: bash scripts/sweep.sh CORPUS "CONFIGS" "SEEDS" [JOBS] [train.py options...]' >&2
  exit 2
fi
# the options, each quoted as given (a --data path with spaces stays one argument): `one` reads them back
export CORPUS=$1 OUT=${OUT:-out} TRAIN_ARGS=""
[ $# -le 4 ] || TRAIN_ARGS=$(printf '%q ' "${@:5}")
configs=$2 seeds=$3 jobs=${4:-1}

# a run named with --name NAME lives in $OUT/$CORPUS/NAME (one configuration per sweep then); the runs'
# folder is OUT's alone: --out (or its abbreviation) would put them where the sweep never looks
NAME= next=
for o in "${@:5}"; do
  [ "$next" = name ] && NAME=$o
  next=
  case $o in
    --name=*) NAME=${o#--name=} ;;
    --name) next=name ;;
    --o|--ou|--out|--o=*|--ou=*|--out=*)
      echo "error: sweep.sh writes its runs under OUT (OUT=DIR bash scripts/sweep.sh ...); drop $o" >&2
      exit 2 ;;
  esac
done
export NAME

one() {  # config seed: one run, its output in its own folder; a failure is named, the others go on
  local dir="$OUT/$CORPUS/${NAME:-$1}/seed$2" pid
  # a run another sweep is training keeps its train.log (train.py would refuse it, after the truncation)
  pid=$(cat "$dir.lock" 2>/dev/null) && kill -0 "$pid" 2>/dev/null \
    && { echo "skipped: $dir (being trained by process $pid)"; return 0; }
  mkdir -p "$dir"
  # two sweeps at once: the first to hold this run's flock trains it (train.py's own lock comes only
  # after its imports); the kernel drops the flock when this process ends, however it ends
  exec 9>"$dir/.sweep.lock"
  flock -n 9 || { echo "skipped: $dir (another sweep is training it)"; return 0; }
  [ -f "$dir/final.json" ] && { echo "skipped: $dir (finished by another sweep)"; return 0; }
  eval "local -a options=($TRAIN_ARGS)"   # as printf %q quoted them
  python "$ROOT/train.py" --corpus "$CORPUS" --config "$1" --seed "$2" --out "$OUT" "${options[@]}" > "$dir/train.log" 2>&1 \
    || { echo "failed: $dir ($(tail -n 1 "$dir/train.log"))"; return 1; }
}
export -f one

# a finished run is kept only under study.py's rule (trained as asked now, and of the precision analyze.py
# pairs); any other is refused in one line before anything trains (study.py --check trains nothing)
finished=0
for s in $seeds; do
  for k in $configs; do
    if [ -f "$OUT/$CORPUS/${NAME:-$k}/seed$s/final.json" ]; then finished=1; fi
  done
done
if [ $finished = 1 ]; then
  python "$ROOT/study.py" "$CORPUS" "$configs" "$seeds" --check --out "$OUT" "${@:5}" | { grep '^done:' || true; }
fi

for s in $seeds; do   # seeds outer: a sweep stopped early still pairs every configuration at the seeds it reached
  for k in $configs; do
    [ -f "$OUT/$CORPUS/${NAME:-$k}/seed$s/final.json" ] || echo "$k $s"
  done
done | xargs -r -P "$jobs" -n 2 bash -c 'one "$@"' _
