"""MLM pretraining: python scripts/pretrain.py model=tiny data=mirror_slice trainer.max_steps=300"""

__linformer_command__ = True  # one of linformer's commands, set before its import (locations.started_script)

from linformer.hydra_start import hydra_main, hydra_run_dir


@hydra_main("pretrain", resumes=True)  # a stopped run goes on from its last checkpoint
def main(cfg) -> None:
    from linformer.runconfig import PretrainSpec
    from linformer.train.pretrain import pretrain

    pretrain(PretrainSpec.read(cfg), hydra_run_dir())


if __name__ == "__main__":
    main()
