#!/usr/bin/env bash
# The GPU machine's calls, each sized to one (REPRODUCE.md "One paper table per GPU call"):
#   bash scripts/reproduce_gpu.sh speed_check   the fused rotation and a study on the device (tests), then
#        `bench.py rotation` at 256k tokens: kernels alone and end to end against a copy (issue goals:
#        Triton >= 50% of the copy, faster than compile end to end); at most 200 s
#   bash scripts/reproduce_gpu.sh study_bench   16 runs of the Python setting's model (6 layers, d 256, 2 heads,
#        context 1,024, 64 records a step) on the standard library's programs as one compiled study:
#        tokens/s and MFU by nanoGPT's count at true record lengths (issue goal: >= 20% at M >= 16); then
#        M = 16, 1 eager as one study beside M processes (the ratio); at most 430 s, no checkpoints
# One window (15 minutes from the request): ~60 s start-up + speed_check 200 s + study_bench 430 s = 690 s,
# leaving 210 s to rerun the shorter; each stage plans at most 75% of a call's 600 s (it refuses a plan
# over that). Each step of every stage runs under `timeout` (the plan, printed first, names each limit and
# the figure it rests on); what a step printed stays in $OUT/STAGE.log as it comes; a step that fails or
# overruns ends the stage non-zero, named in its last line. Each step's measured seconds go to
# $OUT/STAGE_timings.json as it ends: `TIMINGS=FILE` (one carried back) plans the next call from them.
# `nvidia-smi dmon` samples the card into $OUT/dmon_STAGE.txt where it exists. `--plan`: the plan alone.
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
  local wheels=${WHEELS:-.whl} t=$SECONDS
  if ! python3 -c "import rustbpe, openpyxl" 2>/dev/null; then
    ls "$wheels"/*.whl >/dev/null 2>&1 || { echo "error: rustbpe or openpyxl missing and no $wheels/ carried (REPRODUCE.md)"; exit 1; }
    python3 -m pip install -q --no-index --no-deps --target /tmp/site "$wheels"/*.whl 2>&1 | tail -n 3 >&2
    [ "${PIPESTATUS[0]}" = 0 ] || { echo "error: pip could not install $wheels/*.whl (wheels for another Python than $(python3 -V)?)"; exit 1; }
    export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
    python3 -c "import rustbpe, openpyxl" 2>/dev/null || { echo "error: rustbpe or openpyxl still missing after installing $wheels/*.whl into /tmp/site ($(python3 -V))"; exit 1; }
  fi
  export PYTHONUNBUFFERED=1
  if command -v nvidia-smi >/dev/null; then   # utilisation every 2 s while the stage runs
    nvidia-smi dmon -s um -d 2 > "$OUT/dmon_$name.txt" 2>&1 &
    DMON=$!
  fi
  trap finish EXIT
  echo "== $name on $DEVICE$([ $DRY = 1 ] && echo ' (--dry: toy sizes)'), $(date -u +%FT%TZ), commit $(git rev-parse --short HEAD 2>/dev/null)"
  CARD=$(card) || { echo "$CARD"; exit 1; }
  echo "$CARD"
  timed setup "$LIMIT_SETUP" $((SECONDS - t)) 0
}

card() {   # the card as torch sees it (name, memory, SMs, the peak MFU is counted against) and the software
  python - "$DEVICE" <<'PY'
import platform, sys
import numpy, torch, triton
from treerope.machine import PEAK_FLOPS
sw = (f"python {platform.python_version()}, torch {torch.__version__}, triton {triton.__version__}, "
      f"numpy {numpy.__version__}")
if torch.cuda.is_available():
    p = torch.cuda.get_device_properties(0)
    print(f"card: {p.name}, {p.total_memory / 2**30:.1f} GiB, {p.multi_processor_count} SMs, sm_{p.major}{p.minor}; "
          f"MFU against {PEAK_FLOPS / 1e12:.0f} TFLOP/s bf16 (machine.PEAK_FLOPS: H100/H200 SXM dense); {sw}")
elif sys.argv[1] == "cuda":
    print(f"error: torch sees no CUDA device ({sw})")
    sys.exit(1)
else:
    print(f"card: none, the CPU (--dry); {sw}")
PY
}

timed() {   # KEY LIMIT SECONDS EXIT: a step's measured seconds into $OUT/STAGE_timings.json, which TIMINGS= reads
  python - "$OUT/${name}_timings.json" "$name" "${CARD#card: }" "$(git rev-parse --short HEAD 2>/dev/null)" "$DRY" "$@" <<'PY'
import json, os, sys, time
path, stage, card, commit, dry, key, limit, seconds, code = sys.argv[1:]
t = json.load(open(path)) if os.path.exists(path) else {
    "stage": stage, "card": card.split(";")[0], "commit": commit, "dry": dry == "1",
    "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "steps": {}}
t["steps"][key] = {"limit_s": int(limit), "seconds": int(seconds), "exit": int(code)}
json.dump(t, open(path + ".tmp", "w"), indent=1)
os.replace(path + ".tmp", path)
PY
}

step() {   # KEY LIMIT WHAT FILE CMD...: CMD under `timeout LIMIT` s, its lines also appended to FILE as they
  # come, its seconds timed (KEY); a failure or an overrun ends the stage non-zero, its last line says which step
  local key=$1 limit=$2 what=$3 file=$4 rc t=$SECONDS
  shift 4
  echo "-- $what (limit ${limit} s)" >&2
  timeout -k 10 "$limit" "$@" 2>&1 | tee -a "$file"
  rc=${PIPESTATUS[0]}
  timed "$key" "$limit" $((SECONDS - t)) "$rc"
  [ "$rc" = 0 ] && return 0
  echo >&2 "== $name FAILED at: $what ($([ "$rc" = 124 ] || [ "$rc" = 137 ] && echo "ran past its ${limit} s limit" \
    || echo "exit code $rc"))"
  exit 1
}

plan() {   # the stage's plan, printed first: each step's limit and their sum against the call's 600 s, of
  # which a speed stage takes at most 450 (25% left: the call's start, a slow step's kill, the tarball)
  local sum=0 x
  for x in "$@"; do sum=$((sum + ${x##*=})); done
  echo "plan: ${*//=/ <= } s; $sum s in all, $([ $DRY = 1 ] && echo '--dry: CPU limits' \
    || echo "$(((600 - sum) * 100 / 600))% of a call's 600 s left")"
  if [ $DRY = 0 ] && [ "$sum" -gt 450 ] && [[ " speed_check study_bench " == *" $stage "* ]]; then
    echo "error: the plan's $sum s leaves less than 25% of a 600 s call; lower a limit"; exit 1
  fi
  [ "$PLAN_ONLY" = 0 ] || exit 0
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
  step prepare "$LIMIT_PREPARE" prepare "$W/prepare.log" python prepare.py "$@" --out "$W/data" --workers $WORKERS >/dev/null
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
  step study "$((T0 + STAGE_LIMIT - LIMIT_SCORE - $(date +%s)))" "the study: as many of seeds 0-$((SEEDS_MAX - 1)) as fit" \
    "$W/study.log" python study.py "$corpus" "$configs" "$(seq -s ' ' 0 $((SEEDS_MAX - 1)))" "${train[@]}" \
    $([ "$steps" != 0 ] && echo --steps "$steps") --out "$W/runs" \
    --budget "$(b=$((T0 + STAGE_LIMIT - LIMIT_SCORE - MARGIN - $(date +%s))); echo $((b > 0 ? b : 1)))"   # spent: "raise --budget"
  seeds=$(ls -d "$W/runs/$corpus"/*/seed* | sed 's/.*seed//' | sort -u | wc -l)
  tabulated "$corpus" "$setting"   # the paired table (final.json's losses) before scoring; the runs: `finish`
  step evaluate "$LIMIT_SCORE" "evaluate.py on every run (the per-kind tables)" /dev/null bash -c 'ls -d "$1"/*/seed* \
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

table_plan() {   # DEVICE.md (an H200's 16 cores, ecb659c): 30,000 programs prepared in ~45 s (python_table now
  # prepares every program: 79,486 took 265 s on 2 cores here); the rest of the call trains, then scores
  plan prepare=$LIMIT_PREPARE "study=$((STAGE_LIMIT - LIMIT_PREPARE - LIMIT_SCORE))" \
    "evaluate=$LIMIT_SCORE"
}

speed_check() {   # the fused rotation and the study on the device, then the rotation's speed
  figures tests rotation
  plan setup=$LIMIT_SETUP tests=$LIMIT_TESTS rotation=$LIMIT_ROTATION
  step tests "$LIMIT_TESTS" "1. the kernel against the reference; a study against train.py's recorded losses" /dev/null \
    env TRITON_INTERPRET=$INTERPRET python -m pytest -q -m "not slow" tests/test_rotary.py tests/test_study.py \
    -k "triton or each_run_as_train_py or batched_forward_is or non_finite_run"
  step rotation "$LIMIT_ROTATION" "2. a study's rotation at ${ROTATION:-a toy size of} tokens: kernels alone and end to end" \
    "$OUT/rotation.txt" env TRITON_INTERPRET=$INTERPRET python bench.py rotation $ROTATION
}

study_bench() {   # the Python setting's model on the standard library's programs (the subset its limit holds):
  # M runs as one compiled study (MFU), then eager beside M processes; no checkpoints (--checkpoint=0)
  local bench=(--reps=1 --setting python --data "$W/data" --val_docs=64 --test_docs=64 --checkpoint=0
               $RECORDS --steps=$BENCH_STEPS --milestones=$BENCH_MILESTONES)
  rm -rf "$W/bench"   # each measurement's runs and output (bench.py --keep), in $OUT's tarball on any exit
  CORPUS=programs
  figures prepare compiled eager
  plan setup=$LIMIT_SETUP prepare=$LIMIT_PREPARE compiled=$LIMIT_COMPILED eager=$LIMIT_BENCH
  prepare --setting python --src "$(few "$(python -c 'import sysconfig; print(sysconfig.get_paths()["stdlib"])')" \
                                        "$W/src" "*.py")"
  # compiling M separate processes would not fit a call: the compiled study is timed alone, its MFU the row;
  # study.py --budget times its own first steps (the compile in them) and trains the seeds that fit
  step compiled "$LIMIT_COMPILED" "1. bench.py study at M = $MFU_SIZE, compiled, the study alone, the seeds that fit" \
    "$OUT/study_bench.txt" python bench.py study programs $MFU_SIZE --study_only --keep="$W/bench/compiled" \
    "${bench[@]}" --budget=$((LIMIT_COMPILED - MARGIN))
  step eager "$LIMIT_BENCH" "2. bench.py study at M = $STUDY_SIZES, eager, beside M processes" "$OUT/study_bench.txt" \
    python bench.py study programs $STUDY_SIZES --compile=0 --keep="$W/bench/eager" "${bench[@]}"
}

figures() {   # KEY...: each step's limit and the figure it rests on, printed with its source; TIMINGS=FILE (an
  # earlier call's STAGE_timings.json) replaces a limit by 1.5 x the seconds that step took there, plus 20
  local key var
  for key in "$@"; do
    var=LIMIT_$(echo "$key" | tr a-z A-Z); var=${var/LIMIT_EAGER/LIMIT_BENCH}
    echo "figure: $key <= ${!var} s: ${WHY[$key]}"
  done
  [ -n "${TIMINGS:-}" ] || return 0
  local set
  set=$([ -f "$TIMINGS" ] && python - "$TIMINGS" "$DRY" "$@" 2>/dev/null <<'PY'
import json, math, shlex, sys
t = json.load(open(sys.argv[1]))
for key in sys.argv[3:]:
    s = t["steps"].get(key)
    took = f"{s['seconds']} s of its {s['limit_s']} s limit, exit {s['exit']}" if s else "not timed"
    s = s if t["dry"] == (sys.argv[2] == "1") else None   # a CPU's seconds plan no GPU call, nor the reverse
    if s and s["exit"] == 0:   # an overrun says only that it took longer: its limit stays
        print(f"{'LIMIT_BENCH' if key == 'eager' else 'LIMIT_' + key.upper()}={math.ceil(1.5 * s['seconds']) + 20}")
    print("echo " + shlex.quote(f"figure: {key} took {took} in {sys.argv[1]} ({t['card']}, commit {t['commit']}, "
                                f"{t['date']}{', --dry' if t['dry'] else ''}): its limit "
                                + ("1.5 x that + 20 s" if s and s["exit"] == 0 else "kept")))
PY
) || { echo "error: TIMINGS=$TIMINGS is not a STAGE_timings.json"; exit 1; }
  eval "$set"
}

TABLES=" python_table web_table sheets_table hrope_table speed_check study_bench "
if [[ $TABLES == *" ${1:-none} "* ]]; then
  stage=$1 DRY=0 PLAN_ONLY=0 ARGS=()
  for a in "${@:2}"; do
    case $a in --dry) DRY=1 ;; --plan) PLAN_ONLY=1 ;; *) ARGS+=("$a") ;; esac
  done
  declare -A WHY   # each speed step's limit: the figure it rests on and where that was measured
  if [ $DRY = 1 ]; then   # the sizes: a few steps of one record, one seed, a few source files, the CPU
    DEVICE=cpu SEEDS_MAX=1 STEPS_MAX=1 WORKERS=2 EVAL_DOCS=2 MARGIN=20
    RECORDS="--docs_per_step 1 --val_docs 2 --test_docs 2 --milestones 1 --mb_tokens 1024" FEW=60 WORKBOOKS=40
    INTERPRET=1 ROTATION="" MFU_SIZE=2 STUDY_SIZES="2 1" BENCH_STEPS=2 BENCH_MILESTONES=2 EVAL_JOBS=2
    : "${STAGE_LIMIT:=900}" "${LIMIT_PREPARE:=240}" "${LIMIT_SCORE:=180}" "${LIMIT_TESTS:=400}" \
      "${LIMIT_ROTATION:=120}" "${LIMIT_COMPILED:=300}" "${LIMIT_BENCH:=600}" "${LIMIT_SETUP:=60}"   # the CPU is slower
    WHY=([tests]="--dry: the CPU's interpreter" [rotation]="--dry: a toy size" [prepare]="--dry: $FEW files"
         [compiled]="--dry: 2 runs, 2 steps" [eager]="--dry: 2 runs, 2 steps")
  else                    # the setting's own batch, records and milestones; as many seeds as fit
    DEVICE=cuda SEEDS_MAX=${SEEDS_MAX:-10} STEPS_MAX=0 MARGIN=20
    WORKERS=16 EVAL_DOCS=${EVAL_DOCS:-512} RECORDS="" FEW=0 WORKBOOKS=600
    INTERPRET=0 ROTATION=262144 MFU_SIZE=16 STUDY_SIZES="16 1" BENCH_STEPS=${BENCH_STEPS:-120} BENCH_MILESTONES=6
    EVAL_JOBS=8   # bench's steady window: milestone 1 to 6, 100 steps; evaluate.py: 8 processes of 16 cores
    # a table stage 510 s (8.5 min) from DEVICE.md's figures (H200, ecb659c); the speed stages' limits from
    # the figures WHY names (printed in the plan), or TIMINGS=: speed_check 200 s, study_bench 430 s
    : "${STAGE_LIMIT:=510}" "${LIMIT_PREPARE:=$([ "$stage" = study_bench ] && echo 60 || echo 120)}" "${LIMIT_SCORE:=90}" "${LIMIT_TESTS:=110}" \
      "${LIMIT_ROTATION:=60}" "${LIMIT_COMPILED:=160}" "${LIMIT_BENCH:=180}" "${LIMIT_SETUP:=30}"
    WHY=([tests]="the kernel's tests 26 s on an H200 at ecb659c (DEVICE.md); this step --dry on 2 CPU cores here, 19-31 s (2026-12-06)"
         [rotation]="bench.py rotation ran on an H200 at ecb659c, its time not recorded: a reading for this one size"
         [prepare]="the standard library's programs (the subset): 3.12.1's 8,340 programs, 612 k tokens, 34 s on 2 CPU cores here (2026-12-06), the card's machine has 16"
         [compiled]="never timed on a GPU: study.py --budget times the study's first steps (the compile in them) in this call and trains the seeds that fit"
         [eager]="never timed on a GPU for this model: each row is written as measured, the ratio's (M = 16 study, then 16 processes) first; what overruns is named")
  fi
  name=$stage${ARGS[0]:+_${ARGS[0]}}
  OUT=${OUT:-out/gpu} W=${WORK:-out/$name}   # W: data and runs (ignored; a warm machine keeps it)
  if [ "$PLAN_ONLY" = 0 ]; then
    mkdir -p "$OUT" "$W"
    exec > >(tee "$OUT/$name.log") 2>&1
    T0=$(date +%s)
    setup_machine
  fi
  "$stage" "${ARGS[@]}"
  exit
fi

# The CPU-scale studies of reproduce_cpu.sh (ten seeds: programs, JSON, XML, Markdown; the
# spreadsheet rows at three), all at once on one GPU: every run keeps the CPU scale's settings
# (model, steps, batch, recipe) and fp32, so only the device differs; many small runs share the card.
#   bash scripts/reproduce_gpu.sh studies        (prepared data under data/; runs under $OUT10, default out10)
# What comes back, on any exit, under $OUT (the machine's): MODE.log, MODE_tables.md (every table the mode
# wrote, each headed by its path) and MODE_runs.tar.gz (the runs' JSON, logs and tables; no checkpoints).
packed() {   # MODE: the runs under $OUT10 ($OUT inside a mode, for sweep.sh) into $RESULTS's three files
  find "$OUT" -name '*.md' | sort | while read -r f; do printf '## %s\n\n' "${f#"$OUT"/}"; cat "$f"; echo; done \
    > "$RESULTS/$1_tables.md"
  tar czf "$RESULTS/$1_runs.tar.gz" --exclude='*.pt' --exclude='*.npz' -C "$OUT" .
}

if [ "${1:-}" = studies ] || [ "${1:-}" = hrope ]; then
  RESULTS=${OUT:-out/gpu}
  mkdir -p "$RESULTS" "${OUT10:-out10}"
  exec > >(tee "$RESULTS/$1.log") 2>&1
  trap "packed $1" EXIT
fi
if [ "${1:-}" = studies ]; then
  export OMP_NUM_THREADS=1 OUT=${OUT10:-out10} PYTHONUNBUFFERED=1
  SEEDS=${SEEDS10:-0 1 2 3 4 5 6 7 8 9} J=${JOBS:-4}
  CPU="--device cuda --steps 200 --docs_per_step 16 --val_docs 128 --test_docs 256 --mb_tokens 4096
       --bf16 0 --compile 0 --milestones 10"
  # shellcheck disable=SC2086
  {
    bash scripts/sweep.sh programs "seq_only tree_only tree_within seq_depth" "$SEEDS" $((2 * J)) $CPU &
    bash scripts/sweep.sh json "seq_only seq_depth" "$SEEDS" "$J" $CPU &
    bash scripts/sweep.sh xml "seq_only seq_depth" "$SEEDS" "$J" $CPU &
    bash scripts/sweep.sh markdown "flat hrope_axial" "$SEEDS" "$J" $CPU --n_head 2 &
    bash scripts/sweep.sh sheets "seq_only seq_grid seq_tree" "0 1 2" "$J" ${CPU/--steps 200/--steps 120} &
    wait $(jobs -p)   # the sweeps: a bare `wait` would wait for the log's tee too, which never ends
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
  CPU="--device cuda --mb_tokens 4096 --bf16 0 --compile 0"
  for c in code prose webtext; do
    # shellcheck disable=SC2086
    bash scripts/sweep.sh $c "flat sent_axial hrope_axial rand_axial period_axial" "0 1 2" "$J" --setting cpu_$c $CPU &
  done
  wait $(jobs -p)   # the sweeps, not the log's tee
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
  "hrope_table CORPUS [GROUP] [--dry] [--plan] | studies | hrope (REPRODUCE.md \"The GPU check\"; runs nothing)" >&2
exit 2
