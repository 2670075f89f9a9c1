#!/usr/bin/env bash
# The CPU reproduction study (RESULTS.md): every run, evaluation and table from prepared data.
#   python prepare.py python && python prepare.py web
#   for c in code prose sheets; do python prepare.py $c --max_len 256; done
#   bash scripts/reproduce_cpu.sh            # all stages;  bash scripts/reproduce_cpu.sh train  # one stage
# Records are cut at 256 tokens, the context these runs train (settings.PREPARE), and web blocks are
# joined by a space. RESULTS.md's python and web rows measured on records cut at 1,024 (web: blocks
# joined by a newline) trained on their first 256 tokens; `prepare.py python --max_len 1024` and
# `prepare.py web --max_len 1024 --blocks newline` come closest (web's <pre> text is kept as written).
# A finished run (final.json present) is not re-run, so an interrupted study resumes where it stopped.
# The runs are treerope/settings.py's CPU settings (cpu_python, cpu_web, cpu_web_newline, cpu_programs,
# cpu_sheets, cpu_prose, cpu_code; `python train.py --setting cpu_web --config seq_depth` is a run of
# `ten`), except where a stage changes them: the first study's hRoPE runs (the appendix's recipe, 120
# steps), ten_long, ten_vocab.
set -euo pipefail
cd "$(dirname "$0")/.."   # the repository: data/, out/ and the scripts resolve from there
SEEDS="0 1 2"
STEPS=200          # x 16 records of <= 256 tokens: ~0.8 M tokens per run
HSTEPS=120         # hRoPE runs (code, prose): 4 layers, d=128, 2 heads of 64, context 256
OUT=out
stage=${1:-all}
STAGES="all train eval analyze sheets beyond hrope table1 tables22 ten ten_train ten_eval ten_analyze ten_long
ten_vocab ten_hrope ten_hrope_train ten_hrope_eval ten_hrope_analyze layer2_1024 programs_v32k two_corpus
web_streams web_streams_train web_streams_eval web_streams_analyze"
if ! grep -qw -- "$stage" <<< "$STAGES"; then
  echo "error: unknown stage '$stage'; stages: $(echo $STAGES)" >&2
  exit 2
fi

ev() {  # run [evaluate.py options]: a finished run not yet evaluated
  [ -f "$1/final.json" ] && [ ! -f "$1/eval_test.json" ] || return 0
  python evaluate.py "$@" > /dev/null
}
evx() {  # run file [evaluate.py options]: evaluate unless the run already wrote `file`
  local run=$1 file=$2
  shift 2
  [ -f "$run/final.json" ] && [ ! -f "$run/$file" ] || return 0
  python evaluate.py "$run" "$@" > "$run/eval.log" 2>&1 || echo "failed: $run $*"
}
hub_pass1() {  # run: Table 13's per-type contributions (evaluate.py --hub_contributions), once
  [ -f "$1/final.json" ] && [ ! -f "$1/hub_contrib_test.npz" ] || return 0
  python evaluate.py "$1" --max_docs 128 --hub_contributions > /dev/null
}
run() {  # corpus config seed [extra train.py options]
  local c=$1 k=$2 s=$3; shift 3
  [ -f "$OUT/$c/$k/seed$s/final.json" ] || python train.py --corpus "$c" --config "$k" --seed "$s" \
      --milestones 10 --out "$OUT" "$@"
}

if [ "$stage" = all ] || [ "$stage" = train ]; then
  for s in $SEEDS; do
    for k in seq_only no_position seq_depth seq_tree; do run python $k $s --steps $STEPS; done
    for k in seq_only seq_depth; do run web $k $s --steps $STEPS; done
  done
fi

if [ "$stage" = all ] || [ "$stage" = hrope ]; then
  for s in $SEEDS; do
    for c in code prose; do
      # the first study ran before the hRoPE recipe existed: it used the appendix's (the defaults), kept here
      for k in flat sent_axial hrope_axial rand_axial; do run $c $k $s --steps $HSTEPS --n_head 2; done
    done
  done
fi

if [ "$stage" = all ] || [ "$stage" = sheets ]; then   # SYNTHETIC workbooks (prepare.py sheets --max_len 256)
  for s in $SEEDS; do
    for k in seq_only seq_grid seq_tree; do run sheets $k $s --steps $HSTEPS; done
  done
fi

if [ "$stage" = all ] || [ "$stage" = eval ]; then
  for s in $SEEDS; do
    for k in seq_only no_position seq_depth seq_tree; do ev $OUT/python/$k/seed$s --attention --max_docs 256; done
    for k in seq_only seq_depth; do ev $OUT/web/$k/seed$s --attention --max_docs 256; done
    for c in code prose; do
      for k in flat sent_axial hrope_axial rand_axial; do ev $OUT/$c/$k/seed$s --attention --max_docs 128 --demo; done
    done
    for k in seq_only seq_grid seq_tree; do ev $OUT/sheets/$k/seed$s --attention --max_docs 128; done
  done
fi

# The ten-seed study (ten paired seeds), its own output root. Seeds are the outer loop, so a study stopped
# early still pairs every configuration at the seeds it reached; finished runs are skipped.
#   bash scripts/reproduce_cpu.sh ten      # train + evaluate + analyze;  ten_train / ten_eval / ten_analyze; ten_long, ten_vocab
#   bash scripts/reproduce_cpu.sh ten_hrope   # prose and code under the hRoPE recipe; ten_hrope_train / _eval / _analyze
#   SEEDS10="0 1 2" bash scripts/reproduce_cpu.sh ten_hrope_train   # some seeds only
# Two runs side by side with one thread each are slower than one after the other with two threads
# (web seq_depth, 60 steps, twice: 64.5 s against 50.9 s), so runs go one at a time.
OUT10=${OUT10:-out10}
SEEDS10=${SEEDS10:-0 1 2 3 4 5 6 7 8 9}
if [ "$stage" = ten ] || [ "$stage" = ten_train ]; then
  for s in $SEEDS10; do
    OUT=$OUT10 bash scripts/sweep.sh web "seq_only seq_depth" "$s" 1 --steps $STEPS --milestones 10
    OUT=$OUT10 bash scripts/sweep.sh web seq_depth "$s" 1 --steps $STEPS --milestones 10 --depth_dropout=0.3 --name=seq_depth_dropout
    OUT=$OUT10 bash scripts/sweep.sh python "seq_only seq_depth tree_only tree_within" "$s" 1 --steps $STEPS --milestones 10
  done
fi
if [ "$stage" = ten ] || [ "$stage" = ten_eval ]; then
  for s in $SEEDS10; do
    for k in seq_only seq_depth seq_depth_dropout; do ev $OUT10/web/$k/seed$s --max_docs 256; done
    for k in seq_only seq_depth tree_only tree_within; do ev $OUT10/python/$k/seed$s --max_docs 256; done
  done
fi
if [ "$stage" = ten ] || [ "$stage" = ten_analyze ]; then
  for c in web python; do python analyze.py $OUT10/$c --finished --figures figures/ten/$c > $OUT10/$c/analysis.md; done
fi
# The two web streams as one controlled experiment: the same pages prepared at one commit with blocks
# joined by a space (cpu_web) and by a newline (cpu_web_newline), seq_only and seq_depth at ten seeds,
# fp32 and eager on any machine; at each seed the two streams train side by side, one thread each (on
# 2 cores shared with other work a 2-thread run waits on its slower thread). Then each stream's paired
# Δ and the difference between them (analyze.py --contrast: stream x configuration).
#   bash scripts/reproduce_cpu.sh web_streams   # prepare + train + evaluate + analyze; _train / _eval / _analyze
DS=${DATA_STREAMS:-data_streams} OS=${OUT_STREAMS:-out_streams}
side_by_side() {  # seed command...: `command seed stream` for both streams at once, one thread each
  local s=$1 pids=() p
  shift
  for b in space newline; do OMP_NUM_THREADS=1 "$@" "$s" $b & pids+=($!); done
  for p in "${pids[@]}"; do wait "$p"; done
}
stream_train() {  # seed stream: seq_only then seq_depth, those not finished
  local st=cpu_web k
  [ $2 = space ] || st=cpu_web_$2
  for k in seq_only seq_depth; do
    [ -f $OS/$2/web/$k/seed$1/final.json ] || python train.py --setting $st --config $k --seed $1 \
        --compile=0 --bf16=0 --data $DS/$2 --out $OS/$2 > /dev/null
  done
}
stream_eval() {  # seed stream: test loss, per-kind losses and the interventions of both runs
  local k
  for k in seq_only seq_depth; do ev $OS/$2/web/$k/seed$1 --max_docs 256; done
}
if [ "$stage" = web_streams ] || [ "$stage" = web_streams_train ]; then
  [ -f $DS/space/web/meta.json ] || python prepare.py web --out $DS/space
  [ -f $DS/newline/web/meta.json ] || python prepare.py web --blocks newline --out $DS/newline
  for s in $SEEDS10; do side_by_side $s stream_train; done
fi
if [ "$stage" = web_streams ] || [ "$stage" = web_streams_eval ]; then
  for s in $SEEDS10; do side_by_side $s stream_eval; done
fi
if [ "$stage" = web_streams ] || [ "$stage" = web_streams_analyze ]; then
  { echo "machine:$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-), $(nproc) cores;" \
      "flags: $(grep -m1 -ow -e avx512_bf16 -e amx_bf16 -e avx512f -e avx2 /proc/cpuinfo | sort -u | paste -sd' ');" \
      "$(python -c 'import torch; print("torch", torch.__version__)'); runs: OMP_NUM_THREADS=1, two side by side"
    echo
    for b in space newline; do echo "The $b-joined stream:"; echo; python analyze.py $OS/$b/web --finished; done
    python analyze.py --contrast $OS/space/web $OS/newline/web --finished
  } | tee $OS/analysis.md
fi

# Why tree_only loses on Python at this scale (RESULTS.md): tree_within above gives back the order
# inside a node; ten_long trains seq_only and tree_only 4x longer at seeds 0-2; ten_vocab trains them
# on the paper's 32,768-entry BPE, which gives more nodes per token (0.58 instead of 0.45).
if [ "$stage" = ten_long ]; then
  OUT=${OUT10}_long bash scripts/sweep.sh python "seq_only tree_only" "0 1 2" 1 --steps $((4 * STEPS)) --milestones 10
  for d in ${OUT10}_long/python/*/seed*; do ev $d --max_docs 256; done
  python analyze.py ${OUT10}_long/python --finished > ${OUT10}_long/python/analysis.md
fi
if [ "$stage" = ten_vocab ]; then
  [ -f data_v32k/python/meta.json ] || python prepare.py python --vocab 32768 --out data_v32k
  OUT=${OUT10}_v32k bash scripts/sweep.sh python "seq_only tree_only" "0 1 2" 1 --steps $STEPS --milestones 10 --data data_v32k
  for d in ${OUT10}_v32k/python/*/seed*; do ev $d --data data_v32k --max_docs 256; done
  python analyze.py ${OUT10}_v32k/python --finished > ${OUT10}_v32k/python/analysis.md
fi

# Python as small programs (the appendix's corpus is programs, not modules) and the formats beyond
# the papers (JSON, XML, Markdown), ten seeds each, seeds the outer loop:
#   python prepare.py programs --max_len 256; for c in json xml markdown; do python prepare.py $c --max_len 256; done
#   bash scripts/reproduce_cpu.sh beyond      # train + evaluate + analyze;  SEEDS10="0 1 2" for some seeds
if [ "$stage" = beyond ]; then
  for s in $SEEDS10; do
    OUT=$OUT10 bash scripts/sweep.sh programs "seq_only tree_only tree_within seq_depth" "$s" 1 --steps $STEPS --milestones 10
    for c in json xml; do OUT=$OUT10 bash scripts/sweep.sh $c "seq_only seq_depth" "$s" 1 --steps $STEPS --milestones 10; done
    OUT=$OUT10 bash scripts/sweep.sh markdown "flat hrope_axial" "$s" 1 --steps $STEPS --n_head 2 --milestones 10
    for c in programs json xml markdown; do
      for d in $OUT10/$c/*/seed$s; do ev $d --max_docs 256; done
    done
  done
  for c in programs json xml markdown; do python analyze.py $OUT10/$c --finished > $OUT10/$c/analysis.md; done
fi

# The compact programs stream at the appendix's BPE size (32,768 entries): tree_only vs seq_only,
# seeds 0-2; and the two-corpus precursor (appendix §2): web pages and the SYNTHETIC workbooks in one
# corpus, seq_only / seq_depth / seq_grid at five seeds, each scored per corpus on the test split.
if [ "$stage" = programs_v32k ]; then
  [ -f data_v32k/programs/meta.json ] || python prepare.py programs --vocab 32768 --max_len 256 --out data_v32k
  OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} OUT=${OUT10}_v32k bash scripts/sweep.sh programs "seq_only tree_only" "0 1 2" \
    "${JOBS:-2}" --steps $STEPS --milestones 10 --data data_v32k
  for d in ${OUT10}_v32k/programs/*/seed*; do ev $d --data data_v32k --max_docs 256; done
  python analyze.py ${OUT10}_v32k/programs --finished > ${OUT10}_v32k/programs/analysis.md
fi
if [ "$stage" = two_corpus ]; then
  [ -f data/web_sheets/meta.json ] || python prepare.py web_sheets
  OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} OUT=$OUT10 bash scripts/sweep.sh web_sheets \
    "seq_only seq_depth seq_grid two_corpus_shared two_corpus_own" "${SEEDS5:-0 1 2 3 4}" "${JOBS:-2}" \
    --steps $STEPS --milestones 10
  for d in $OUT10/web_sheets/*/seed*; do ev $d --max_docs 256; done
  python analyze.py $OUT10/web_sheets --finished > $OUT10/web_sheets/analysis.md
  # one plane group shared by both corpora against each its own (§2: 0.02%, 3/5)
  python analyze.py $OUT10/web_sheets --finished --baseline two_corpus_own > $OUT10/web_sheets/shared.md
fi

# Paper 004 Table 1 under our Layer I reading (REFERENCE.md; hrope/boundaries.py), on code at seeds 0-2:
# hrope_axial and flat (flat: H0(1) exact); the other variants' Δ are 0 by construction (tests).
if [ "$stage" = table1 ]; then
  OUT=$OUT10 bash scripts/sweep.sh code "hrope_axial flat" "0 1 2" 1 --setting cpu_code
  for s in 0 1 2; do for k in hrope_axial flat; do ev $OUT10/code/$k/seed$s --max_docs 128 --boundary --demo; done; done
  python analyze.py --boundary $OUT10/code > $OUT10/code/boundary.md
fi

# Tables 1, 3 and 13 on code, prose and webtext at seeds 0-2 under REFERENCE.md's readings (Layer I's
# sites and anchors, p1 counted in its document, Table 3 by the labels read, Table 13 by documents
# with one hub choice pooled over the seeds). flat: Table 1's H0(1) check; rand_axial: Table 3's
# control. Two runs at a time, one thread each (JOBS=1 for one).
#   CORPORA22=code bash scripts/reproduce_cpu.sh tables22   # one corpus at a time
#   all three: ~30 min a corpus on 2 cores (code 32 min; prose + webtext 58 min)
#   prepare: for c in code prose webtext; do python prepare.py $c --max_len 256; done
if [ "$stage" = tables22 ]; then
  CORPORA22=${CORPORA22:-code prose webtext}
  for c in $CORPORA22; do
    OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} OUT=$OUT10 bash scripts/sweep.sh $c "hrope_axial flat rand_axial" "0 1 2" "${JOBS:-2}" --setting cpu_$c
  done
  for c in $CORPORA22; do for s in 0 1 2; do hub_pass1 $OUT10/$c/hrope_axial/seed$s; done; done
  for c in $CORPORA22; do
    for s in 0 1 2; do
      evx $OUT10/$c/hrope_axial/seed$s hub_test.json --max_docs 128 --boundary --demo --attention --hubs
      evx $OUT10/$c/flat/seed$s boundary_test.npz --max_docs 128 --boundary --demo
      evx $OUT10/$c/rand_axial/seed$s depth_test.npz --max_docs 128 --boundary --attention
    done
    python analyze.py --boundary $OUT10/$c > $OUT10/$c/boundary.md
    python analyze.py --hubs $OUT10/$c/hrope_axial/seed[012] > $OUT10/$c/hubs.md
    python analyze.py --depth "$(ls $OUT10/$c/hrope_axial/seed[012]/depth_test.npz | paste -sd,)" \
      "$(ls $OUT10/$c/rand_axial/seed[012]/depth_test.npz | paste -sd,)" > $OUT10/$c/depth.md
  done
fi

# Layer II at paper 004's context (settings cpu_prose_1024, cpu_code_1024): records of <= 1,024
# tokens, packed into 4 blocks of 1,024 a step; flat, hrope_axial, rand_axial at seeds 0-2; Tables 1, 3.
#   prepare: for c in prose code; do python prepare.py --setting cpu_${c}_1024 --out data_1024; done
if [ "$stage" = layer2_1024 ]; then
  O=$OUT10/ctx1024 C1024=${CORPORA1024:-prose code}
  for c in $C1024; do   # the corpora side by side, one thread each (8 min 20 s a run on 2 cores)
    OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} OUT=$O bash scripts/sweep.sh $c "hrope_axial rand_axial flat" "0 1 2" 1 \
      --setting cpu_${c}_1024 --data data_1024 &
  done
  wait
  for c in $C1024; do   # a code record holds ~56 Layer I sites (prose ~33): code scores 32 records
    n=$([ $c = code ] && echo 32 || echo 128)
    for s in 0 1 2; do
      for k in hrope_axial rand_axial; do evx $O/$c/$k/seed$s depth_test.npz --max_docs $n --boundary --attention; done
      evx $O/$c/flat/seed$s boundary_test.npz --max_docs $n --boundary
    done
    python analyze.py --boundary $O/$c > $O/$c/boundary.md
    python analyze.py --depth "$(ls $O/$c/hrope_axial/seed*/depth_test.npz | paste -sd,)" \
      "$(ls $O/$c/rand_axial/seed*/depth_test.npz | paste -sd,)" > $O/$c/depth.md
  done
fi

# hRoPE under paper 004's recipe at CPU scale (settings cpu_prose and cpu_code: Table 11 at lr 1.2e-3):
# prose flat / hrope_axial / rand_axial at ten seeds; at seeds 0-2 also prose sent_axial
# and period_axial, and code with all five (Tables 1, 2, 3, 5, 8, 9, 12, 13, the reverse substitution).
#   prepare: python prepare.py prose --max_len 256; python prepare.py code --max_len 256
HRSTEPS=200
if [ "$stage" = ten_hrope ] || [ "$stage" = ten_hrope_train ]; then
  for s in $SEEDS10; do
    OUT=$OUT10 bash scripts/sweep.sh prose "flat hrope_axial rand_axial" "$s" 1 --setting cpu_prose --steps $HRSTEPS
    if [ "$s" -lt 3 ]; then
      OUT=$OUT10 bash scripts/sweep.sh prose "sent_axial period_axial" "$s" 1 --setting cpu_prose --steps $HRSTEPS
      OUT=$OUT10 bash scripts/sweep.sh code "flat sent_axial hrope_axial rand_axial period_axial" "$s" 1 \
        --setting cpu_code --steps $HRSTEPS
    fi
  done
fi
if [ "$stage" = ten_hrope ] || [ "$stage" = ten_hrope_eval ]; then
  # Table 13 masks every seed with one hub choice, made on seeds 0-2's contributions pooled
  # (hrope/compression.py): each of those seeds' pass 1 before any seed's --hubs below
  for s in $SEEDS10; do
    [ "$s" -lt 3 ] || continue
    for c in prose code; do hub_pass1 $OUT10/$c/hrope_axial/seed$s; done
  done
  # every run: test loss and the p1 interventions; seeds 0-2 also what each table reads
  for s in $SEEDS10; do
    for c in prose code; do
      for k in flat sent_axial hrope_axial rand_axial period_axial; do
        extra=()
        if [ "$s" -lt 3 ]; then
          case $k in
            flat) extra=(--boundary --demo --probe) ;;
            sent_axial) extra=(--boundary --demo) ;;
            hrope_axial) extra=(--boundary --demo --probe --attention --paragraphs --hubs) ;;
            rand_axial) extra=(--boundary --probe --attention) ;;
          esac
        fi
        ev $OUT10/$c/$k/seed$s --max_docs 128 "${extra[@]}"
        case $k in   # Table 2 and the reverse substitution are validation losses (paper 004 §4.3)
          hrope_axial | rand_axial | period_axial) evx $OUT10/$c/$k/seed$s eval_val.json --split val --max_docs 128 ;;
        esac
      done
    done
  done
fi
if [ "$stage" = ten_hrope ] || [ "$stage" = ten_hrope_analyze ]; then
  for c in prose code; do
    python analyze.py $OUT10/$c --finished --figures figures/ten/$c > $OUT10/$c/analysis.md
    python analyze.py $OUT10/$c --finished --baseline rand_axial > $OUT10/$c/analysis_vs_rand.md
    python analyze.py --boundary $OUT10/$c > $OUT10/$c/boundary.md
    python analyze.py --hubs $OUT10/$c/hrope_axial/seed[012] > $OUT10/$c/hubs.md
    h=$(ls $OUT10/$c/hrope_axial/seed[012]/depth_test.npz | paste -sd,)
    r=$(ls $OUT10/$c/rand_axial/seed[012]/depth_test.npz | paste -sd,)
    python analyze.py --depth "$h" "$r" > $OUT10/$c/depth.md
  done
  python analyze.py --paragraphs $OUT10/prose/hrope_axial $OUT10/code/hrope_axial > $OUT10/paragraphs.md
  python -m hrope.candidates data/prose data/code > $OUT10/candidates.md
fi

if [ "$stage" = all ] || [ "$stage" = analyze ]; then
  for c in python web code prose sheets; do
    python analyze.py $OUT/$c --figures figures/$c > $OUT/$c/analysis.md
  done
  for c in code prose; do   # hrope_axial against rand_axial (paper 004 Table 12), then compression depth
    python analyze.py $OUT/$c --baseline rand_axial > $OUT/$c/analysis_vs_rand.md
    h=$(ls $OUT/$c/hrope_axial/seed*/depth_test.npz | paste -sd,)
    r=$(ls $OUT/$c/rand_axial/seed*/depth_test.npz | paste -sd,)
    python analyze.py --depth "$h" "$r" > $OUT/$c/depth.md
  done
fi
