#!/usr/bin/env bash
# The prepared GPU check (about 6 minutes on one H200; written to fit 8):
#   1. the Triton kernel against the PyTorch reference with the interpreter off: every
#      configuration family, outputs and the q, k, rate, offset and overlay gradients;
#   2. `bench.py rotation` at study sizes (8 runs, 64k..512k tokens): eager, torch.compile and Triton
#      fwd+bwd in bf16, kernels alone and end to end, against a copy (goal at 256k: Triton >= 50% of
#      the copy, faster than compile end to end);
#   3. aggregate training tokens/s at the paper preset (Python, seq_depth, 64 records of <= 1,024
#      tokens per step) for 1, 2, 8 and 16 runs at once through sweep.sh (goal: 8 or 16 at once
#      >= 3x the aggregate of two side by side);
#   4. 30 steps of paper 004's packed batches (hrope_axial on code, recipe hrope): the masked path on CUDA.
#   bash reproduce_gpu.sh [steps per run, default 150]    (JOBS="1 2 8 16" to change the counts)
#   bash reproduce_gpu.sh studies      the CPU-scale studies on the GPU (below)
# The paper-size 2,500-step seq_only / seq_depth comparison of the first study (RESULTS.md)
# ran from an earlier version of this script: `bash sweep.sh python "seq_only seq_depth" 0 2 --steps 2500`.
set -uo pipefail
cd "$(dirname "$0")"

# The CPU-scale studies of reproduce_cpu.sh (ten seeds: programs, JSON, XML, Markdown; the
# spreadsheet rows at three), all at once on one GPU: every run keeps the CPU scale's settings
# (model, steps, batch, recipe) and fp32, so only the device differs; many small runs share the card.
#   bash reproduce_gpu.sh studies        (prepared data under data/; outputs under $OUT10, default out10)
if [ "${1:-}" = studies ]; then
  export OMP_NUM_THREADS=1 OUT=${OUT10:-out10} PYTHONUNBUFFERED=1
  SEEDS=${SEEDS10:-0 1 2 3 4 5 6 7 8 9} J=${JOBS:-4}
  CPU="--device cuda --preset cpu --steps 200 --docs_per_step 16 --val_docs 128 --test_docs 256 --mb_tokens 4096
       --bf16 0 --compile 0 --milestones 10 --recipe tree"
  # shellcheck disable=SC2086
  {
    bash sweep.sh programs "seq_only tree_only tree_within seq_depth" "$SEEDS" $((2 * J)) $CPU &
    bash sweep.sh json "seq_only seq_depth" "$SEEDS" "$J" $CPU &
    bash sweep.sh xml "seq_only seq_depth" "$SEEDS" "$J" $CPU &
    bash sweep.sh markdown "flat hrope_axial" "$SEEDS" "$J" ${CPU/--preset cpu/--preset cpu_hrope} &
    bash sweep.sh sheets "seq_only seq_grid seq_tree" "0 1 2" "$J" ${CPU/--steps 200/--steps 120} &
    wait
  }
  for d in "$OUT"/{programs,json,xml,markdown}/*/seed* "$OUT"/sheets/*/seed*; do
    [ -f "$d/final.json" ] && [ ! -f "$d/eval_test.json" ] || continue
    case $d in */sheets/*) echo "$d --attention --max_docs 128" ;; *) echo "$d --max_docs 256" ;; esac
  done | xargs -r -P $((3 * J)) -L 1 sh -c 'python evaluate.py "$0" "$@" > "$0/eval.log" 2>&1 || echo "failed: $0"'
  for c in programs json xml markdown sheets; do python analyze.py "$OUT/$c" --finished > "$OUT/$c/analysis.md"; done
  exit
fi
# Paper 004 at the CPU scale (reproduce_cpu.sh ten_hrope, seeds 0-2) on code, prose and webtext:
# five models each, then every table's evaluation.   bash reproduce_gpu.sh hrope
if [ "${1:-}" = hrope ]; then
  export OMP_NUM_THREADS=1 OUT=${OUT10:-out10} PYTHONUNBUFFERED=1
  J=${JOBS:-4}
  CPU="--device cuda --preset cpu_hrope --steps 200 --docs_per_step 16 --val_docs 128 --test_docs 256 --mb_tokens 4096
       --bf16 0 --compile 0 --milestones 10 --recipe hrope_cpu"
  for c in code prose webtext; do
    # shellcheck disable=SC2086
    bash sweep.sh $c "flat sent_axial hrope_axial rand_axial period_axial" "0 1 2" "$J" $CPU &
  done
  wait
  # Table 13's hubs are chosen on every seed's contributions pooled: that pass first (hrope/compression.py)
  ls -d "$OUT"/{code,prose,webtext}/hrope_axial/seed[012] | xargs -r -P $((3 * J)) -I{} sh -c \
    '[ -f {}/hub_contrib_test.npz ] || python evaluate.py {} --max_docs 128 --hub_contributions > {}/hub.log 2>&1'
  for d in "$OUT"/{code,prose,webtext}/*/seed[012]; do
    [ -f "$d/final.json" ] && [ ! -f "$d/eval_test.json" ] || continue
    case $d in
      */flat/*) echo "$d --boundary --demo --probe" ;;
      */sent_axial/*) echo "$d --boundary --demo" ;;
      */hrope_axial/*) echo "$d --boundary --demo --probe --attention --paragraphs --hubs" ;;
      */rand_axial/*) echo "$d --boundary --probe --attention" ;;
      *) echo "$d" ;;
    esac
  done | xargs -r -P $((3 * J)) -L 1 sh -c 'python evaluate.py "$0" --max_docs 128 "$@" > "$0/eval.log" 2>&1 || echo "failed: $0"'
  for c in code prose webtext; do
    python analyze.py "$OUT/$c" --finished > "$OUT/$c/analysis.md"
    python analyze.py "$OUT/$c" --finished --baseline rand_axial > "$OUT/$c/analysis_vs_rand.md"
    python analyze.py --boundary "$OUT/$c" > "$OUT/$c/boundary.md"
    python analyze.py --hubs "$OUT"/$c/hrope_axial/seed[012] > "$OUT/$c/hubs.md"
    python analyze.py --depth "$(ls "$OUT"/$c/hrope_axial/seed[012]/depth_test.npz | paste -sd,)" \
      "$(ls "$OUT"/$c/rand_axial/seed[012]/depth_test.npz | paste -sd,)" > "$OUT/$c/depth.md"
  done
  python analyze.py --paragraphs "$OUT"/{prose,code,webtext}/hrope_axial > "$OUT/paragraphs.md"
  exit
fi
STEPS=${1:-150}
R=${OUT:-out}/gpu
mkdir -p "$R"
exec > >(tee "$R/gpu.log") 2>&1
export PYTHONUNBUFFERED=1
nvidia-smi -L || echo "no nvidia-smi: not a GPU machine"
python -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
echo "== 1. kernel against the reference (TRITON_INTERPRET=0)"
TRITON_INTERPRET=0 python -m pytest -q tests/test_rotary.py -k "triton or every or head_split" 2>&1 | tail -4
echo "== 2. a study's rotation fwd+bwd, H=2, D=128"
TRITON_INTERPRET=0 python bench.py rotation
echo "== 3. aggregate training tokens/s"
python prepare.py python --max_len 1024 --out data_1024 --workers 16 | tail -4   # the paper preset's context
for jobs in ${JOBS:-1 2 8 16}; do
  rm -rf /tmp/agg
  t0=$(date +%s.%N)
  OUT=/tmp/agg bash sweep.sh python seq_depth "$(seq -s ' ' 0 $((jobs - 1)))" "$jobs" --steps "$STEPS" --val_docs 64 \
    --test_docs 64 --milestones 2 --data data_1024
  t1=$(date +%s.%N)
  python - "$jobs" "$t0" "$t1" <<'PY'
import glob, json, sys
jobs, t0, t1 = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
logs = [[json.loads(l) for l in open(p)] for p in glob.glob("/tmp/agg/python/seq_depth/seed*/log.jsonl")]
tokens = sum(log[-1]["tokens"] for log in logs)
train_s = [log[-1]["elapsed"] for log in logs]
mfu = [log[-1].get("mfu", 0) for log in logs]
print(f"{jobs:2d} at once: {len(logs)} runs, {tokens / 1e6:.1f} M tokens in {t1 - t0:.0f} s wall -> "
      f"aggregate {tokens / (t1 - t0) / 1e6:.2f} M tokens/s (start-up included); per run "
      f"{tokens / len(logs) / (sum(train_s) / len(logs)) / 1e3:.0f} k tokens/s while training, MFU "
      f"{100 * sum(mfu) / len(mfu):.1f}% each, {100 * sum(mfu):.1f}% together")
PY
done
echo "== 4. paper 004's batches: 16 blocks of 1,024 tokens, records packed, attention inside each (--pack)"
if [ -d data/code ]; then
  python train.py --corpus code --config hrope_axial --recipe hrope --steps 30 --milestones 1 --val_docs 64 \
    --test_docs 64 --out /tmp/packed --resume 0 2>&1 | tr '\r' '\n' | grep -E "blocks|final|30/30" | tail -3
else
  echo "no data/code: python prepare.py code first"
fi
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv 2>/dev/null || true
