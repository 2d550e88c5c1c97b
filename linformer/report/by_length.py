"""Where a variant loses against the teacher: the paired difference by input length.

The eval examples of a task are split into length quartiles (tokens after truncation, with the source's
tokenizer), and each row is compared with the teacher on the same examples inside each quartile, with the main
table's pairing: each seed against the teacher's same seed, with the same interval over seeds and examples
(``paired.seed_example_interval`` over the per-seed differences). A projection that compresses every input by n/k costs
short and long inputs differently; this is where that shows.

The lengths come from the finished runs themselves: ``eval_lengths`` rebuilds a run's eval split from its
``config.yaml`` (same data, subset and tokenizer) and checks its labels against the run's predictions file.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import numpy as np

from .. import plots
from ..data.io import data_mirror_words, default_data_mirror, in_this_mirror
from ..data.streams import token_lengths
from ..data.task_readers import read_task_split
from ..data.task_splits import shared_texts, subset_rows
from ..data.tasks import get_task
from ..data.tokenizer import load_tokenizer
from ..errors import DataError
from ..files.atomic import save_figure
from ..files.locations import resolve_path
from ..files.runs import CONFIG, read_record
from ..files.tables import table_lines
from ..modeling.card import read_card_info
from ..modeling.loading import resolve_model_path
from ..runconfig import TaskData
from ..rundir import read_recorded_config
from ..train.finetune import task_splits
from .paired import MIN_INTERVAL_EXAMPLES, ONE_SEED_PAIR, TWO_SEED_PAIRS, fmt1, interval_text, seed_example_interval

QUARTILES = 4


def eval_lengths(run: dict) -> np.ndarray:
    """Tokens per eval example of a finished finetuning run (``read_runs`` dict), in eval-split order."""
    data = eval_data(run)
    tokenizer = load_tokenizer(_tokenizer_path(run), "model_path")
    split = task_splits(data, tokenizer, int(run["max_length"]), splits=("eval",))["eval"]
    if not np.array_equal(np.asarray(split["labels"]), run.get("_all_labels", run["_labels"])):
        raise DataError(f"{run['_dir']}: its config.yaml no longer gives the examples it was evaluated on "
                        f"(task data at {data.data_dir} changed?)")
    return token_lengths(split)


def eval_data(run: dict) -> TaskData:
    """The task data ``eval_lengths`` reads for `run`; refused in one line (naming LINFORMER_DATA_MIRROR and
    --no-by-length) where it is not here, so a report can ask before any other work."""
    return _task_data(run, "the difference by input length rebuilds the eval examples from it (skip that section "
                           "with --no-by-length)")


def trained_on_eval(run: dict) -> np.ndarray:
    """For a run recorded before training dropped the eval split's duplicates (no ``eval_duplicates_dropped`` in
    its results): which of its eval examples it also trained on (the same text in its train rows, rebuilt from its
    config.yaml as that run drew them), in eval-split order."""
    data = _task_data(run, "finding the eval examples the run also trained on rebuilds its train and eval rows "
                           "from it")
    fields = get_task(data.name).text_fields
    train = subset_rows(read_task_split(data.name, data.data_dir, "train", data.skip_bad_rows)[0],
                        data.max_train_examples, data.subset_seed)
    held = subset_rows(read_task_split(data.name, data.data_dir, "eval", data.skip_bad_rows)[0],
                       data.max_eval_examples, data.subset_seed)
    if not np.array_equal(np.asarray(held["labels"]), run["_labels"]):
        raise DataError(f"{run['_dir']}: its config.yaml no longer gives the examples it was evaluated on "
                        f"(task data at {data.data_dir} changed?)")
    return shared_texts(held, train, fields)


def _task_data(run: dict, needed_for: str) -> TaskData:
    """The run's task data, read from its config.yaml as the run's own record (``rundir.read_recorded_config``);
    a missing config, or task data that is not here, is refused in one line naming what it is `needed_for`. A path
    the record names under the data mirror it records (``io.in_this_mirror``) is read from this machine's mirror
    (LINFORMER_DATA_MIRROR), as a newer record's ``${paths.data_mirror}/...`` is. A run finished on another machine
    (a GPU node reading its own copy of the mirror) may name a data_dir whose files are not here: then the same task
    under this machine's mirror; the labels check in eval_lengths still tells if those are other examples."""
    if not (Path(run["_dir"]) / CONFIG).is_file():
        raise DataError(f"{Path(run['_dir']) / CONFIG} is missing: {needed_for}")
    data = read_recorded_config(run["_dir"], TaskData.read)
    if not data.data_dir:  # the hub's dataset
        return data
    task_spec = get_task(data.name)
    record = read_record(run["_dir"], CONFIG)
    recorded, named = data.data_dir, (record.get("task") or {}).get("data_dir")
    mirrored = in_this_mirror(recorded, (record.get("paths") or {}).get("data_mirror"))
    if mirrored is not None:
        data = dataclasses.replace(data, data_dir=mirrored)
    elif task_spec.mirror_subdir and not (Path(recorded) / task_spec.files["eval"]).exists():
        here = Path(default_data_mirror()) / task_spec.mirror_subdir
        if (here / task_spec.files["eval"]).is_file():
            data = dataclasses.replace(data, data_dir=str(here))
    if not Path(data.data_dir).is_dir():
        where = (f"{data.data_dir}: the run recorded {named} in its data mirror, read from this machine's, "
                 f"{data_mirror_words()}" if data.data_dir != recorded else f"{recorded}, as the run recorded it")
        raise DataError(f"task {data.name}'s data is not at {where}. {needed_for[0].upper()}{needed_for[1:]}: set "
                        "LINFORMER_DATA_MIRROR to the folder that holds the data mirror")
    return data


def _tokenizer_path(run: dict) -> str:
    """The run's model directory, or, for kept records whose model is gone (a fresh clone), the source its card
    names (a converted model keeps its source's tokenizer)."""

    if Path(resolve_path(run["model_path"])).is_dir():  # a kept record names it relative to the repository
        return resolve_path(run["model_path"])
    source = (read_card_info(run["_dir"]).get("source") or {}).get("name")
    if source is None:
        raise DataError(f"{run['model_path']} (the model of {run['_dir']}) is gone and its records name no source "
                        "tokenizer: the difference by input length needs one (skip it with --no-by-length)")
    return resolve_model_path(source)


def quartile_edges(lengths: np.ndarray) -> list[int]:
    """Upper token counts of the first three quartiles, less any that would leave a bucket empty: many IMDB reviews
    hit max_length (an edge at the longest length has nothing above it), all inputs may have one length, and an
    interpolated quartile of a few lengths can fall between two of them."""
    lengths = np.asarray(lengths)
    edges: list[int] = []
    for edge in sorted({int(x) for x in np.quantile(lengths, [q / QUARTILES for q in range(1, QUARTILES)])}):
        below = lengths <= edge
        if edges:
            below &= lengths > edges[-1]
        if below.any() and (lengths > edge).any():
            edges.append(edge)
    return edges


def bucket_labels(edges: list[int], longest: int) -> list[str]:
    lows = [1] + [e + 1 for e in edges]
    highs = [*edges, longest]
    return [f"{lo}-{hi}" for lo, hi in zip(lows, highs)]


def by_length(lengths: np.ndarray, teacher: np.ndarray, rows: dict[str, np.ndarray]) -> dict:
    """``teacher``: per-example correctness averaged over its seeds (0..1); each of ``rows``: seeds x examples,
    a row's correctness minus the teacher's same seed's (``seed_matched``'s pairs), in eval order. Returns the
    buckets, the teacher's accuracy in each and every row's difference in each (points, seed-aware interval)."""
    lengths = np.asarray(lengths)
    edges = quartile_edges(lengths)
    bucket = np.searchsorted(edges, lengths, side="left")  # length <= edges[i] -> bucket i
    masks = [bucket == b for b in range(len(edges) + 1)]
    return {
        "buckets": bucket_labels(edges, int(lengths.max())),
        "examples": [int(m.sum()) for m in masks],
        "teacher_acc": [100 * float(teacher[m].mean()) for m in masks],
        "rows": {name: [_difference(np.atleast_2d(d)[:, m]) for m in masks] for name, d in rows.items()},
    }


def _difference(d: np.ndarray) -> dict:
    interval = seed_example_interval(d)
    return {"diff": interval["mean"], "lo": interval["lo"], "hi": interval["hi"], "seeds": interval["seeds"]}


def to_markdown(task_name: str, result: dict) -> list[str]:
    head = [task_name, *(f"{b} tokens ({n})" for b, n in zip(result["buckets"], result["examples"]))]
    rows = [["teacher accuracy", *(fmt1(a) for a in result["teacher_acc"])]]
    rows += [[name + _seeds_mark(diffs),
              *(f"{fmt1(d['diff'], True)} {interval_text(d['lo'], d['hi'], n, True)}"
                for d, n in zip(diffs, result["examples"]))]
             for name, diffs in result["rows"].items()]
    return table_lines(head, rows)


def _seeds_mark(diffs: list[dict]) -> str:
    """A by-length row's mark where its seed pairs give less than a 95% interval over seeds and examples claims
    (``paired.comparison_notes``' words; these cells print no p)."""
    seeds = diffs[0]["seeds"] if diffs else 0
    return {1: f" ({ONE_SEED_PAIR})", 2: f" ({TWO_SEED_PAIRS})"}.get(seeds, "")


ONE_SEED = " (one seed pair)"  # a legend entry's mark of a row whose interval is over examples only
ONE_SEED_BAR = "--"  # the line style of such a row's bars: dashed, and so never a row's line style (K_STYLES)
# a row's line style by its k, the largest solid: never ONE_SEED_BAR's dashes, so that a dashed bar and a smaller
# k's line never read alike
K_STYLES = ("-", ":", "-.", (0, (3, 1, 1, 1, 1, 1)))


def plot(results: dict[str, dict], task_names: dict[str, str], path: str, title: str = "") -> None:
    """One panel per task: each row's difference from the teacher by length quartile, with its 95% interval where
    the table gives one (a bucket of fewer than MIN_INTERVAL_EXAMPLES examples: a hollow point, no bar). A row
    keeps its style in every figure of the same rows (row_styles: a policy's colour and marker, a line style per k);
    words every row's name shares are said once, in the legend's title. A row of one seed pair (no seed variance: an
    interval over examples only, as the table says) draws its bars dashed and says so in the legend. `title` (the
    teacher, the profile, the machine) above the panels."""
    names = sorted({name for res in results.values() for name in res["rows"]})
    colour, marker, line = row_styles(names)
    shown, shared = short_names(names)
    fig, axes = plots.figure(len(results), size=(6.0 * len(results), 4.6))
    handles, unjudged, one_seed = {}, False, set()
    for ax, (task, res) in zip(axes[0], results.items()):
        x = np.arange(len(res["buckets"]))
        # a bucket the table gives no interval (too few examples: paired.interval_text) has no bar either, and
        # its point is hollow
        judged = np.array([n >= MIN_INTERVAL_EXAMPLES for n in res["examples"]])
        unjudged |= not judged.all()
        for name, diffs in res["rows"].items():
            i = names.index(name)
            shift = (i - (len(names) - 1) / 2) * 0.05
            mid = np.array([d["diff"] for d in diffs])
            err = np.array([[d["diff"] - d["lo"] for d in diffs], [d["hi"] - d["diff"] for d in diffs]])
            handles[name], = ax.plot(x + shift, mid, color=colour[name], marker=marker[name], ms=5,
                                     linestyle=line[name], markevery=list(judged))
            if judged.any():
                bars = ax.errorbar((x + shift)[judged], mid[judged], yerr=err[:, judged], fmt="none", capsize=2,
                                   color=colour[name])
                if diffs and diffs[0]["seeds"] == 1:  # as to_markdown's "(one seed pair: ...)"
                    one_seed.add(name)
                    for lines in bars.lines[2]:
                        lines.set_linestyle(ONE_SEED_BAR)
            if not judged.all():
                ax.plot((x + shift)[~judged], mid[~judged], linestyle="none", marker=marker[name], ms=5,
                        color=colour[name], markerfacecolor="white")
        ax.axhline(0, color="black", lw=0.8)
        ax.set_xticks(x, plots.count_ticks(res["buckets"], res["examples"]))
        ax.set_xlabel("input length in tokens (examples)")
        ax.set_ylabel("accuracy minus the teacher's (points)")
        plots.title(ax, f"{task_names.get(task, task)}: paired difference by input length")
        ax.grid(alpha=0.3)
    drawn = [n for n in names if n in handles]
    extra_handles, extra_labels = [], []
    if unjudged:
        from matplotlib.lines import Line2D

        extra_handles.append(Line2D([], [], linestyle="none", marker="o", ms=4, color="grey", markerfacecolor="white"))
        extra_labels.append(f"hollow, no bar: under {MIN_INTERVAL_EXAMPLES} examples, no interval (as the table)")
    if one_seed:
        from matplotlib.lines import Line2D

        extra_handles.append(Line2D([], [], color="grey", linestyle=ONE_SEED_BAR))
        extra_labels.append(f"dashed bar{ONE_SEED}: no seed variance, an interval over examples only")
    if title:
        plots.title(fig, title)
    plots.legend_below(fig, [handles[n] for n in drawn] + extra_handles,
                       [shown[n] + (ONE_SEED if n in one_seed else "") for n in drawn] + extra_labels,
                       title=f"every row: {shared}" if shared else None)
    save_figure(fig, path)


def row_styles(names: list[str]) -> tuple[dict, dict, dict]:
    """({name: colour}, {name: marker}, {name: line style}): a policy has one colour and marker at every k (its rows
    in the names' sorted order of policies), and its rows at different k differ by line style (the largest k
    solid, then dotted, dash-dot and dash-dot-dot: K_STYLES, none dashed as a one-seed row's bars are), so that a
    reader pairs a policy's k=128 and k=64 rows and tells them apart."""
    policy = {name: re.sub(r"\bk=\d+,? ?", "", name) for name in names}
    ks = {name: int(m.group(1)) if (m := re.search(r"\bk=(\d+)", name)) else 0 for name in names}
    policies = sorted(set(policy.values()))
    colour = dict(zip(policies, plots.colours(len(policies))))
    marker = dict(zip(policies, plots.markers(len(policies))))
    order = sorted(set(ks.values()), reverse=True)
    return ({n: colour[policy[n]] for n in names}, {n: marker[policy[n]] for n in names},
            {n: K_STYLES[order.index(ks[n]) % len(K_STYLES)] for n in names})


def short_names(names: list[str]) -> tuple[dict[str, str], str]:
    """({name: the name less the words every name shares at its start and its end}, those words), for a legend
    whose entries differ where the rows do; names alone or with nothing in common are kept whole."""
    cut = [n.removeprefix("linformer ") for n in names]
    if len(cut) < 2:
        return dict(zip(names, cut)), ""
    words = [n.split(" ") for n in cut]
    head = 0
    while all(len(w) > head + 1 and w[head] == words[0][head] for w in words):
        head += 1
    tail = 0
    while all(len(w) > head + tail + 1 and w[-1 - tail] == words[0][-1 - tail] for w in words):
        tail += 1
    shared = " ".join([*words[0][:head], "...", *words[0][len(words[0]) - tail:]]) if head or tail else ""
    return {n: " ".join(w[head:len(w) - tail]).strip(", ") for n, w in zip(names, words)}, shared
