#!/usr/bin/env bash
# Byte identity with another commit: prepares six corpora from small fixed sources and trains
# train.py (seq_depth, seq_only, 20 steps; seq_depth with dropout 0.1 and depth dropout 0.3) and study.py
# (4 runs x 5 steps) on this working tree and on BASE (exported with git archive into a temporary folder),
# then compares every prepared array's md5 and every loss; last, both trees evaluate BASE's seq_depth
# checkpoint (its ckpt.pt and config.json load here) and their per-kind scores must agree. Each loss
# record is said identical, within 5e-5 relative (tests/test_study.py's tolerance: runs stacked otherwise
# than at BASE), or different (random draws made otherwise than at BASE: dropout). About 10 min on 2
# quiet cores. Exit 0 when the arrays, the dropout-free train.py runs and the evaluation are identical
# and the study's runs within the tolerance; the dropout run's records are listed either way.
#
#     bash scripts/same_as.sh dda814a
set -euo pipefail
export TQDM_DISABLE=1   # no progress bars in the log
BASE=${1:?usage: bash scripts/same_as.sh BASE}
cd "$(dirname "$0")/.."
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
mkdir -p "$TMP/base" "$TMP/src/html" "$TMP/src/py" "$TMP/src/rst"
git archive "$BASE" | tar -x -C "$TMP/base"
DOC=/usr/share/doc/python3-doc/html
STDLIB=$(python -c "import sysconfig; print(sysconfig.get_paths()['stdlib'])")
# the same small sources for both sides: 30 pages, 30 reST sources, 30 modules, in sorted order
find "$DOC/library" -maxdepth 1 -name '*.html' | sort | sed -n 1,30p | xargs cp -t "$TMP/src/html"
find "$DOC/_sources/library" -maxdepth 1 -name '*.rst.txt' | sort | sed -n 1,30p | xargs cp -t "$TMP/src/rst"
find "$STDLIB" -maxdepth 1 -name '*.py' | sort | sed -n 1,30p | xargs cp -t "$TMP/src/py"

side() {   # side FOLDER NAME: prepare, train and study in FOLDER; md5s and losses into $TMP/NAME.txt
  local d="$TMP/runs_$2"
  (
    cd "$1"
    S="$TMP/src"
    for c in "web --src $S/html" "python --src $S/py" "programs --src $S/py" "sheets --workbooks 30" \
             "prose --src $S/rst" "code --src $S/py"; do
      # shellcheck disable=SC2086
      python prepare.py $c --out "$d/data" --vocab 512 --workers 1 > /dev/null
    done
    for config in seq_depth seq_only; do
      python train.py --corpus web --data "$d/data" --out "$d/out" --config "$config" --steps 20 > /dev/null
    done
    python train.py --corpus web --data "$d/data" --out "$d/out" --config seq_depth --steps 20 \
      --dropout 0.1 --depth_dropout 0.3 --name seq_depth_dropout > /dev/null
    python study.py web "seq_only seq_depth" "0 1" --data "$d/data" --out "$d/study" --steps 5 > /dev/null
  )
  (cd "$d" && find data -name '*.npy' | sort | xargs md5sum
   python - "$d" <<'PY'
import glob, json, os, sys
os.chdir(sys.argv[1])
for path in sorted(glob.glob("out/**/*.jsonl", recursive=True) + glob.glob("study/**/*.jsonl", recursive=True)
                   + glob.glob("out/**/final.json", recursive=True) + glob.glob("study/**/final.json", recursive=True)):
    for line in open(path).read().splitlines() if path.endswith(".jsonl") else [open(path).read()]:
        e = json.loads(line)
        print(path, {k: v for k, v in sorted(e.items()) if "loss" in k or k == "step"})
PY
  ) > "$TMP/$2.txt"
}
side "$TMP/base" base
side "$PWD" here
for tree in "$TMP/base" "$PWD"; do   # BASE's checkpoint and config.json, scored by each tree
  (cd "$tree" && python -c "import evaluate, json, sys; r = evaluate.main([sys.argv[1], '--max_docs', '8']);
print('evaluate', sys.argv[1][len(sys.argv[2]):], json.dumps(r['kinds'], sort_keys=True))" \
    "$TMP/runs_base/out/web/seq_depth/seed0" "$TMP" | tail -1) >> "$TMP/eval_$(basename "$tree").txt"
done
tail -1 "$TMP/eval_base.txt" >> "$TMP/base.txt"
tail -1 "$TMP/eval_$(basename "$PWD").txt" >> "$TMP/here.txt"
echo "$BASE: $(grep -c '\.npy' "$TMP/base.txt") arrays, $(grep -c 'loss' "$TMP/base.txt") loss records, \
$(grep -c '^evaluate' "$TMP/base.txt") evaluation of its checkpoint by each tree"
python - "$TMP/base.txt" "$TMP/here.txt" "$BASE ($(git rev-parse --short HEAD)$(git diff --quiet || echo ', dirty'))" <<'PY'
import ast, math, sys
base, here = (open(p).read().splitlines() for p in sys.argv[1:3])
if len(base) != len(here):
    sys.exit(f"DIFFERENT: {len(base)} records at BASE, {len(here)} here")
kinds, worst = {"identical": 0, "within 5e-5": 0, "different": 0}, []
for a, b in zip(base, here):
    if a == b:
        kinds["identical"] += 1
        continue
    path, _, va = a.partition(" ")
    _, _, vb = b.partition(" ")
    try:
        x, y = ast.literal_eval(va), ast.literal_eval(vb)
        rel = max(abs(x[k] - y[k]) / abs(x[k]) for k in x if "loss" in k)
    except (ValueError, SyntaxError, KeyError, TypeError, ZeroDivisionError):
        rel = math.inf
    study, dropout = path.startswith("study/"), "dropout" in path
    kind = "within 5e-5" if rel <= 5e-5 and study else "different"
    kinds[kind] += 1
    worst.append((kind, path, rel))
    if not dropout and kind == "different":
        print(f"DIFFERENT: {path} (relative {rel:.2g})\n  < {a}\n  > {b}")
for kind, path, rel in worst:
    print(f"{kind}: {path} (largest relative difference {rel:.2g})")
print(", ".join(f"{v} {k}" for k, v in kinds.items()), f"records, {sys.argv[3]}")
bad = [p for k, p, _ in worst if k == "different" and "dropout" not in p]
sys.exit(1 if bad else 0)
PY
