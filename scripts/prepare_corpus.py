"""Tokenize and pack a corpus into blocks of n tokens: python scripts/prepare_corpus.py data=mirror"""

__linformer_command__ = True  # one of linformer's commands, set before its import (locations.started_script)

from linformer.hydra_start import hydra_main


@hydra_main("corpus")
def main(cfg) -> None:
    from linformer.data.corpus import prepare_corpus  # the work's modules (torch): after the command line
    from linformer.runconfig.data import CorpusSpec

    prepare_corpus(**CorpusSpec.read(cfg).arguments())


if __name__ == "__main__":
    main()
