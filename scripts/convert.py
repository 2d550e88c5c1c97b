"""Convert an encoder: python scripts/convert.py model_path=minilm model.projected_dim=128 model.sharing=layerwise"""

__linformer_command__ = True  # one of linformer's commands, set before its import (locations.started_script)

from linformer.hydra_start import hydra_main


@hydra_main("convert")
def main(cfg) -> None:
    from linformer.modeling.convert import convert_and_report
    from linformer.runconfig import ConvertSpec

    convert_and_report(ConvertSpec.read(cfg), cfg.get("imports") or [])


if __name__ == "__main__":
    main()
