"""Tokenize and pack a corpus into blocks of n tokens: python scripts/prepare_corpus.py data=mirror"""

from omegaconf import DictConfig

from linformer.data.corpus import prepare_corpus
from linformer.hydra_start import hydra_main
from linformer.runconfig.data import CorpusSpec


@hydra_main("corpus")
def main(cfg: DictConfig) -> None:
    prepare_corpus(**CorpusSpec.read(cfg).arguments())


if __name__ == "__main__":
    main()
