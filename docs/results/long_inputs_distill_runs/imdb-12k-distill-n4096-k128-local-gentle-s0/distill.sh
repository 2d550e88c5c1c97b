#!/bin/bash
# Distil the 12k IMDB teacher, lengthened to n = 4096, into its k = 128 local/global Linformer twin on the IMDB
# train reviews longer than 512 tokens (one thread; resumable: run again after a stop).
export PYTHONPATH=/work/wt-distill OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
exec .venv/bin/python scripts/distill.py task=imdb teacher_path=outputs/converted/imdb-teacher-12k-n4096 \
  model.max_seq_len=4096 model.projected_dim=128 model.sharing=layerwise model.local_window=128 \
  'model.global_positions=[0,-1]' distill.min_tokens=512 distill.hidden_weight=1.0 max_train_examples=12500 \
  max_eval_examples=200 trainer.batch_size=8 trainer.group_by_length=true trainer.epochs=1 trainer.max_length=4096 \
  run_name=imdb-12k-distill-n4096-k128-local-s0 "$@"
