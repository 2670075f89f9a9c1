#!/usr/bin/env bash
# The GPU rows of README "Results": the compiled Triton kernel against the PyTorch reference,
# its timing, and the Python corpus at the paper's model size (preset "paper": 6 layers,
# d=256, 2 heads of 128, context 1,024, 64 records per step), one seed of seq_only and
# seq_depth trained side by side on one GPU. About 9 minutes on one H200 (first run: the
# evaluation with attention on 512 records of 1,024 tokens outran the 10-minute limit; now 256).
#   bash reproduce_gpu.sh [steps]
set -uo pipefail
STEPS=${1:-2500}
LOG=${OUT:-out}/gpu.log
mkdir -p out "$(dirname "$LOG")"
exec > >(tee "$LOG") 2>&1
export PYTHONUNBUFFERED=1
nvidia-smi -L
python -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
TRITON_INTERPRET=0 python -m pytest -q tests/test_rotary.py -k "triton or every" 2>&1 | tail -3
TRITON_INTERPRET=0 python rotary.py --bench
python prepare.py python --workers 16 --bpe_bytes 10000000 | tail -12   # a 10 MB BPE sample keeps this under 1 min
# a 10-step smoke run of the CUDA path (bf16 autocast + Triton); fall back to PyTorch rotation if it fails
if ! python train.py --corpus python --config seq_depth --steps 10 --out /tmp/smoke --val_docs 8 --test_docs 8 > /tmp/smoke.log 2>&1; then
  tail -20 /tmp/smoke.log; echo "Triton path failed in training: TREEROPE_TRITON=0"; export TREEROPE_TRITON=0
fi
for k in seq_only seq_depth; do
  timeout 300 python train.py --corpus python --config $k --seed 0 --steps "$STEPS" --val_docs 256 --test_docs 512 --mb_tokens 65536 \
    > "out/gpu_$k.log" 2> "out/gpu_$k.err" &
done
wait
tail -3 out/gpu_seq_only.log out/gpu_seq_depth.log; tail -c 600 out/gpu_seq_depth.err
python evaluate.py out/python/seq_depth/seed0 --max_docs 256 --attention 2>/dev/null
python evaluate.py out/python/seq_only/seed0 --max_docs 256 --attention --interventions none 2>/dev/null
python analyze.py out/python
if [ -n "${OUT:-}" ]; then
  for k in seq_only seq_depth; do
    cp out/python/$k/seed0/log.jsonl "$OUT/${k}_log.jsonl"; cp out/python/$k/seed0/final.json "$OUT/${k}_final.json"
  done
  cp out/python/seq_depth/seed0/eval_test.json "$OUT/seq_depth_eval_test.json"
fi
