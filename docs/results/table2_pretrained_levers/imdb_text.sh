#!/bin/bash
# As run on 2026-11-25 from a git worktree of this repository at /work/wt-levers (acf2256), beside the data
# mirror at /work/shared/data and the experiment's worktree /work/wt-teacher: adjust those paths to rerun it.
# Transfer on IMDB's own unlabeled text: the table's k=128 converted-policy transfer (150 steps x 4 blocks of 512
# tokens, every weight, layer outputs) on IMDB train reviews instead of the mirror corpus; then IMDB seed 0 with the
# table's recipe. Waits for the LoLCATs lever to finish (two jobs beside the plan's two at most).
set -e
while pgrep -f lolcats.sh >/dev/null; do sleep 20; done
cd /work/wt-levers
export PYTHONPATH=/work/wt-levers OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
PY=/work/main/.venv/bin/python
mkdir -p data/imdb_text
[ -f data/imdb_text/train.txt ] || $PY - <<'PYEOF'
import csv, re
# one review a document (blank line between), <br /> tags stripped as the task loader does; labels unused
with open("/work/shared/data/imdb/train.csv", newline="") as f, open("data/imdb_text/train.txt", "w") as out:
    for row in csv.DictReader(f):
        text = re.sub(r"<br\s*/?>", " ", row["text"]).strip()
        out.write(" ".join(text.split()) + "\n\n")
PYEOF
C=data/processed/imdb_text-minilm-n512
[ -f $C/manifest.json ] || $PY scripts/prepare_corpus.py data=mirror "data.sources=[data/imdb_text/train.txt]" data.name=imdb_text data.n=512 data.num_proc=1 tokenizer_dir=minilm out_dir=$C
T=imdbtext-k128-converted-all-hidden
[ -f outputs/transfer/$T/summary.json ] || $PY scripts/transfer.py model_path=minilm model.max_seq_len=512 model.projected_dim=128 model.sharing=layerwise model.length_policy=resample model.mask_empty_windows=false model.exact_short_inputs=true transfer.train=all transfer.target=hidden transfer.short_fraction=0.5 trainer.max_steps=150 trainer.batch_size=4 trainer.eval_every=150 trainer.save_every=37 trainer.mixed_precision=no corpus_dir=$C run_name=$T
R=lever-imdb-k128-converted-imdbtext-s0
[ -f outputs/finetune/$R/results.json ] || $PY scripts/finetune.py task=imdb model_path=outputs/transfer/$T/model seed=0 subset_seed=0 run_name=$R experiment_name=table2_pretrained_levers trainer.lr=0.0001 trainer.batch_size=16 trainer.epochs=1 trainer.max_length=512 trainer.mixed_precision=no trainer.save_best=false trainer.group_by_length=true max_train_examples=2000 max_eval_examples=2000
echo IMDBTEXT DONE
