#!/usr/bin/env bash
# The GPU machine's calls, each sized to one (REPRODUCE.md "One paper table per GPU call"):
#   bash scripts/reproduce_gpu.sh speed_check   the fused rotation and a study on the device (tests), then
#        `bench.py rotation` at 256k tokens: kernels alone and end to end against a copy (issue goals:
#        Triton >= 50% of the copy, faster than compile end to end); at most 170 s
#   bash scripts/reproduce_gpu.sh study_bench   16 runs of the Python setting's model (6 layers, d 256, 2 heads,
#        context 1,024, 64 records a step) as one compiled study: tokens/s and MFU by nanoGPT's count at
#        true record lengths (issue goal: >= 20% at M >= 16); then M = 16, 1 eager as one study beside M
#        processes (the ratio); at most 460 s, its estimate printed first, its runs' logs kept on any exit
# One window (DEVICE.md: 15 minutes from the request): ~60 s start-up + speed_check 170 s + study_bench
# 460 s = 690 s, leaving 210 s to rerun the shorter. Each step of every stage runs under `timeout`
# (the plan, printed first, names each limit); what a step printed stays in $OUT/STAGE.log as it comes;
# a step that fails or overruns ends the stage non-zero, named in its last line. `nvidia-smi dmon`
# samples the card into $OUT/dmon_STAGE.txt where it exists.
#   bash scripts/reproduce_gpu.sh studies       the CPU-scale studies on the GPU (below)
# Add --dry to speed_check or study_bench (and to the table stages below): the same code on CPU at toy size.
set -uo pipefail
cd "$(dirname "$0")/.."   # the repository

# ------------------------------------------------------------ one paper table per GPU call ----
# Each stage fits one call (about 6 minutes with prepare, so a rerun fits the 15-minute window): it
# sets up what the machine lacks, prepares the data, times the study's first steps, says which seeds
# (and length) it will train and why, trains them as one batched study (study.py), scores the test
# split, and prints the paired table last. What comes back is under $OUT, three files:
# STAGE.log, STAGE_table.md and STAGE_runs.tar.gz (every run's JSON and logs, no checkpoints).
#   bash scripts/reproduce_gpu.sh python_table          the appendix's Python setting (every program found)
#   bash scripts/reproduce_gpu.sh web_table             web pages from the carried $PAGES (pages.tar.gz)
#   bash scripts/reproduce_gpu.sh sheets_table          spreadsheets: SYNTHETIC workbooks unless $SHEETS_SRC
#   bash scripts/reproduce_gpu.sh hrope_table CORPUS [GROUP]   paper 004 Table 11 on code, prose or webtext:
#        flat + one group of configurations a call (GROUP 1 hrope_axial, 2 sent_axial, 3 rand_axial
#        period_axial); a warm machine keeps the flat runs of an earlier call
# Add --dry to any of them: the same code on CPU at toy size (tests/test_reproduce_gpu.py); only the
# size variables set below differ. REPRODUCE.md says what to carry and what comes back.
setup_machine() {   # DEVICE.md: the GPU machine has no `python` (a wrapper keeps its venv) nor rustbpe/openpyxl
  if ! command -v python >/dev/null; then
    mkdir -p /tmp/bin && rm -f /tmp/bin/python && printf '#!/bin/sh\nexec python3 "$@"\n' > /tmp/bin/python
    chmod +x /tmp/bin/python && export PATH=/tmp/bin:$PATH
  fi
  if ! python3 -c "import rustbpe, openpyxl" 2>/dev/null; then
    ls .whl/*.whl >/dev/null 2>&1 || { echo "error: rustbpe or openpyxl missing and no .whl/ carried (REPRODUCE.md)"; exit 1; }
    python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
    export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
  fi
  export PYTHONUNBUFFERED=1
  if command -v nvidia-smi >/dev/null; then   # utilisation every 2 s while the stage runs
    nvidia-smi dmon -s um -d 2 > "$OUT/dmon_$name.txt" 2>&1 &
    DMON=$!
  fi
  trap finish EXIT
  echo "== $name on $DEVICE$([ $DRY = 1 ] && echo ' (--dry: toy sizes)'), $(date -u +%FT%TZ), commit $(git rev-parse --short HEAD 2>/dev/null)"
}

step() {   # LIMIT WHAT FILE CMD...: CMD under `timeout LIMIT` s, its lines also appended to FILE as they come;
  # a failure or an overrun ends the stage non-zero, and its last line says which step
  local limit=$1 what=$2 file=$3 rc
  shift 3
  echo "-- $what (limit ${limit} s)" >&2
  timeout -k 10 "$limit" "$@" 2>&1 | tee -a "$file"
  rc=${PIPESTATUS[0]}
  [ "$rc" = 0 ] && return 0
  echo >&2 "== $name FAILED at: $what ($([ "$rc" = 124 ] || [ "$rc" = 137 ] && echo "ran past its ${limit} s limit" \
    || echo "exit code $rc"))"
  exit 1
}

plan() {   # the stage's plan, printed first: each step's limit and their sum against the call's 600 s
  local sum=0 x
  for x in "$@"; do sum=$((sum + ${x##*=})); done
  echo "plan: ${*//=/ <= } s; $sum s in all (a call runs at most 600 s$([ $DRY = 1 ] && echo '; --dry: CPU limits'))"
}

finish() {   # on any exit, an overrun's too: the sampler stopped, the stage's runs kept as far as they got
  [ -n "${DMON:-}" ] && kill "$DMON" 2>/dev/null
  { [ -d "$W/runs" ] || [ -d "$W/bench" ]; } && kept
}

kept() {   # the runs (every JSON and log, no checkpoints), the data's counts and the logs, under $OUT
  local have=() p
  for p in runs bench "data/${CORPUS:-}/meta.json" prepare.log study.log; do [ -e "$W/$p" ] && have+=("$p"); done
  tar czf "$OUT/${name}_runs.tar.gz" --exclude='*.pt' --exclude='*.npz' -C "$W" "${have[@]}"
}

few() {   # DIR DEST GLOB: --dry's $FEW smallest such files of DIR copied to DEST (on the GPU: DIR itself)
  if [ "$FEW" = 0 ]; then echo "$1"; return; fi
  mkdir -p "$2"
  find "$1" -maxdepth 1 -type f -name "$3" -printf '%s %p\n' | sort -n | sed -n "1,${FEW}p" | cut -d' ' -f2- \
    | xargs -r cp -t "$2"
  echo "$2"
}

pages() {   # $1 (a tarball of python3-doc's html/, or any pages) extracted once under $W; --dry packs a few first
  local tarball=$1
  if [ $DRY = 1 ] && [ ! -f "$W/pages.tar.gz" ]; then
    [ -d /usr/share/doc/python3-doc/html ] || { echo "error: --dry needs python3-doc's pages"; exit 1; }
    mkdir -p "$W/few/html/_sources" && few /usr/share/doc/python3-doc/html/library "$W/few/html" "*.html" >/dev/null
    few /usr/share/doc/python3-doc/html/_sources/library "$W/few/html/_sources" "*.txt" >/dev/null
    tar czf "$W/pages.tar.gz" -C "$W/few" html && tarball=$W/pages.tar.gz
  fi
  [ $DRY = 1 ] && tarball=$W/pages.tar.gz
  [ -f "$tarball" ] || { echo "error: no $tarball (REPRODUCE.md: tar czhf pages.tar.gz -C /usr/share/doc/python3.11-doc html)"; exit 1; }
  [ -d "$W/pages/html" ] || { mkdir -p "$W/pages" && tar xzf "$tarball" -C "$W/pages"; }
  echo "pages: $(find "$W/pages/html" -name '*.html' | wc -l) HTML files from $tarball" >&2
  echo "$W/pages/html"
}

prepare() {   # prepare.py's flags: the setting's data under $W/data, its counts and cost said
  step "$LIMIT_PREPARE" prepare "$W/prepare.log" python prepare.py "$@" --out "$W/data" --workers $WORKERS >/dev/null
  grep -E "^(setting|note|WARNING|NOTE)" "$W/prepare.log"
  python - "$W"/data/*/meta.json <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
print(f"data: {m['documents']:,} documents, {m['tokens']:,} tokens, records "
      + ", ".join(f"{s} {v['records']:,}" for s, v in m["splits"].items())
      + f"; prepared in {m['run']['wall_seconds']} s, peak {m['run']['peak_rss_mb']['main']:,} MB")
PY
}

study() {   # CORPUS SETTING "CONFIGS" [train.py options]: time, fit, train, tabulate, score, tabulate
  local corpus=$1 setting=$2 configs=$3
  CORPUS=$corpus
  shift 3
  local train=(--setting "$setting" --data "$W/data" --device "$DEVICE" $RECORDS "$@")
  local steps=${LENGTH:-0} seeds
  [ "$STEPS_MAX" != 0 ] && steps=$STEPS_MAX   # --dry: its cap
  # study.py --budget: the study's own first steps timed, then as many seeds as fit, said with why
  step "$((T0 + STAGE_LIMIT - LIMIT_SCORE - $(date +%s)))" "the study: as many of seeds 0-$((SEEDS_MAX - 1)) as fit" \
    "$W/study.log" python study.py "$corpus" "$configs" "$(seq -s ' ' 0 $((SEEDS_MAX - 1)))" "${train[@]}" \
    $([ "$steps" != 0 ] && echo --steps "$steps") --out "$W/runs" \
    --budget "$(b=$((T0 + STAGE_LIMIT - LIMIT_SCORE - MARGIN - $(date +%s))); echo $((b > 0 ? b : 1)))"   # spent: "raise --budget"
  seeds=$(ls -d "$W/runs/$corpus"/*/seed* | sed 's/.*seed//' | sort -u | wc -l)
  tabulated "$corpus" "$setting"   # the paired table (final.json's losses) before scoring; the runs: `finish`
  step "$LIMIT_SCORE" "evaluate.py on every run (the per-kind tables)" /dev/null bash -c 'ls -d "$1"/*/seed* \
    | xargs -P "$3" -I{} sh -c "python evaluate.py {} --max_docs $2 > {}/eval.log 2>&1 || \
    { echo evaluate failed: {}; exit 1; }"' _ "$W/runs/$corpus" "$EVAL_DOCS" "$EVAL_JOBS"
  tabulated "$corpus" "$setting"
  echo "== $name: ${seeds} seed(s) of $configs, $(($(date +%s) - T0)) s in all; the table ($OUT/${name}_table.md):"
  cat "$OUT/${name}_table.md"
}

tabulated() {   # CORPUS SETTING: $OUT's table, saying what it is: stage, seeds, length, device, SYNTHETIC data
  local corpus=$1 setting=$2
  {
    python - "$W/data/$corpus/meta.json" "$W/runs/$corpus" <<'PY'
import glob, json, sys
meta, runs = json.load(open(sys.argv[1])), glob.glob(f"{sys.argv[2]}/*/seed*/final.json")
steps = sorted({json.load(open(p))["step"] for p in runs})
print(("SYNTHETIC data (generated workbooks), not the paper's corpus. " if meta["synthetic"] else "")
      + f"{len(runs)} runs, {meta['documents']:,} documents, step(s) {steps}")
PY
    echo "$name, --setting $setting on $DEVICE, commit $(git rev-parse --short HEAD 2>/dev/null)"
    python analyze.py "$W/runs/$corpus" --finished 2>&1 || echo "analyze failed"
  } > "$OUT/${name}_table.md"
}

python_table() {   # appendix §4 "Python": every program of the standard library and the packages
  local src=()
  table_plan
  [ $DRY = 1 ] && src=(--src "$(few "$(python -c 'import sysconfig; print(sysconfig.get_paths()["stdlib"])')" \
                                   "$W/src" "*.py")")
  prepare --setting python "${src[@]}"
  study programs python "seq_only tree_only tree_within seq_tree seq_depth"
}

web_table() {   # web pages: a third of a pass is about one step on python3-doc's pages, so a length of its own
  table_plan
  prepare --setting web_pages --src "$(pages "${PAGES:-pages.tar.gz}")"
  LENGTH=${WEB_STEPS:-1000} study web web_pages "seq_only tree_only tree_within seq_tree seq_depth"
}

sheets_table() {   # spreadsheets: SYNTHETIC workbooks unless $SHEETS_SRC holds real ones
  table_plan
  if [ -n "${SHEETS_SRC:-}" ]; then prepare --setting sheets --src "$SHEETS_SRC"
  else echo "NOTE: SYNTHETIC workbooks ($WORKBOOKS generated): not the paper's corpus"; prepare --setting sheets --workbooks $WORKBOOKS; fi
  study sheets sheets "seq_only seq_grid seq_tree seq_depth"
}

hrope_table() {   # paper 004 Table 11 (25 M parameters, 5,000 steps of 16 x 1,024): flat + one group a call
  local corpus=${1:?hrope_table CORPUS [GROUP]: code, prose or webtext} group=${2:-1} src=()
  local groups=("" hrope_axial sent_axial "rand_axial period_axial")
  [ -n "${groups[$group]:-}" ] || { echo "error: GROUP is 1, 2 or 3"; exit 1; }
  case $corpus in
    code) [ $DRY = 1 ] && src=(--src "$(few "$(python -c 'import sysconfig; print(sysconfig.get_paths()["stdlib"])')" \
                                             "$W/src" "*.py")") ;;
    prose) src=(--src "$(pages "${PAGES:-pages.tar.gz}")/_sources") ;;
    webtext) src=(--src "$(pages "${WEBTEXT_PAGES:-webtext.tar.gz}")") ;;
    *) echo "error: hrope_table takes code, prose or webtext"; exit 1 ;;
  esac
  echo "group $group: flat and ${groups[$group]} (Table 11's five configurations take three calls)"
  table_plan
  prepare --setting "hrope_$corpus" "${src[@]}"
  study "$corpus" "hrope_$corpus" "flat ${groups[$group]}"
}

table_plan() {   # DEVICE.md: 30,000 programs prepare in ~45 s; the rest of the call trains, then scores
  plan prepare=$LIMIT_PREPARE "study=$((STAGE_LIMIT - LIMIT_PREPARE - LIMIT_SCORE))" \
    "evaluate=$LIMIT_SCORE"
}

speed_check() {   # the fused rotation and the study on the device, then the rotation's speed
  # DEVICE.md: the kernel's tests ran in 26 s there; the study's in about as long; the rotation's benchmark compiles
  plan tests=$LIMIT_TESTS rotation=$LIMIT_ROTATION
  step "$LIMIT_TESTS" "1. the kernel against the reference; a study against train.py's recorded losses" /dev/null \
    env TRITON_INTERPRET=$INTERPRET python -m pytest -q -m "not slow" tests/test_rotary.py tests/test_study.py \
    -k "triton or each_run_as_train_py or batched_forward_is or non_finite_run"
  step "$LIMIT_ROTATION" "2. a study's rotation at ${ROTATION:-a toy size of} tokens: kernels alone and end to end" \
    "$OUT/rotation.txt" env TRITON_INTERPRET=$INTERPRET python bench.py rotation $ROTATION
}

study_bench() {   # the Python setting's model: M runs as one compiled study (MFU), then eager beside M processes
  local src=() bench=(--reps=1 --setting python --data "$W/data" --val_docs=64 --test_docs=64
                      $RECORDS --steps=$BENCH_STEPS --milestones=$BENCH_MILESTONES)
  rm -rf "$W/bench"   # each measurement's runs and output (bench.py --keep), in $OUT's tarball on any exit
  CORPUS=programs
  plan prepare=$LIMIT_PREPARE compiled=$LIMIT_COMPILED eager=$LIMIT_BENCH
  estimate
  [ $DRY = 1 ] && src=(--src "$(few "$(python -c 'import sysconfig; print(sysconfig.get_paths()["stdlib"])')" \
                                   "$W/src" "*.py")")
  prepare --setting python "${src[@]}"
  # compiling M separate processes would not fit a call: the compiled study is timed alone, its MFU the row
  step "$LIMIT_COMPILED" "1. bench.py study at M = $MFU_SIZE, compiled, the study alone" "$OUT/study_bench.txt" \
    python bench.py study programs $MFU_SIZE --study_only --keep="$W/bench/compiled" "${bench[@]}"
  step "$LIMIT_BENCH" "2. bench.py study at M = $STUDY_SIZES, eager, beside M processes" "$OUT/study_bench.txt" \
    python bench.py study programs $STUDY_SIZES --compile=0 --keep="$W/bench/eager" "${bench[@]}"
}

estimate() {   # study_bench's time from DEVICE.md's figures (30,000 programs prepared in ~45 s, 2.79 M tokens:
  # ~93 a record, 64 records a step; one eager run ~119,000 tokens/s, the web model's: a reading for this one)
  # and two not yet timed there (readings): a process starts in ~10 s, a graph compiles in ~90 s
  local step_s=$((BENCH_STEPS * 64 * 93 / 119000)) m=${MFU_SIZE} eager=0 M
  local speed=$((LIMIT_TESTS + LIMIT_ROTATION)) bench=$((LIMIT_PREPARE + LIMIT_COMPILED + LIMIT_BENCH))
  for M in $STUDY_SIZES; do eager=$((eager + 10 + step_s + ((M + 7) / 8) * (10 + step_s))); done
  echo "estimate: prepare ~45 s; compiled study ~$((10 + 2 * 90 + step_s)) s (start, 2 graphs, $BENCH_STEPS steps" \
    "of $m runs, a step no slower than one eager run's); eager at M = $STUDY_SIZES ~$eager s (a study, then M" \
    "processes 8 at a time). The window: start-up ~60 s + speed_check <= $speed s + study_bench <= $bench s" \
    "= $((60 + speed + bench)) of 900 s, $((900 - 60 - speed - bench)) s left to rerun speed_check" \
    "$([ $DRY = 1 ] && echo '(--dry: the GPU figures at toy sizes)')"
}

TABLES=" python_table web_table sheets_table hrope_table speed_check study_bench "
if [[ $TABLES == *" ${1:-none} "* ]]; then
  stage=$1 DRY=0 ARGS=()
  for a in "${@:2}"; do if [ "$a" = --dry ]; then DRY=1; else ARGS+=("$a"); fi; done
  if [ $DRY = 1 ]; then   # the sizes: a few steps of one record, one seed, a few source files, the CPU
    DEVICE=cpu SEEDS_MAX=1 STEPS_MAX=1 WORKERS=2 EVAL_DOCS=2 MARGIN=20
    RECORDS="--docs_per_step 1 --val_docs 2 --test_docs 2 --milestones 1 --mb_tokens 1024" FEW=60 WORKBOOKS=40
    INTERPRET=1 ROTATION="" MFU_SIZE=2 STUDY_SIZES="2 1" BENCH_STEPS=2 BENCH_MILESTONES=2 EVAL_JOBS=2
    : "${STAGE_LIMIT:=900}" "${LIMIT_PREPARE:=240}" "${LIMIT_SCORE:=180}" "${LIMIT_TESTS:=400}" \
      "${LIMIT_ROTATION:=120}" "${LIMIT_COMPILED:=300}" "${LIMIT_BENCH:=600}"   # the CPU is slower
  else                    # the setting's own batch, records and milestones; as many seeds as fit
    DEVICE=cuda SEEDS_MAX=${SEEDS_MAX:-10} STEPS_MAX=0 MARGIN=20
    WORKERS=16 EVAL_DOCS=${EVAL_DOCS:-512} RECORDS="" FEW=0 WORKBOOKS=600
    INTERPRET=0 ROTATION=262144 MFU_SIZE=16 STUDY_SIZES="16 1" BENCH_STEPS=${BENCH_STEPS:-120} BENCH_MILESTONES=6
    EVAL_JOBS=8   # bench's steady window: milestone 1 to 6, 100 steps; evaluate.py: 8 processes of 16 cores
    # limits from DEVICE.md's figures (start-up ~30 s, 30,000 programs prepared in ~45 s, the kernel's tests
    # 26 s) and study_bench's estimate (printed): a table stage 510 s (8.5 min), speed_check 170 s, study_bench
    # 460 s (~60 + 170 + 460 = 690 s of the 900 s window: room to rerun speed_check)
    : "${STAGE_LIMIT:=510}" "${LIMIT_PREPARE:=120}" "${LIMIT_SCORE:=90}" "${LIMIT_TESTS:=110}" \
      "${LIMIT_ROTATION:=60}" "${LIMIT_COMPILED:=240}" "${LIMIT_BENCH:=100}"
  fi
  name=$stage${ARGS[0]:+_${ARGS[0]}}
  OUT=${OUT:-out/gpu} W=${WORK:-out/$name}   # W: data and runs (ignored; a warm machine keeps it)
  mkdir -p "$OUT" "$W"
  exec > >(tee "$OUT/$name.log") 2>&1
  T0=$(date +%s)
  setup_machine
  "$stage" "${ARGS[@]}"
  exit
fi

# The CPU-scale studies of reproduce_cpu.sh (ten seeds: programs, JSON, XML, Markdown; the
# spreadsheet rows at three), all at once on one GPU: every run keeps the CPU scale's settings
# (model, steps, batch, recipe) and fp32, so only the device differs; many small runs share the card.
#   bash scripts/reproduce_gpu.sh studies        (prepared data under data/; outputs under $OUT10, default out10)
if [ "${1:-}" = studies ]; then
  export OMP_NUM_THREADS=1 OUT=${OUT10:-out10} PYTHONUNBUFFERED=1
  SEEDS=${SEEDS10:-0 1 2 3 4 5 6 7 8 9} J=${JOBS:-4}
  CPU="--device cuda --preset cpu --steps 200 --docs_per_step 16 --val_docs 128 --test_docs 256 --mb_tokens 4096
       --bf16 0 --compile 0 --milestones 10 --recipe tree"
  # shellcheck disable=SC2086
  {
    bash scripts/sweep.sh programs "seq_only tree_only tree_within seq_depth" "$SEEDS" $((2 * J)) $CPU &
    bash scripts/sweep.sh json "seq_only seq_depth" "$SEEDS" "$J" $CPU &
    bash scripts/sweep.sh xml "seq_only seq_depth" "$SEEDS" "$J" $CPU &
    bash scripts/sweep.sh markdown "flat hrope_axial" "$SEEDS" "$J" ${CPU/--preset cpu/--preset cpu_hrope} &
    bash scripts/sweep.sh sheets "seq_only seq_grid seq_tree" "0 1 2" "$J" ${CPU/--steps 200/--steps 120} &
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
# five models each, then every table's evaluation.   bash scripts/reproduce_gpu.sh hrope
if [ "${1:-}" = hrope ]; then
  export OMP_NUM_THREADS=1 OUT=${OUT10:-out10} PYTHONUNBUFFERED=1
  J=${JOBS:-4}
  CPU="--device cuda --preset cpu_hrope --steps 200 --docs_per_step 16 --val_docs 128 --test_docs 256 --mb_tokens 4096
       --bf16 0 --compile 0 --milestones 10 --recipe hrope_cpu"
  for c in code prose webtext; do
    # shellcheck disable=SC2086
    bash scripts/sweep.sh $c "flat sent_axial hrope_axial rand_axial period_axial" "0 1 2" "$J" $CPU &
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
echo "usage: bash scripts/reproduce_gpu.sh speed_check | study_bench | python_table | web_table | sheets_table |" \
  "hrope_table CORPUS [GROUP] [--dry] | studies | hrope" >&2
exit 2
