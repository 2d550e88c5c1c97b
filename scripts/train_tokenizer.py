"""Train the byte-level BPE tokenizer: python scripts/train_tokenizer.py [data=mirror] [vocab_size=...]"""

__linformer_command__ = True  # one of linformer's commands, set before its import (locations.started_script)

from linformer.hydra_start import hydra_main


@hydra_main("tokenizer")
def main(cfg) -> None:
    from linformer.data.tokenizer import train_tokenizer  # the work's modules (torch): after the command line
    from linformer.runconfig.data import TokenizerSpec

    train_tokenizer(**TokenizerSpec.read(cfg).arguments())


if __name__ == "__main__":
    main()
