#!/bin/bash
# As run on 2026-11-25 from a git worktree of this repository at /work/wt-levers (acf2256), beside the data
# mirror at /work/shared/data and the experiment's worktree /work/wt-teacher: adjust those paths to rerun it.
# LoLCATs order at k=128, converted policy: 75 steps of E/F only (attention outputs), then 75 of every weight
# (layer outputs) -- the same 150 x 4 blocks as the table's transfer; then IMDB seed 0 with the table's recipe.
set -e
cd /work/wt-levers
export PYTHONPATH=/work/wt-levers
PY=/work/main/.venv/bin/python
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
COMMON="model_path=minilm model.max_seq_len=512 model.projected_dim=128 model.sharing=layerwise model.length_policy=resample model.mask_empty_windows=false model.exact_short_inputs=true transfer.short_fraction=0.5 trainer.batch_size=4 trainer.mixed_precision=no corpus_dir=/work/wt-teacher/data/processed/mirror_slice-minilm-n512"
P1=lolcats-k128-converted-p1-projections-attention
P2=lolcats-k128-converted-p2-all-hidden
[ -f outputs/transfer/$P1/summary.json ] || $PY scripts/transfer.py $COMMON transfer.train=projections transfer.target=attention trainer.max_steps=75 trainer.eval_every=75 trainer.save_every=25 run_name=$P1
[ -f outputs/transfer/$P2/summary.json ] || $PY scripts/transfer.py ${COMMON/model_path=minilm/model_path=outputs/transfer/$P1} transfer.train=all transfer.target=hidden trainer.max_steps=75 trainer.eval_every=75 trainer.save_every=25 run_name=$P2
R=lever-imdb-k128-converted-lolcats-s0
[ -f outputs/finetune/$R/results.json ] || $PY scripts/finetune.py task=imdb model_path=outputs/transfer/$P2/model seed=0 subset_seed=0 run_name=$R experiment_name=table2_pretrained_levers trainer.lr=0.0001 trainer.batch_size=16 trainer.epochs=1 trainer.max_length=512 trainer.mixed_precision=no trainer.save_best=false trainer.group_by_length=true max_train_examples=2000 max_eval_examples=2000
echo LOLCATS DONE
