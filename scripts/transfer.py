"""Attention transfer: python scripts/transfer.py model_path=minilm model.projected_dim=128 model.sharing=layerwise"""

__linformer_command__ = True  # one of linformer's commands, set before its import (locations.started_script)

from linformer.hydra_start import hydra_main, hydra_run_dir


@hydra_main("transfer", resumes=True)  # a stopped run goes on from its last checkpoint
def main(cfg) -> None:
    from linformer.runconfig import TransferSpec
    from linformer.train.transfer import transfer

    transfer(TransferSpec.read(cfg), hydra_run_dir())


if __name__ == "__main__":
    main()
