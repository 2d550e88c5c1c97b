"""What the measurement scripts (length_policy.py, long_inputs.py) share: their three outputs <out>.md, .json and
.png under the output rule, and the lines saying where and how a report was measured."""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NamedTuple

from ..argtypes import path
from ..cli import cli_errors
from ..data.io import path_root
from ..errors import ConfigError
from ..files.atomic import output_files
from ..files.locations import relative_to, repo_relative
from ..files.outputs import file_record, made_by
from ..modeling.values import CONVERTED_EXACT_KEYS
from ..shell import shell_command

EXTENSIONS = ("md", "json", "png")


def add_output_options(ap: argparse.ArgumentParser, name: str) -> None:
    """--out (default: paths.reports_dir/<name>, `name` the command ``report_outputs`` is given, read there: the
    configs a default needs are not needed for --help or an explicit --out; a path read as every command reads one,
    ``argtypes.path``: from the repository, "~" expanded, not empty) and --overwrite."""
    ap.add_argument("--out", type=path, default=None,
                    help=f"writes <out>.md, .json and .png (default: paths.reports_dir/{name}; "
                         f"{relative_to()})")
    ap.add_argument("--overwrite", action="store_true", help="replace whatever is at the output paths")


def add_exact_key_options(ap: argparse.ArgumentParser, measured: str) -> None:
    """--local-windows, --global-positions, --landmarks and --overlap: rows with exact local and global keys beside
    the projected ones, each window a row of `measured` (what the script measures with them, in its words). Their
    check and --global-positions' default: ``check_exact_key_options``."""
    default = " ".join(map(str, CONVERTED_EXACT_KEYS["global_positions"]))
    ap.add_argument("--local-windows", type=int, nargs="*", default=[],
                    help=f"also {measured} with exact local keys of these windows (w) beside the projected ones, and "
                         "the global tokens of --global-positions")
    ap.add_argument("--global-positions", type=int, nargs="*", default=None,
                    help=f"global tokens of the --local-windows rows (default {default}, the converted one: the first "
                         "and last real token)")
    ap.add_argument("--landmarks", action="store_true",
                    help="also each --local-windows row with landmark pooling (LinformerConfig.landmark_pooling)")
    ap.add_argument("--overlap", action="store_true",
                    help="also each --local-windows row with the projected columns its exact keys hold whole masked "
                         "(LinformerConfig.overlap_columns='mask', the converted default), and with every column's "
                         "count also lowered by the tokens of it they hold ('reduce')")


def check_exact_key_options(args: argparse.Namespace) -> None:
    """ConfigError for an option of ``add_exact_key_options`` that changes the --local-windows rows when none is
    named (it would be ignored without a word); sets --global-positions' default (``CONVERTED_EXACT_KEYS``)."""
    if not args.local_windows:
        for flag, does, on in (("--global-positions", "sets the global tokens of", args.global_positions is not None),
                               ("--landmarks", "changes", args.landmarks), ("--overlap", "changes", args.overlap)):
            if on:
                raise ConfigError(f"{flag} {does} the --local-windows rows: name at least one window")
    if args.global_positions is None:
        args.global_positions = list(CONVERTED_EXACT_KEYS["global_positions"])


def check_measured_settings(source: str, settings: dict, options: dict[str, str], model_class: type | None = None):
    """``convert.check_settings`` of one model a measurement script converts from `source`, a ConfigError naming the
    option at fault: `options` maps each LinformerConfig field the script's options set to its flag
    ({"local_window": "--local-windows"}). An error about one of them (its message opens with ``field=``) names that
    flag with the value given; any other names every flag."""
    from ..modeling.convert import check_settings  # the model's modules import torch: after parsing

    try:
        check_settings(source, settings, model_class, key=None)
    except ConfigError as err:
        field = re.match(r"(\w+)=", str(err))
        if field and field[1] in options and field[1] in settings:
            value = settings[field[1]]
            named = f"{options[field[1]]} " + (" ".join(map(str, value)) if isinstance(value, list) else str(value))
        else:
            named = ", ".join(dict.fromkeys(options.values()))
        raise ConfigError(f"{named}: {err}") from None


@contextlib.contextmanager
def report_outputs(args: argparse.Namespace, command: str,
                   check: Callable[[argparse.Namespace], None] | None = None,
                   suffixes: tuple[str, ...] = tuple(f".{ext}" for ext in EXTENSIONS)) -> Iterator[None]:
    """The block that measures and writes <out>.*: user errors are one `error:` line, and the output paths follow the
    output rule (an earlier report of `command` with the same options is replaced, anything else refused; a report
    written again from its JSON with ``--render`` has the options its measurement recorded). `check` refuses or
    completes the options first (``check_exact_key_options``), so the record holds the options measured with.
    The outputs are <out> with each of `suffixes`; --out left out is paths.reports_dir/<command>."""
    with cli_errors():
        if args.out is None:
            args.out = path(f"{path_root('reports_dir')}/{command}")
        outputs = [f"{args.out}{suffix}" for suffix in suffixes]
        if check is not None:
            check(args)
        settings = {k: v for k, v in vars(args).items() if k not in ("out", "overwrite")}
        rendered = getattr(args, "render", None) and file_record(args.render)
        if isinstance(rendered, dict) and rendered.get("command") == command:
            # a report written again from its JSON is that measurement's output: it replaces the report in place and
            # keeps the measurement's settings as its record
            settings = rendered.get("settings") or {}
        elif getattr(args, "render", None):  # a JSON kept without a record: the record names it, not this machine's path
            settings = {"rendered_from": repo_relative(args.render)}
        with output_files(outputs, made_by(command, settings), args.overwrite, key="--out"):
            yield


def render_main(argv: list[str], script: str, command: str, suffixes: tuple[str, ...],
                render: Callable[[str, str], None]) -> int:
    """``python <script> --render FILE [--out STEM] [--overwrite]`` for a Hydra measurement script (its other
    options are overrides, so --render is read before Hydra): the report written again by ``render(FILE, STEM)`` from
    the FILE an earlier run of `command` wrote, nothing measured; STEM defaults to FILE's, the report in place. Its
    outputs, STEM with each of `suffixes`, follow the output rule as ``report_outputs`` has it."""
    from ..cli import ArgumentParser

    ap = ArgumentParser(prog=f"python {script}", description=f"{script} --render: the report written again from "
                        "the files of an earlier run, nothing measured")
    ap.add_argument("--render", metavar="FILE", type=path, required=True,
                    help=f"what an earlier run wrote ({relative_to()}): " + " or ".join(suffixes))
    ap.add_argument("--out", type=path, help="the report's path without its endings (default: FILE's, in place)")
    ap.add_argument("--overwrite", action="store_true", help="replace whatever is at the output paths")
    args = ap.parse_args(argv)
    if args.out is None:
        args.out = str(Path(args.render).with_suffix(""))
    with report_outputs(args, command, suffixes=suffixes):
        render(args.render, args.out)
    print(f"wrote {args.out}: " + ", ".join(x for x in suffixes if Path(args.out + x).exists()))
    return 0


def asks_render(argv: list[str]) -> bool:
    """Whether a Hydra script's command line asks for ``render_main`` (--render is no Hydra override)."""
    return any(a == "--render" or a.startswith("--render=") for a in argv)


class Started(NamedTuple):
    """When a measurement began (time.perf_counter) and the machine's load average then (bench.common)."""

    time: float
    load: float | None


def start() -> Started:
    from ..bench.common import load_average

    return Started(time.perf_counter(), load_average())


def machine_words(device, started: Started) -> str:
    """A measurement's machine in words: the device, torch's threads and the CPU thread policy (threads fitted to
    the free cores or not: linformer.modeling.threads), the machine's load average at the start and now (a
    loaded CPU moves every time and ratio), and the seconds since `started` (start())."""
    import torch

    from ..bench.common import load_words
    from ..devices import device_name
    from ..modeling import threads

    return (f"{device_name(device)}, torch threads: {torch.get_num_threads()} (CPU thread policy: "
            f"{threads.get_policy()}), {load_words(started.load)}, {time.perf_counter() - started.time:.0f} s")


def provenance(script: str, started: Started) -> tuple[str, list[str]]:
    """(the command line, the report's Machine and Command lines) for a measurement begun at `started` (start())."""
    import torch

    command = shell_command("python", script, *sys.argv[1:])
    machine = f"Machine: {machine_words(torch.device('cpu'), started)}."
    return command, [machine, f"Command: `{command}`"]


def read_measured(path: str, script: str) -> dict:
    """The JSON of an earlier measurement by `script`, for ``--render``: a missing file, one that is not JSON or not
    a JSON object is a ConfigError saying which."""
    given = Path(path)
    if not given.is_file():
        raise ConfigError(f"--render {path}: " + ("is a folder, not a JSON file" if given.is_dir() else "no such file")
                          + f": give the <out>.json of an earlier {script} run.")
    try:
        data = json.loads(given.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ConfigError(f"--render {path} is not JSON ({err}): give the <out>.json of an earlier {script} "
                          "run.") from None
    if not isinstance(data, dict):
        raise ConfigError(f"--render {path} holds a JSON {type(data).__name__}, not a report: give the <out>.json "
                          f"of an earlier {script} run.")
    return data


def show(out: str) -> None:
    print(Path(f"{out}.md").read_text(encoding="utf-8"))
    print(f"wrote {out}.md, .json and .png")
