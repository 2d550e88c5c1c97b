"""Figure 1: python scripts/analyze_spectrum.py model_path=outputs/pretrain/<run>/model [corpus_dir=...] [k=32]"""

from omegaconf import DictConfig

from linformer.cli import hydra_main
from linformer.data.io import resolve_path
from linformer.report.spectrum import analyze_spectrum


@hydra_main("spectrum")
def main(cfg: DictConfig) -> None:
    r = analyze_spectrum(
        resolve_path(cfg.model_path), resolve_path(cfg.out_dir), cfg.prefix,
        corpus_dir=resolve_path(cfg.corpus_dir) if cfg.corpus_dir else None,
        text_path=resolve_path(cfg.text_path) if cfg.text_path else None,
        num_windows=cfg.num_windows, batch_size=cfg.batch_size, k=cfg.k, seed=cfg.seed,
        max_lines=cfg.max_lines, device=cfg.device, description=cfg.description,
        overwrite=cfg.overwrite)
    print(f"n={r['n']} k={r['k']}: cumulative value at k per layer {r['mean_value_at_k_per_layer']}; "
          f"wrote {cfg.out_dir}/{cfg.prefix}.json and {', '.join(r['plots'])}")


if __name__ == "__main__":
    main()
