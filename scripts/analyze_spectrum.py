"""Figure 1, the attention matrix P's singular values:
python scripts/analyze_spectrum.py model_path=outputs/pretrain/<run>/model [corpus_dir=...] [k=32]
python scripts/analyze_spectrum.py --render PREFIX.json [--out PREFIX]   (the plots again from the JSON, nothing
measured)
"""

import sys

from omegaconf import DictConfig

from linformer.hydra_start import hydra_main
from linformer.report import measured, spectrum
from linformer.report.spectrum import analyze_spectrum
from linformer.runconfig.data import SpectrumSpec
from linformer.shell import shell_command


@hydra_main("spectrum")
def main(cfg: DictConfig) -> None:
    spec = SpectrumSpec.read(cfg)
    r = analyze_spectrum(**spec.arguments(), command=shell_command("python", "scripts/analyze_spectrum.py", *sys.argv[1:]))
    print(f"n={r['n']} k={r['k']}: cumulative value at k per layer {r['mean_value_at_k_per_layer']}; "
          f"wrote {spec.out_dir}/{spec.prefix}.json and {', '.join(r['plots'])}")


if __name__ == "__main__":
    if measured.asks_render(sys.argv[1:]):
        sys.exit(measured.render_main(sys.argv[1:], "scripts/analyze_spectrum.py", "analyze_spectrum",
                                      ("_curves.png", "_heatmap.png", ".json"), spectrum.render))
    main()
