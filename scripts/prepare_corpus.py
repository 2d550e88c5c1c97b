"""Tokenize and pack a corpus into blocks of n tokens: python scripts/prepare_corpus.py data=mirror"""

from omegaconf import DictConfig

from linformer.cli import hydra_main
from linformer.data.corpus import prepare_corpus
from linformer.data.io import resolve_path
from linformer.modeling.loading import resolve_tokenizer_dir


@hydra_main("corpus")
def main(cfg: DictConfig) -> None:
    d = cfg.data
    sources = [s if s.startswith("hf:") else resolve_path(s) for s in d.sources]
    # a packaged model's name (tokenizer_dir=minilm) packs blocks with that model's own tokenizer
    prepare_corpus(sources, resolve_tokenizer_dir(str(cfg.tokenizer_dir)), resolve_path(cfg.out_dir), n=d.n,
                   val_fraction=d.val_fraction, num_proc=d.num_proc, seed=d.seed, skip_bad_rows=d.skip_bad_rows,
                   max_documents=d.get("max_documents"), force=cfg.force, overwrite=cfg.overwrite)


if __name__ == "__main__":
    main()
