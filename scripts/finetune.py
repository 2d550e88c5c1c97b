"""Finetuning: python scripts/finetune.py task=sst2 model_path=outputs/pretrain/<run>"""

__linformer_command__ = True  # one of linformer's commands, set before its import (locations.started_script)

from linformer.hydra_start import hydra_main, hydra_run_dir


@hydra_main("finetune", resumes=True)  # a stopped run goes on from its last checkpoint
def main(cfg) -> None:
    from linformer.runconfig import FinetuneSpec
    from linformer.train.finetune import finetune

    finetune(FinetuneSpec.read(cfg), hydra_run_dir())


if __name__ == "__main__":
    main()
