"""Train the byte-level BPE tokenizer: python scripts/train_tokenizer.py [data=mirror] [vocab_size=...]"""

from omegaconf import DictConfig

from linformer.cli import hydra_main
from linformer.data.io import resolve_path
from linformer.data.tokenizer import train_tokenizer


@hydra_main("tokenizer")
def main(cfg: DictConfig) -> None:
    train_tokenizer([resolve_path(f) for f in cfg.files], resolve_path(cfg.out_dir), vocab_size=cfg.vocab_size,
                    min_frequency=cfg.min_frequency, max_lines=cfg.max_lines, show_progress=cfg.show_progress,
                    overwrite=cfg.overwrite)


if __name__ == "__main__":
    main()
