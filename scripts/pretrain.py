"""MLM pretraining: python scripts/pretrain.py model=tiny data=mirror_slice trainer.max_steps=300"""

import hydra
from omegaconf import DictConfig

from linformer.train import cli_errors, pretrain, run_dir


@hydra.main(version_base="1.3", config_path="../configs", config_name="pretrain")
def main(cfg: DictConfig) -> None:
    with cli_errors():
        pretrain(cfg, run_dir())


if __name__ == "__main__":
    main()
