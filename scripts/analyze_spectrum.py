"""Figure 1, the attention matrix P's singular values:
python scripts/analyze_spectrum.py model_path=outputs/pretrain/<run>/model [corpus_dir=...] [k=32]
python scripts/analyze_spectrum.py --render PREFIX.json [--out PREFIX]   (the plots again from the JSON, nothing
measured)
"""

__linformer_command__ = True  # one of linformer's commands, set before its import (locations.started_script)

import sys

from linformer.hydra_start import hydra_main
from linformer.report import measured


@hydra_main("spectrum")
def main(cfg) -> None:
    from linformer.report.spectrum import analyze_spectrum  # the work's modules (torch): after the command line
    from linformer.runconfig.data import SpectrumSpec
    from linformer.shell import shell_command

    spec = SpectrumSpec.read(cfg)
    r = analyze_spectrum(**spec.arguments(), command=shell_command("python", "scripts/analyze_spectrum.py", *sys.argv[1:]))
    print(f"n={r['n']} k={r['k']}: cumulative value at k per layer {r['mean_value_at_k_per_layer']}; "
          f"wrote {spec.out_dir}/{spec.prefix}.json and {', '.join(r['plots'])}")


def render(json_path: str, out: str) -> None:
    """The plots again from the JSON (``measured.render_main``), the report's modules imported once it is asked."""
    from linformer.report import spectrum

    spectrum.render(json_path, out)


if __name__ == "__main__":
    if measured.asks_render(sys.argv[1:]):
        sys.exit(measured.render_main(sys.argv[1:], "scripts/analyze_spectrum.py", "analyze_spectrum",
                                      ("_curves.png", "_heatmap.png", ".json"), render))
    main()
