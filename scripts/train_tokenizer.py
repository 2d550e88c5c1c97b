"""Train the byte-level BPE tokenizer: python scripts/train_tokenizer.py [data=mirror] [vocab_size=...]"""

from omegaconf import DictConfig

from linformer.data.tokenizer import train_tokenizer
from linformer.hydra_start import hydra_main
from linformer.runconfig.data import TokenizerSpec


@hydra_main("tokenizer")
def main(cfg: DictConfig) -> None:
    train_tokenizer(**TokenizerSpec.read(cfg).arguments())


if __name__ == "__main__":
    main()
