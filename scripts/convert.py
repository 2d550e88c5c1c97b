"""Convert an encoder: python scripts/convert.py model_path=minilm model.projected_dim=128 model.sharing=layerwise"""

from linformer.cli import hydra_main


@hydra_main("convert")
def main(cfg) -> None:
    from linformer.modeling.convert import convert_and_report
    from linformer.spec import ConvertSpec

    spec = ConvertSpec.read(cfg)
    convert_and_report(spec.model_path, spec.out_dir, spec.model, seed=spec.seed, overwrite=spec.overwrite)


if __name__ == "__main__":
    main()
