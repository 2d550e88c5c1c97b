"""How a run stops: SIGTERM / SIGINT between steps (``StopSignal``: checkpointed, every rank at the same step),
the words said outside the steps and after the last one, and the command that resumes it."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
from pathlib import Path

import torch
from accelerate import Accelerator

from ..cli import process_count, run_from_a_script
from ..rundir import command_env
from ..shell import shell_assignment, shell_command
from ..signals import handling, signal_words

log = logging.getLogger(__name__)


AGAIN = "SIGINT (Ctrl-C) again: stopped at once, keeping the last checkpoint"  # a second Ctrl-C's stop, as recorded


class StopSignal:
    """SIGTERM / SIGINT ask the loop to stop after the current step, checkpointed. A second Ctrl-C stops at once."""

    SIGNALS = (signal.SIGTERM, signal.SIGINT)

    def __init__(self):
        self.signum: int | None = None
        self._installed = contextlib.ExitStack()

    def __enter__(self) -> StopSignal:
        self._installed.enter_context(handling(self.SIGNALS, self._handle))
        return self

    def _handle(self, signum, frame) -> None:
        if self.signum is not None and signum == signal.SIGINT:
            raise KeyboardInterrupt(AGAIN)
        if self.signum is not None:  # torchrun's SIGTERM after the user's Ctrl-C: the stop keeps the first's name
            return
        self.signum = signum
        at_once = ("Ctrl-C again stops at once" if signum == signal.SIGINT else
                   f"a Ctrl-C, or kill -INT {os.getpid()}, stops at once")  # a second SIGTERM waits for the step
        log.warning("%s received: stopping after this step with a checkpoint (%s)", signal_words(signum), at_once)

    def __exit__(self, *exc) -> None:
        self._installed.close()

    def agreed(self, accelerator: Accelerator, save_due: bool = False) -> tuple[int | None, bool]:
        """(the signal, if any rank got one; whether any rank finds a checkpoint due), the same on every rank, so
        that they stop, or save, at the same step."""
        if accelerator.num_processes == 1:
            return self.signum, save_due
        flags = torch.tensor([self.signum or 0, int(save_due)], device=accelerator.device)
        got, due = (int(x) for x in accelerator.reduce(flags, "max").tolist())
        return got or None, bool(due)


def command_line() -> str | None:
    """The command to run again (a stop's message, run.json's ``command``); None where the run was not started by a
    script (``run_from_a_script``). Under torchrun, or a launcher built on it, the launcher with this run's number of
    processes, since a resume on another number is refused (Trainer._check_global_batch); after the variables that
    change the numbers (rundir.NUMERIC_ENV: OMP_NUM_THREADS...) and those that choose the inputs (rundir.INPUT_ENV:
    LINFORMER_CONFIG_DIR, LINFORMER_DATA_MIRROR) where they were set, so that the resumed steps compute as the first
    did, from the same configs and data, pasted into any shell."""
    if not run_from_a_script():
        return None
    env = [shell_assignment(name, value) for name, value in command_env().items()]
    world, local = process_count(), int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    if world > 1:
        nodes = [f"--nnodes={world // local}"] if world != local else []
        return " ".join([*env, shell_command("torchrun", *nodes, f"--nproc_per_node={local}", *sys.argv)])
    return " ".join([*env, shell_command(Path(sys.executable).name, *sys.argv)])


def how_to_resume(stage: str, run_dir: Path | str) -> str:
    """A stop's way to go on: the same command where a script ran the run, else the call of the stage's function
    (``linformer.train.<stage>.<stage>``, which every training stage is named after) with the same run directory."""
    command = command_line()
    if command is not None:
        return f"Resume with the same command ({command})"
    return (f"Resume by calling {stage}(spec, run_dir) again (linformer.train.{stage}) with the same spec and "
            f"run_dir={str(run_dir)!r}")


FINISHING = ("{signal} after the last update: finishing the final evaluation and saving (another SIGTERM, or "
             "Ctrl-C, stops at once)")
OUTSIDE_STEPS = ("stopped by {signal} outside the training steps (at start-up, or in the final evaluation and "
                 "saving): the run keeps its last checkpoint. Run the same command again to go on.")
