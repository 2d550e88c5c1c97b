#!/bin/bash
# The 12k IMDB teacher lengthened to n = 4096, finetuned on the train reviews longer than 512 tokens of a 6,000-review
# subset; its k = 128 local/global twin distilled from it at n = 4096 on the same reviews; then the long-input table
# with the teacher and both distilled students (one thread each step; micro-batches of 4: 8 long reviews with full
# attention's backward took 18 GB and were killed for memory).
set -e
cd /work/wt-distill
export PYTHONPATH=/work/wt-distill OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
T=outputs/finetune/imdb-teacher-12k-n4096-long-s0
.venv/bin/python scripts/finetune.py task=imdb model_path=outputs/converted/imdb-teacher-12k-n4096 \
  min_train_tokens=512 max_train_examples=6000 max_eval_examples=200 trainer.max_length=4096 \
  trainer.batch_size=4 trainer.grad_accum=2 trainer.epochs=1 trainer.lr=2e-5 trainer.group_by_length=true \
  trainer.save_best=true trainer.save_every=20 run_name=imdb-teacher-12k-n4096-long-s0 > /tmp/longteacher.log 2>&1
echo "$(date +%T) teacher done: $(python3 -c "import json;print(json.load(open('$T/results.json'))['metrics'])")"
mkdir -p /tmp/li && ln -sfn /work/wt-distill/$T/best /tmp/li/imdb-12k-teacher-n4096-long
R=imdb-12k-long-distill-n4096-k128-local-s0
.venv/bin/python scripts/distill.py task=imdb teacher_path=$T/best \
  model.max_seq_len=4096 model.projected_dim=128 model.sharing=layerwise model.local_window=128 \
  'model.global_positions=[0,-1]' distill.min_tokens=512 distill.hidden_weight=0 distill.lr_projections=1e-4 \
  trainer.lr=1e-5 max_train_examples=6000 max_eval_examples=200 trainer.batch_size=4 trainer.grad_accum=2 \
  trainer.group_by_length=true trainer.epochs=1 trainer.max_length=4096 trainer.eval_at_start=false \
  trainer.save_every=20 run_name=$R > /tmp/longdistill.log 2>&1
echo "$(date +%T) distill done"
ln -sfn /work/wt-distill/outputs/distill/$R/model /tmp/li/imdb-12k-long-distilled-n4096
.venv/bin/python scripts/long_inputs.py --classifier /work/wt-teacher/outputs/finetune/imdb-teacher-12k-s0/best \
  --ns 2048 4096 --k 128 --examples 600 --local-windows 128 \
  --students /tmp/li/imdb-12k-distilled-n4096 /tmp/li/imdb-12k-teacher-n4096-long /tmp/li/imdb-12k-long-distilled-n4096 \
  --out docs/results/long_inputs_imdb --overwrite > /tmp/longeval.log 2>&1
echo "$(date +%T) eval done"
