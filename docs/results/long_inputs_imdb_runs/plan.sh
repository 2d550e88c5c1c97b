#!/bin/bash
# The long-input table (docs/results/long_inputs_imdb.*) built again from all-MiniLM-L6-v2, stage by stage: every
# stage whose output is already there is skipped and every training run resumes from its last checkpoint, so the
# plan is run again after a stop. Stages:
#   1. MiniLM converted to a full-attention Linformer at n = 512, finetuned on 12,000 IMDB train reviews (the teacher);
#   2. the teacher lengthened to n = 4096 (positions copied);
#   3. with STUDENTS=1 only (about an hour on two cores): the lengthened teacher finetuned at n = 4096 on the long
#      train reviews, then its k = 128 local/global twin distilled from it; with FIRST_STUDENT=1 as well, beside them
#      on the other core, the twin distilled from the lengthened teacher itself (the earlier table's first student);
#   4. the long-input table at the ns its inputs reach (NS, default 1378: the sample's longest input has 1,378 tokens,
#      so every input is whole there; NS="1024 1378" adds a row where some are cut): the twin with and without exact
#      local and global keys, with landmark pooling and with the covered columns masked (the converted default), and the
#      students built; alone on the machine, since it times every row.
# Threads: a job alone takes both cores; two jobs one each (two one-thread jobs do more work on two cores than one
# two-thread job).
# Records (results.json, config.yaml, predictions) are copied beside this file after each run.
set -euo pipefail
cd "$(dirname "$0")/../../.."
export OMP_NUM_THREADS=2 MKL_NUM_THREADS=2
PY=${PY:-.venv/bin/python}
HERE=docs/results/long_inputs_imdb_runs
OUT=outputs
log() { echo "$(date +%T) $*"; }
keep() {  # a run's small records beside this file
  local src=$1 dst=$HERE/$(basename "$1")
  mkdir -p "$dst"
  for f in results.json config.yaml eval_predictions.json metrics.jsonl summary.json linformer_card.json; do
    [ -f "$src/$f" ] && cp "$src/$f" "$dst/"
  done
  [ -f "$src/model/linformer_card.json" ] && cp "$src/model/linformer_card.json" "$dst/"
  return 0
}

BASE=$OUT/converted/minilm-full-n512
TEACHER=$OUT/finetune/imdb-teacher-12k-s0
LONG=$OUT/converted/imdb-teacher-12k-n4096
LONG_TEACHER=$OUT/finetune/imdb-teacher-12k-n4096-long-s0
STUDENT=$OUT/distill/imdb-12k-distill-n4096-k128-local-gentle-s0
LONG_STUDENT=$OUT/distill/imdb-12k-long-distill-n4096-k128-local-s0
# the gentle recipe: the default one diverged at this length (docs/results/long_inputs_distill_runs/README.md)
GENTLE=(distill.hidden_weight=0 distill.lr_projections=1e-4 trainer.lr=1e-5)
TWIN=(model.max_seq_len=4096 model.projected_dim=128 model.sharing=layerwise model.local_window=128
      'model.global_positions=[0,-1]')

stage_teacher() {
  [ -f "$BASE/config.json" ] || $PY scripts/convert.py model_path=minilm model.max_seq_len=512 model.attention=full \
      out_dir=$BASE
  [ -f "$TEACHER/results.json" ] || $PY scripts/finetune.py task=imdb model_path=$BASE seed=0 subset_seed=0 \
      run_name=imdb-teacher-12k-s0 experiment_name=imdb_teacher trainer.lr=0.0001 trainer.batch_size=16 \
      trainer.epochs=1 trainer.max_length=512 trainer.mixed_precision=no trainer.save_best=true \
      trainer.group_by_length=true max_train_examples=12000 max_eval_examples=2000 trainer.save_every=50 \
      trainer.log_every=10 trainer.resume=auto
  keep $TEACHER
  [ -f "$LONG/config.json" ] || $PY scripts/convert.py model_path=$TEACHER/best model.max_seq_len=4096 \
      model.attention=full out_dir=$LONG
}

stage_student() {  # distilled from the lengthened teacher
  local -x OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
  [ -f "$STUDENT/results.json" ] || $PY scripts/distill.py task=imdb teacher_path=$LONG "${TWIN[@]}" \
      distill.min_tokens=512 "${GENTLE[@]}" max_train_examples=12500 max_eval_examples=200 trainer.batch_size=8 \
      trainer.group_by_length=true trainer.epochs=1 trainer.max_length=4096 trainer.eval_at_start=false \
      trainer.save_every=20 trainer.resume=auto run_name=$(basename $STUDENT)
  keep $STUDENT
}

stage_long() {  # the teacher finetuned at length, then its twin distilled from it (micro-batches of 4: full
  # attention's backward over 8 reviews of ~3,000 tokens takes 18 GB)
  [ -f "$LONG_TEACHER/results.json" ] || $PY scripts/finetune.py task=imdb model_path=$LONG min_train_tokens=512 \
      max_train_examples=6000 max_eval_examples=200 trainer.max_length=4096 trainer.batch_size=4 \
      trainer.grad_accum=2 trainer.epochs=1 trainer.lr=2e-5 trainer.group_by_length=true trainer.save_best=true \
      trainer.save_every=20 trainer.resume=auto run_name=$(basename $LONG_TEACHER)
  keep $LONG_TEACHER
  [ -f "$LONG_STUDENT/results.json" ] || $PY scripts/distill.py task=imdb teacher_path=$LONG_TEACHER/best \
      "${TWIN[@]}" distill.min_tokens=512 "${GENTLE[@]}" max_train_examples=6000 max_eval_examples=200 \
      trainer.batch_size=4 trainer.grad_accum=2 trainer.group_by_length=true trainer.epochs=1 \
      trainer.max_length=4096 trainer.eval_at_start=false trainer.save_every=20 trainer.resume=auto \
      run_name=$(basename $LONG_STUDENT)
  keep $LONG_STUDENT
}

stage_table() {  # the students by the names the earlier table gave them
  local students=()
  mkdir -p $OUT/long_inputs
  if [ -f "$STUDENT/results.json" ]; then
    ln -sfn "$(pwd)/$STUDENT/model" $OUT/long_inputs/imdb-12k-distilled-n4096
    students+=($OUT/long_inputs/imdb-12k-distilled-n4096)
  fi
  if [ -f "$LONG_STUDENT/results.json" ]; then
    ln -sfn "$(pwd)/$LONG_TEACHER/best" $OUT/long_inputs/imdb-12k-teacher-n4096-long
    ln -sfn "$(pwd)/$LONG_STUDENT/model" $OUT/long_inputs/imdb-12k-long-distilled-n4096
    students+=($OUT/long_inputs/imdb-12k-teacher-n4096-long $OUT/long_inputs/imdb-12k-long-distilled-n4096)
  fi
  $PY scripts/long_inputs.py --classifier $TEACHER/best --ns ${NS:-1378} --k 128 --examples 600 \
      --local-windows 128 --landmarks --overlap ${students[@]:+--students "${students[@]}"} \
      --out docs/results/long_inputs_imdb --overwrite
}

case "${1:-all}" in
  teacher) stage_teacher ;;
  students)
    if [ "${FIRST_STUDENT:-0}" = 1 ]; then
      stage_student > $OUT/plan_student.log 2>&1 & pid=$!
      OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 stage_long > $OUT/plan_long.log 2>&1; wait $pid
    else
      stage_long > $OUT/plan_long.log 2>&1
    fi ;;
  table) stage_table ;;
  all)
    log teacher; stage_teacher
    if [ "${STUDENTS:-0}" = 1 ]; then log students; "$0" students; fi
    log table; stage_table; log done ;;
  *) echo "error: unknown stage '$1' (teacher, students, table or all)" >&2; exit 2 ;;
esac
