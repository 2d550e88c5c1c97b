"""Export a run's model from a checkpoint: python scripts/export.py outputs/{finetune,pretrain}/<run> [--step N]

The run's checkpoint (its newest intact one, or --step's) as a save_pretrained directory with its tokenizer: what
<run>/best holds for finetuning runs made with trainer.save_best=true, and what a pretraining run stopped before its
end would have saved in <run>/model. argparse, not Hydra: the run is a positional path.
"""

__linformer_command__ = True  # one of linformer's commands, set before its import (locations.started_script)

from linformer.argtypes import path
from linformer.cli import ArgumentParser, cli_errors
from linformer.files.locations import relative_to
from linformer.script_help import description


def main(argv: list[str] | None = None) -> None:
    p = ArgumentParser(description=description(__doc__, __file__))
    p.add_argument("run", type=path,
                   help="a finetuning or pretraining run directory (outputs/{finetune,pretrain}/<run_name>; "
                        f"{relative_to()})")
    p.add_argument("--step", type=int, default=None, help="the checkpoint's update step (default: the newest intact)")
    p.add_argument("--out", type=path, default=None, help="output directory (default: <run>/model for a finetuning run's final "
                                              "step, <run>/model-step-NNNNNNNN otherwise)")
    p.add_argument("--overwrite", action="store_true", help="replace --out when another command wrote it")
    p.add_argument("--imports", type=lambda text: [name for name in text.split(",") if name], default=[],
                   metavar="MODULE[,MODULE]",
                   help="modules of your own to import first, where the run's projection, sharing mode or task "
                        "registers (those its config.yaml records under imports: they are never imported from it)")
    args = p.parse_args(argv)
    # the work's modules (torch, transformers): imported once the command line is read
    from linformer.train.export import export_run

    with cli_errors():
        done = export_run(args.run, args.out, args.step, args.overwrite, args.imports)
    what = "the final step" if done["final"] else "not the run's final step"
    score = ", ".join(f"{k} {v:.4f}" for k, v in (done["metrics"] or {}).items())
    print(f"wrote {done['out']}: step {done['step']} ({what}) from {done['checkpoint']}"
          + (f"; the run reports {score} at this step" if score else ""))


if __name__ == "__main__":
    main()
