"""Free a finished run's disk: python scripts/prune_checkpoints.py outputs/pretrain/<run> [more runs or folders]

Removes the checkpoints/ of each complete run named (or found under a folder named: outputs/ for every run), whose
model (model/ or best/) is intact (by its checksums; one saved without them, by an earlier version, by comparing its
weights with the run's checkpoints'): a complete run keeps trainer.keep_last full checkpoints (weights and optimizer
state, ~3x the model each) that only continuing it further needs. run.json records the removal, so that a later start
of the run says its checkpoints were removed instead of training it again from step 0. A run not complete (its
checkpoints continue it), one a live process holds, or one whose model is gone or never kept is left as it is,
saying why, one pruned before is said to be (when, what it freed) and not counted again, and the others pruned;
the exit status is 0 then too (a folder of runs usually holds some still
training or to be continued: leaving them is the command working), 2 for a path that names no run (nothing
pruned). argparse, not Hydra: the runs are positional paths that the shell expands from globs.
"""

__linformer_command__ = True  # one of linformer's commands, set before its import (locations.started_script)


from linformer.cli import ArgumentParser, cli_errors
from linformer.errors import LinformerError
from linformer.script_help import description

if __name__ == "__main__":
    p = ArgumentParser(description=description(__doc__, __file__))
    p.add_argument("runs", nargs="+", help="run directories, or folders of them (outputs/pretrain, outputs)")
    args = p.parse_args()
    # the work's modules (torch, transformers): imported once the command line is read
    from linformer.files.runs import already_pruned
    from linformer.rundir import find_runs, named_paths
    from linformer.train.checkpoint import prune_checkpoints

    with cli_errors():  # the pruning is the command's work: a stop there stops the command, not its start
        runs = find_runs(named_paths(args.runs), strict=True)
        total, pruned, before, kept = 0, 0, 0, 0
        for run in runs:
            earlier = already_pruned(run)
            if earlier is not None:
                print(f"already pruned {run}: {earlier}")
                before += 1
                continue
            try:
                count, freed = prune_checkpoints(run)
            except LinformerError as err:
                print(f"kept {run}: {err}")
                kept += 1
                continue
            total += freed
            pruned += 1
            print(f"pruned {run}: {count} checkpoint{'s' * (count != 1)}, {freed / 1e6:,.1f} MB")
        print(f"freed {total / 1e6:,.1f} MB in {pruned} run{'s' * (pruned != 1)}"
              + (f"; {before} already pruned" if before else "")
              + (f"; kept {kept} as {'they were' if kept > 1 else 'it was'} (above)" if kept else ""))
