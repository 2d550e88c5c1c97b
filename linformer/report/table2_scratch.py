"""Table 2 from the framework's own pretraining (``make reproduce-scratch``): every row's SST-2 and IMDB accuracy over
its seeds, its seed-matched difference from full attention, what pretraining adds over the same model finetuned
without it, and Figure 3a from the same pretraining runs; the targets of ``experiments.scratch`` judged on them.

Reads the kept records of one profile: finetuning runs (results.json, eval_predictions.json) and pretraining runs
(summary.json, metrics.jsonl, start.json). Every comparison pairs each seed with the reference's same seed
(``paired.seed_matched``; a two-task average through ``paired.tasks_average``). Refused, in one line: runs chosen on
the reported split, a row whose runs started from several weights, or from weights other than its row's kept
pretraining, and runs of one task scored on different examples.
"""

from __future__ import annotations

import contextlib
import statistics
from collections import defaultdict
from pathlib import Path

import numpy as np

from .. import plots
from ..data.tasks import PAPER_ORDER, TITLES
from ..errors import DataError
from ..experiments import scratch as exp
from ..files.atomic import atomic_write, save_figure, write_json
from ..files.locations import resolve_path
from ..files.mappings import read_json
from ..files.runs import RESULTS, SUMMARY, read_record
from ..files.tables import table_lines, table_row
from ..modeling.configuration import SIZE_FIELDS
from ..modeling.values import projects_keys
from ..rundir import find_runs, load_run, named_paths
from .compare import series
from .curves import PLATEAU_LABEL
from .figure3 import figure3_data
from .paired import (
    comparison_text,
    fmt1,
    interval_text,
    one_seed_p,
    pairing_prose,
    seed_example_interval,
    seed_matched,
    seeds_note,
    target_verdict,
    tasks_average,
)
from .rows import check_profile_runs, made_on, one_run_per_seed, row_key, row_name, row_order
from .table2_pretrained import read_runs, start_weights


def pretraining_records(patterns: list[str]) -> list[Path]:
    """The kept pretraining runs among the records at or under the paths or globs (a summary.json, no results.json)."""
    return [d for d in find_runs(named_paths(patterns)) if (d / SUMMARY).is_file() and not (d / RESULTS).is_file()]


def _row_key(r: dict) -> tuple:
    """table2's row key without the model's size: every run of the plan trains one size (its profile's), which a
    row's name need not repeat, and full attention's key stays the one its pretraining gain is read from."""
    *key, variant = row_key(r)
    return (*key, tuple((f, v) for f, v in variant if f not in SIZE_FIELDS))


def _name(key: tuple) -> str:
    """table2's row name without its RoBERTa label: here full attention is this framework's own model."""
    return row_name(key).replace(" (RoBERTa)", "")


def check_starts(rows: dict, records: dict[str, Path]) -> dict:
    """{row name: its start} after the refusals: one start per row, and it is the kept pretraining's weights."""
    starts = {}
    for key, runs in rows.items():
        name = _name(key)
        starts[name] = start_weights(runs, name, {})
        if not key[4]:
            continue
        for r in runs:
            kept = records.get(Path(str(r.get("model_path", ""))).name)
            want = read_json(kept / exp.START).get("weights_sha256") if kept else None
            if want is not None and r.get("start_weights_sha256") != want:
                raise DataError(f"{r['_dir']} started from weights {str(r.get('start_weights_sha256'))[:12]}, not its "
                                f"row's kept pretraining {kept} ({want[:12]}): a row's runs finetune one pretraining. "
                                "Run the row again whole (make reproduce-scratch does).")
    return starts


def _by_seed(runs: list[dict], task: str) -> dict[int, np.ndarray]:
    """A row's runs of `task` by seed (two of one seed refused: ``rows.one_run_per_seed``)."""
    mine = [r for r in runs if r["task"] == task]
    one_run_per_seed(mine, lambda r: (r.get("seed"),), lambda r: f"row {_name(_row_key(r))}, {task}")
    return {int(r["seed"]): r["_correct"] for r in mine}


def tasks_of(runs: list[dict]) -> tuple[str, ...]:
    return tuple(t for t in PAPER_ORDER if any(r["task"] == t for r in runs))


def build(runs: list[dict], n: int) -> tuple[list[dict], dict]:
    """Rows (full attention, its no-pretraining control, the Linformer rows) with accuracies, differences and the
    pretraining gain, over the tasks the runs have."""
    tasks = tasks_of(runs)
    chosen = [r for r in runs if r["_chosen_on_reported"]]
    if chosen:
        raise DataError(f"{chosen[0]['_dir']} chose its epoch on the reported split: the table reports nothing chosen "
                        "there. Run it again (make reproduce-scratch does).")
    for task in tasks:  # a paired comparison needs the same examples in the same order
        labels = [r for r in runs if r["task"] == task]
        if any(len(r["_labels"]) != len(labels[0]["_labels"]) or (r["_labels"] != labels[0]["_labels"]).any()
               for r in labels):
            raise DataError(f"the {task} runs were not scored on the same examples (e.g. {labels[0]['_dir']}): "
                            "fix subset_seed and max_eval_examples across the experiment")
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in runs:
        groups[_row_key(r)].append(r)
    full, control = ("full", n, None, None, True, ()), ("full", n, None, None, False, ())
    out = []
    for key in sorted(groups, key=lambda k: (projects_keys(k[0]), not k[4], row_order(k)[2], str(k[3]), repr(k[5]))):
        row = {"name": _name(key), "attention": key[0], "n": key[1], "k": key[2], "sharing": key[3],
               "pretrained": key[4], "tasks": {}}
        for task in tasks:
            mine = _by_seed(groups[key], task)
            if not mine:
                continue
            cell = {"accuracy": seed_example_interval(np.stack([mine[s] for s in sorted(mine)])),
                    "seeds": sorted(mine), "examples": len(next(iter(mine.values())))}
            if key != full and full in groups and _by_seed(groups[full], task):
                cell["vs_full"] = _matched(mine, _by_seed(groups[full], task))
            row["tasks"][task] = cell
        if key != full and full in groups and all(t in row["tasks"] and "vs_full" in row["tasks"][t] for t in tasks):
            with contextlib.suppress(ValueError):  # the tasks' seeds differ: an incomplete row has no average
                row["average_vs_full"] = one_seed_p(tasks_average({t: {"a": _by_seed(groups[key], t),
                                                                        "b": _by_seed(groups[full], t)} for t in tasks}))
                row["average_vs_full"] |= {"reference_seeds": min(len(_by_seed(groups[full], t)) for t in tasks),
                                           "own_seeds": min(len(_by_seed(groups[key], t)) for t in tasks)}
        present = [row["tasks"][t]["accuracy"]["mean"] for t in tasks if t in row["tasks"]]
        row["average"] = statistics.fmean(present) if len(present) == len(tasks) else None
        out.append(row)
    gain = {t: _matched(_by_seed(groups[full], t), _by_seed(groups[control], t))
            for t in tasks if full in groups and control in groups and _by_seed(groups[full], t)
            and _by_seed(groups[control], t)}
    return out, gain


def judge(rows: list[dict], gain: dict, figure: dict | None, seeds: int) -> list[dict]:
    """The targets of experiments.scratch, each {target, value, lo, state, met}: state "met" where the 95%
    interval shows it (its lower end at or above the target: ``paired.target_verdict``), "not shown" where only the
    point estimate meets it, "missed" where that does not, None where the rows are incomplete (met: state == "met",
    None where not judged). Figure 3a's ratio is one run per k, with no interval: judged on its value."""
    def judged(target: str, d: dict | None, bound: float, complete: bool) -> dict:
        state = target_verdict(d["diff"], d["lo"], bound) if complete and d is not None else None
        return {"target": target, "value": None if d is None else d["diff"], "lo": None if d is None else d["lo"],
                "state": state, "met": None if state is None else state == "met"}

    targets = []
    for task in gain:
        g = gain[task]
        targets.append(judged(f"pretraining adds >= {exp.GAIN:g} points on {TITLES[task]}", g, exp.GAIN,
                              g is not None and len(g["seeds"]) == seeds))
    for row in (r for r in rows if projects_keys(r["attention"]) and r["pretrained"]):
        within = exp.WITHIN.get(row["n"] // row["k"])
        if within is None:
            continue
        avg = row.get("average_vs_full")
        targets.append(judged(f"{row['name']}: average over tasks within {within:g} of full attention", avg, -within,
                              avg is not None and len(avg["seeds"]) == seeds))
    if figure is not None:
        linformers = [r for r in figure["runs"] if projects_keys(r["attention"])]
        worst = max((r["ppl_ratio_vs_full"] for r in linformers if r["ppl_ratio_vs_full"] is not None), default=None)
        judged_here = not figure.get("not_judged") and bool(linformers)
        met = (worst <= exp.PPL_RATIO) if judged_here else None
        targets.append({"target": f"Figure 3a: every k within {exp.PPL_RATIO - 1:.0%} of full attention's final "
                                  "validation perplexity", "value": worst, "lo": None,
                        "state": None if met is None else "met" if met else "missed", "met": met})
    return targets


def _acc(cell: dict | None) -> str:
    if cell is None:
        return "-"
    a = cell["accuracy"]
    note = seeds_note(len(cell["seeds"]))
    return f"{fmt1(a['mean'])} {interval_text(a['lo'], a['hi'], cell['examples'])}" + (f" ({note})" if note else "")


def _matched(mine: dict, reference: dict) -> dict:
    """``seed_matched`` over the seeds both have, with how many each has (a cell paired on fewer says so)."""
    return one_seed_p(seed_matched(mine, reference)) | {"reference_seeds": len(reference), "own_seeds": len(mine)}


def _diff(d: dict | None, examples: int, reference: str = "full attention") -> str:
    if d is None:
        return "-"
    return comparison_text(d, examples, reference, d.get("reference_seeds", 0), d.get("own_seeds", 0))


def to_markdown(data: dict) -> str:
    lines = [f"# Table 2 from scratch: profile {data['profile']}", "",
             f"{made_on(data.get('run_devices'), data['hardware'])}  ", f"Command: `{data['command']}`", "",
             ("Accuracy in percent on SST-2 dev and the IMDB test split, each scored once on the model the run's "
              "validation carve chose (a share of its train rows); mean over seeds with a 95% interval over seeds and "
              f"examples. {pairing_prose('vs full', 'full attention')} Every row was pretrained on the same blocks in "
              "the same order with one recipe, and each row's runs started from its one pretraining "
              "(start_weights_sha256)."), "",
             *table_lines(["row", *(TITLES[t] for t in data["tasks"]), "avg",
                              *(f"vs full: {TITLES[t]}" for t in data["tasks"]), "vs full: avg", "seeds",
                              "val ppl (x full)"])]
    ppl = {(r["attention"], r["k"], r["sharing"]): r for r in (data["figure3"] or {}).get("runs", [])}
    for row in data["rows"]:
        t = row["tasks"]
        examples = min((c["examples"] for c in t.values()), default=0)
        fig = ppl.get((row["attention"], row["k"], row["sharing"])) if row["pretrained"] else None
        seeds = ", ".join(f"{TITLES[k]} {len(v['seeds'])}" for k, v in t.items())
        lines.append(table_row([
            row["name"], *(_acc(t.get(task)) for task in data["tasks"]),
            "-" if row["average"] is None else fmt1(row["average"]),
            *(_diff(t.get(task, {}).get("vs_full"), t[task]["examples"] if task in t else 0) for task in data["tasks"]),
            _diff(row.get("average_vs_full"), examples), seeds,
            "-" if fig is None else f"{fig['final_val_ppl']:.1f} ({fig['ppl_ratio_vs_full']:.3f}x)"]))
    lines += ["", "What pretraining adds (full attention against the same model finetuned from random weights, "
                  "seed-matched): " + ("; ".join(f"{TITLES[t]} {_diff(g, data['examples'][t], 'the control')}"
                                                 for t, g in data["gain"].items())
                                       or "not measured yet"), "", "## Targets", ""]
    for t in data["targets"]:
        state = {"met": "met at the 95% level" if t.get("lo") is not None else "met", "missed": "MISSED",
                 "not shown": f"not shown: the point estimate meets it, its 95% interval reaches {t.get('lo') or 0:+.2f}",
                 None: "not judged (its rows incomplete, or as said below)"}[t.get("state")]
        value = "-" if t["value"] is None else f"{t['value']:+.2f}" if "Figure" not in t["target"] else \
            f"{t['value']:.3f}x"
        lines.append(f"- {t['target']}: {value}, {state}")
    if data["figure3"] and data["figure3"].get("not_judged"):
        lines.append(f"- Figure 3a not judged: {data['figure3']['not_judged']}")
    missing = data["missing"]
    lines += ["", f"Runs still to do: {len(missing)} of {data['planned']}" + (
        f" (first: {', '.join(missing[:4])})" if missing else ""), ""]
    lines += ["## Recipe", "", *(f"- {k}: `{' '.join(v)}`" for k, v in data["recipe"].items()), ""]
    return "\n".join(lines)


def plot(data: dict, out_png: Path) -> None:
    """Left: each row's accuracy per task with its interval; right: Figure 3a's validation perplexity curves."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 5))
    names = [r["name"] for r in data["rows"]]
    width = 0.6 / max(1, len(data["tasks"]))
    for i, task in enumerate(data["tasks"]):
        xs, ys, err = [], [], []
        for j, row in enumerate(data["rows"]):
            cell = row["tasks"].get(task)
            if cell:
                a = cell["accuracy"]
                xs.append(j + (i - (len(data["tasks"]) - 1) / 2) * width)
                ys.append(a["mean"])
                err.append((a["mean"] - a["lo"], a["hi"] - a["mean"]))
        if xs:
            left.errorbar(xs, ys, yerr=np.array(err).T, fmt="o", capsize=3, label=TITLES[task])
    left.set_xticks(range(len(names)), names, rotation=35, ha="right", fontsize=8)
    left.set_ylabel("accuracy (%), mean over seeds, 95% interval")
    left.set_title("Finetuned accuracy by row")
    left.legend()
    for run in (data["figure3"] or {}).get("runs", []):
        steps, ppl = series(load_run(resolve_path(run["run_dir"]), rows=False, strict=True), "val_ppl")
        right.plot(steps, ppl, plots.FULL_STYLE if not projects_keys(run["attention"]) else "-", label=run["label"])
    plateau = (data["figure3"] or {}).get("context_free_val_ppl")
    if plateau:  # drawn as scripts/figure3.py draws it
        right.axhline(plateau, color="grey", linestyle=":", linewidth=1.2, label=f"{PLATEAU_LABEL} ({plateau:,.0f})")
    right.set_yscale("log")
    right.set_xlabel("step")
    right.set_ylabel("validation perplexity (log scale)")
    right.set_title("Pretraining (cf. Figure 3a)")
    right.legend(fontsize=7)
    fig.tight_layout()
    save_figure(fig, out_png, dpi=110)


def write_table(patterns: list[str], out: str, p: exp.Profile, hardware: str, command: str) -> dict:
    """<out>.md, <out>.json and <out>.png from profile `p`'s kept records."""
    runs = read_runs(patterns, PAPER_ORDER)
    pretraining = pretraining_records(patterns)
    if not runs and not pretraining:
        raise DataError(f"no finished runs at {', '.join(patterns)}")
    check_profile_runs([*(Path(r["_dir"]).name for r in runs), *(d.name for d in pretraining)], p.name,
                       exp.profile_of, "make reproduce-scratch")
    records = {d.name: d for d in pretraining}
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in runs:
        groups[_row_key(r)].append(r)
    starts = check_starts(groups, records)
    rows, gain = build(runs, p.n)
    figure = figure3_data([load_run(d, rows=False, strict=True) for d in pretraining]) if pretraining else None
    have = {Path(r["_dir"]).name for r in runs}
    devices = sorted({str(read_record(d, SUMMARY).get("device")) for d in pretraining} - {"None"})
    tasks = tasks_of(runs)
    p = exp.with_tasks(p, list(dict.fromkeys([*p.run_tasks, *tasks])))
    data = {"profile": p.name, "tasks": tasks, "hardware": hardware, "run_devices": ", ".join(devices) or "not recorded",
            "command": command, "rows": rows,
            "gain": gain, "figure3": figure, "targets": judge(rows, gain, figure, len(p.seeds)),
            "starts": starts, "missing": [name for name in exp.planned_runs(p) if name not in have],
            "planned": len(exp.planned_runs(p)),
            "examples": {t: next((len(r["_labels"]) for r in runs if r["task"] == t), 0) for t in tasks},
            "recipe": {"data": p.data, "model": p.model, "pretraining": p.pretrain,
                       **{f"finetuning {TITLES[t]}": v for t, v in p.tasks.items()},
                       "protocol": (f"validation_fraction={p.validation_fraction:g}", "subset_seed=0",
                                    f"seeds={','.join(map(str, p.seeds))}")}}
    atomic_write(f"{out}.md", to_markdown(data))
    write_json(f"{out}.json", data)
    plot(data, Path(f"{out}.png"))
    return data
