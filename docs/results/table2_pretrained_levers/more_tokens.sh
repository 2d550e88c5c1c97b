#!/bin/bash
# As run on 2026-11-25 from a git worktree of this repository at /work/wt-levers (acf2256), beside the data
# mirror at /work/shared/data and the experiment's worktree /work/wt-teacher: adjust those paths to rerun it.
# More tokens: the table's k=128 converted-policy transfer with 4x the steps (600 x 4 blocks of 512 tokens of the
# mirror corpus, every weight, layer outputs), then IMDB seed 0 with the table's recipe.
set -e
cd /work/wt-levers
export PYTHONPATH=/work/wt-levers OMP_NUM_THREADS=2 MKL_NUM_THREADS=2
PY=/work/main/.venv/bin/python
T=moretokens-k128-converted-all-hidden-600
[ -f outputs/transfer/$T/summary.json ] || $PY scripts/transfer.py model_path=minilm model.max_seq_len=512 model.projected_dim=128 model.sharing=layerwise model.length_policy=resample model.mask_empty_windows=false model.exact_short_inputs=true transfer.train=all transfer.target=hidden transfer.short_fraction=0.5 trainer.max_steps=600 trainer.batch_size=4 trainer.eval_every=600 trainer.save_every=100 trainer.mixed_precision=no corpus_dir=/work/wt-teacher/data/processed/mirror_slice-minilm-n512 run_name=$T
R=lever-imdb-k128-converted-moretokens-s0
[ -f outputs/finetune/$R/results.json ] || $PY scripts/finetune.py task=imdb model_path=outputs/transfer/$T/model seed=0 subset_seed=0 run_name=$R experiment_name=table2_pretrained_levers trainer.lr=0.0001 trainer.batch_size=16 trainer.epochs=1 trainer.max_length=512 trainer.mixed_precision=no trainer.save_best=false trainer.group_by_length=true max_train_examples=2000 max_eval_examples=2000
echo MORETOKENS DONE
