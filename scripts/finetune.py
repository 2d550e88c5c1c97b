"""Finetuning: python scripts/finetune.py task=sst2 model_path=outputs/pretrain/<run>"""

import hydra
from omegaconf import DictConfig

from linformer.train import cli_errors, finetune, run_dir


@hydra.main(version_base="1.3", config_path="../configs", config_name="finetune")
def main(cfg: DictConfig) -> None:
    with cli_errors():
        finetune(cfg, run_dir())


if __name__ == "__main__":
    main()
