"""Distill a finetuned classifier into a Linformer:
python scripts/distill.py task=imdb teacher_path=outputs/finetune/<teacher run>/best model.projected_dim=128"""

__linformer_command__ = True  # one of linformer's commands, set before its import (locations.started_script)

from linformer.hydra_start import hydra_main, hydra_run_dir


@hydra_main("distill", resumes=True)  # a stopped run goes on from its last checkpoint
def main(cfg) -> None:
    from linformer.runconfig import DistillSpec
    from linformer.train.distill import distill

    distill(DistillSpec.read(cfg), hydra_run_dir())


if __name__ == "__main__":
    main()
