"""Table 2 of the Linformer paper from finetuning run directories (any user's runs).

Each finished finetuning run holds results.json (read through linformer.rundir). Runs are grouped into rows by
(attention, n, k, sharing, pretrained) and every other architecture field they record (``rows.row_key``: a conv or
local/global run is its own row, named by what differs from the paper's); seeds are averaged per task; accuracies are in percent. A model without
a projected dimension k (full attention, or a RoBERTa checkpoint) is a full-attention row.
The paper's numbers (arXiv 2006.04768, Table 2, dev accuracy) are printed beside ours.
"""

from __future__ import annotations

import os
import statistics
import sys
from collections import defaultdict
from pathlib import Path

from ..bench.common import load_average
from ..cli import run_from_a_script
from ..data.tasks import PAPER_ORDER, TITLES, get_task
from ..devices import cpu_model_name
from ..errors import ConfigError, DataError, LinformerError
from ..experiments import pretrained as exp
from ..files.atomic import atomic_write, output_files, write_json
from ..files.locations import repo_relative
from ..files.outputs import file_record, made_by
from ..files.runs import RESULTS
from ..files.tables import table_lines, table_row
from ..modeling.values import projects_keys
from ..rundir import RunRecord, find_runs, named_paths
from ..shell import shell_command
from . import forest, table2_pretrained, table2_scratch
from .layouts import LAYOUTS, layout_profile
from .measured import read_measured
from .rows import (
    SKIPPED_NOTE,
    check_result,
    draws_note,
    finished_runs,
    logged_nonfinite_losses,
    made_on,
    one_run_per_seed,
    reported_subset,
    row_key,
    row_name,
    row_order,
    run_devices,
    skipped_updates,
    subset_draw,
)

TASKS = PAPER_ORDER
# Paper Table 2 (checked against arXiv 2006.04768 v3): (attention, n, k, sharing) -> SST-2, IMDB, QNLI, QQP, avg.
PAPER = {
    ("full", 512, None, None): ("RoBERTa-base (Liu et al. 2019)", 93.1, 94.1, 90.9, 90.9, 92.25),
    ("linformer", 512, 128, "headwise"): ("Linformer, 128", 92.4, 94.0, 90.4, 90.2, 91.75),
    ("linformer", 512, 128, "kv"): ("Linformer, 128, shared kv", 93.4, 93.4, 90.3, 90.3, 91.85),
    ("linformer", 512, 128, "layerwise"): ("Linformer, 128, shared kv, layer", 93.2, 93.8, 90.1, 90.2, 91.83),
    ("linformer", 512, 256, "headwise"): ("Linformer, 256", 93.2, 94.0, 90.6, 90.5, 92.08),
    ("linformer", 512, 256, "kv"): ("Linformer, 256, shared kv", 93.3, 93.6, 90.6, 90.6, 92.03),
    ("linformer", 512, 256, "layerwise"): ("Linformer, 256, shared kv, layer", 93.1, 94.1, 91.2, 90.8, 92.30),
    ("linformer", 1024, 256, "headwise"): ("Linformer, 256", 93.0, 93.8, 90.4, 90.4, 91.90),
    ("linformer", 1024, 256, "kv"): ("Linformer, 256, shared kv", 93.0, 93.6, 90.3, 90.4, 91.83),
    ("linformer", 1024, 256, "layerwise"): ("Linformer, 256, shared kv, layer", 93.2, 94.2, 90.8, 90.5, 92.18),
}


def read_results(patterns: list[str]) -> list[dict]:
    """The results.json of every finished finetuning run at or under the paths or globs (run dirs, folders of
    them, or results.json files), each with its run directory as ``_dir``."""
    out = []
    for record in (RunRecord(d, "finetune") for d in finished_runs(patterns)):
        r, config = record.results(), record.config()
        if r:  # its max_eval_examples: a subset, for a run recorded before results.json's `reported`
            out.append({**r, "_dir": str(record.dir), "_draw": subset_draw(config, r),
                        "_max_eval_examples": config.get("max_eval_examples")})
    return out


def _check_results(results: list[dict]) -> None:
    """Each run a row takes holds what ``build_rows`` reads (``rows.check_result``): its length (max_length, where
    its model records no max_seq_len), every f1 a number."""
    for r in results:
        path = Path(r.get("_dir", "?")) / RESULTS
        check_result(r, path, also=() if r.get("max_seq_len") else ("max_length",))
        if not isinstance(r["metrics"].get("f1", 0.0), (int, float, type(None))):
            raise DataError(f"{path}: metrics.f1 is {r['metrics']['f1']!r}, not a number: a hand-made or damaged "
                            "record. Restore it, or leave its run out of the paths.")


def unfinished_runs(patterns: list[str]) -> list[str]:
    """The run directories at or under the paths or globs that hold no results.json yet (running, stopped or
    failed): the table leaves them out, and says so."""
    dirs = find_runs([p.parent if p.name == RESULTS else p for p in named_paths(patterns)])
    records = (RunRecord(d, "finetune") for d in dirs)
    return [str(r.dir) for r in records if r.info().get("stage") == "finetune" and not r.results()]


def _column(r: dict) -> str | None:
    task = r.get("task")
    if task == "qnli" and r.get("eval_split") not in (None, "dev"):
        return "qnli_devsplit"  # QNLI dev split into train / held-out parts: never reported as QNLI dev
    return task if task in (*TASKS, "qnli_devsplit") else None


def _pct(x: float) -> float:
    return 100.0 * x if x <= 1.0 else x


def _mean(xs: list[float]) -> float | None:
    return round(statistics.fmean(xs), 2) if xs else None


def _validation_score(r: dict) -> float | None:
    """The score that chose a run's model on its validation split (results.json ``selection``), or None."""
    sel = r.get("selection") or {}
    return sel.get("value") if sel.get("split") == "validation" else None


def _best_lr(runs: list[dict]) -> tuple[float | None, list[dict], dict]:
    """RoBERTa's protocol, with the choice made where nothing is reported: runs grouped by peak lr, seeds averaged,
    the lr with the best mean validation score kept. Returns (that lr, its runs, {lr: seed-averaged reported
    accuracy} in lr order); runs without an lr form one group. DataError when several lrs were run and some run
    has no validation score: the lr would be chosen on the reported split (rerun with validation_fraction)."""
    by_lr: dict = defaultdict(list)
    for r in runs:
        by_lr[r.get("lr")].append(r)
    means = {lr: statistics.fmean(_pct(float(r["metrics"]["accuracy"])) for r in by_lr[lr])
             for lr in sorted(by_lr, key=lambda lr: lr or 0)}
    if len(by_lr) == 1:
        return next(iter(by_lr)), runs, means
    blind = [r for r in runs if _validation_score(r) is None]
    if blind:
        raise DataError(f"{len(blind)} of the runs of an lr grid ({', '.join(f'{lr:g}' for lr in means)}) record no "
                        f"validation score (e.g. {blind[0].get('_dir', blind[0].get('task'))}): the lr would be chosen "
                        "on the split the table reports. Rerun the grid with validation_fraction, or pass the runs "
                        "of one lr.")
    chooser = {lr: statistics.fmean(_validation_score(r) for r in by_lr[lr]) for lr in by_lr}
    best = max(chooser, key=lambda lr: (chooser[lr], -(lr or 0)))  # ties: the smaller lr
    return best, by_lr[best], means


def _check_runs(results: list[dict], subsets: bool) -> None:
    """Refuse a run scored on a subset of its reported split unless `subsets` (its cell then says so), and two runs
    of one seed in one cell (``rows.one_run_per_seed``)."""
    part = next((r for r in results if reported_subset(r)), None)
    if part is not None and not subsets:
        examples, of = reported_subset(part)
        scored = f"{examples} of the {of} examples" if of is not None else f"{examples} examples"
        raise DataError(f"{part.get('_dir')} scored {scored} of {part.get('task')}'s "
                        f"{(part.get('reported') or {}).get('split') or part.get('eval_split')} split "
                        "(max_eval_examples): Table 2 reports whole splits. Finetune it with max_eval_examples=null, "
                        "or pass --subsets to take such runs, each cell saying how many examples scored it.")
    one_run_per_seed(results, lambda r: (row_key(r), _column(r), r.get("lr"), r.get("seed")),
                     lambda r: f"{row_name(row_key(r))}, {_column(r)}" + (f", lr {r['lr']:g}" if r.get("lr") else ""))


def build_rows(results: list[dict], subsets: bool = False) -> list[dict]:
    """One row per (attention, n, k, sharing, pretrained, variant) (``rows.row_key``), seeds averaged, the best lr
    per task when several were run; JSON-schema rows plus private keys. A run scored on a subset of its split is refused unless `subsets`:
    then the row's ``subsets`` says, per task, how many examples of how many scored it."""
    _check_results([r for r in results if _column(r) is not None])
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in results:
        if _column(r) is not None:
            groups[row_key(r)].append(r)
    _check_runs([r for runs in groups.values() for r in runs], subsets)
    rows = []
    for key in sorted(groups, key=row_order):
        acc, f1, seeds, lrs, parts = defaultdict(list), defaultdict(list), defaultdict(set), {}, defaultdict(set)
        skipped: dict[str, int] = defaultdict(int)
        draws = defaultdict(list)
        ppl = [r["pretrain_val_ppl"] for r in groups[key] if r.get("pretrain_val_ppl") is not None]
        by_col = defaultdict(list)
        for r in groups[key]:
            by_col[_column(r)].append(r)
        for col, runs in by_col.items():
            lr, chosen, means = _best_lr(runs)
            if len(means) > 1:
                lrs[col] = {"lr": lr, "grid": list(means), "per_lr": {g: round(m, 2) for g, m in means.items()}}
            for r in chosen:
                acc[col].append(_pct(float(r["metrics"]["accuracy"])))
                seeds[col].add(r.get("seed"))
                skipped[col] += skipped_updates(r, lambda r=r: logged_nonfinite_losses(r["_dir"]) if r.get("_dir")
                                                else 0)
                if reported_subset(r):
                    parts[col].add(reported_subset(r))
                    draws[col].append(r.get("_draw"))
                if r["metrics"].get("f1") is not None:
                    f1[col].append(_pct(float(r["metrics"]["f1"])))
        attention, n, k, sharing, pretrained, variant = key
        row = {"name": row_name(key), "attention": attention, "n": n, "k": list(k) if isinstance(k, tuple) else k,
               "sharing": sharing, "pretrained": pretrained, **{t: _mean(acc[t]) for t in TASKS}}
        if variant:  # the architecture fields in which the row's runs are not the paper's
            row["variant"] = {f: list(v) if isinstance(v, tuple) else v for f, v in variant}
        present = [row[t] for t in TASKS if row[t] is not None]
        row["average"] = round(statistics.fmean(present), 2) if present else float("nan")
        row["val_ppl"] = round(statistics.fmean(ppl), 3) if ppl and pretrained else None
        if acc.get("qnli_devsplit"):
            row["qnli_devsplit"] = _mean(acc["qnli_devsplit"])
        if any(skipped.values()):  # the cell's runs skipped that many updates in all (compare_runs marks each run)
            row["skipped_updates"] = {t: n for t, n in skipped.items() if n}
        if parts:
            row["subsets"] = {t: sorted(v, key=lambda p: (p[0], p[1] or 0)) for t, v in parts.items()}
        row["_draws"] = {t: note for t, runs in draws.items() if (note := draws_note(runs))}
        row["_f1"] = {t: _mean(v) for t, v in f1.items()}
        row["_seeds"] = {t: len(s) for t, s in seeds.items()}
        row["_lr"] = lrs
        rows.append(row)
    return rows


def paper_analogue(row: dict) -> tuple | None:
    """The paper row with the same (n, k, sharing), else the n=512 row with the same n/k ratio and sharing (an
    analogue, as it is for a row whose architecture differs from the paper's in its ``variant``); None for one k per
    layer, which no row of the paper has."""
    if not row["pretrained"] or isinstance(row["k"], list):
        return None
    key = (row["attention"], row["n"], row["k"], row["sharing"])
    if key in PAPER:
        return key
    if not projects_keys(row["attention"]):
        return ("full", 512, None, None)
    if row["k"] and 512 % (row["n"] // row["k"] or 1) == 0 and row["n"] % row["k"] == 0:
        alt = ("linformer", 512, 512 // (row["n"] // row["k"]), row["sharing"])
        return alt if alt in PAPER else None
    return None


def _fmt(x, digits=1):
    return "-" if x is None else f"{x:.{digits}f}"


def _split_size(of: int | None) -> str:
    return f"{of:,}" if of is not None else "the split's"


def _subset_mark(row: dict, task: str) -> str:
    """A cell's mark where subsets of its split scored it: ' [200 of 872 examples]' (' [200 of the split's examples]'
    for a run recorded before the split's size was), and where its seeds scored different subsets
    (``rows.draws_note``), how many; where its runs skipped updates (``rows.skipped_updates``), how many."""
    parts = (row.get("subsets") or {}).get(task)
    draws = (row.get("_draws") or {}).get(task)
    skipped = (row.get("skipped_updates") or {}).get(task)
    mark = f" [{' / '.join(f'{e:,} of {_split_size(o)}' for e, o in parts)} examples{f'; {draws}' if draws else ''}]" \
        if parts else ""
    return mark + (f" [{skipped} updates skipped]" if skipped else "")


def to_markdown(rows: list[dict], hardware: str, command: str, forest_png: str | None = None,
                runs_on: str | None = None) -> str:
    """The paper layout's report; `hardware`: where it is rendered, `runs_on`: where its runs were made
    (``rows.run_devices``: their records), never one for the other."""
    devsplit = any("qnli_devsplit" in r for r in rows)
    titles = [TITLES[t] + (" acc (F1)" if "f1" in get_task(t).metrics else "") for t in TASKS]
    head = ["model", "pretrained", *titles, "avg", "val ppl", "seeds (lr)",
            f"paper (analogue): {' / '.join(TITLES[t] for t in TASKS)}, avg"]
    if devsplit:
        head.insert(6, "QNLI dev-split (not QNLI dev)")
    lr_note = ("where runs used several peak learning rates, each cell keeps the lr whose seeds score best on average "
               "on their validation split (carved from train, never the reported split: RoBERTa's protocol; the grid "
               "and every cell at every lr are listed below); ") if any(r["_lr"] for r in rows) else ""
    lines = ["# Table 2 (Linformer paper) from finetuning runs", "",
             f"{made_on(runs_on, hardware)}  ", f"Command: `{command}`", "",
             ("Dev accuracy in percent (IMDB: its test split, IMDB having no dev split; the paper reports \"dev set "
              "results\" and does not say which IMDB split), averaged over seeds (a cell scored "
              "on a subset of the split says how many of its examples, in brackets); " + lr_note +
              "avg over the non-empty task columns; val ppl = the pretraining run's final validation perplexity. "
              "The paper column shows the row with the same n, k and sharing, or, for other n, the n = 512 row "
              "with the same n/k ratio and sharing (marked ~)."), "",
             *table_lines(head)]
    base = {r["n"]: r for r in rows if not projects_keys(r["attention"]) and r["pretrained"]}
    for r in rows:
        key = paper_analogue(r)
        paper = "-"
        if key:
            p = PAPER[key]
            exact = key == (r["attention"], r["n"], r["k"], r["sharing"]) and not r.get("variant")
            paper = f"{'' if exact else '~'}{p[0]}, n={key[1]}: {' / '.join(_fmt(x) for x in p[1:5])}, {p[5]:.2f}"
        seeds = ", ".join(f"{t}:{s}" for t, s in sorted(r["_seeds"].items()))
        if r["_lr"]:
            seeds += "; best lr " + ", ".join(f"{t}:{v['lr']:g}" for t, v in sorted(r["_lr"].items()))
        scores = [_fmt(r[t]) + (f" ({_fmt(r['_f1'][t])})" if r["_f1"].get(t) is not None else "") +
                  _subset_mark(r, t) for t in TASKS]
        cells = [r["name"], "yes" if r["pretrained"] else "no", *scores, _fmt(r["average"], 2), _fmt(r["val_ppl"], 2),
                 seeds, paper]
        if devsplit:
            cells.insert(6, _fmt(r.get("qnli_devsplit")))
        lines.append(table_row(cells))
    if any(r.get("skipped_updates") for r in rows):
        lines += ["", SKIPPED_NOTE]
    if forest_png:
        lines += ["", f"Plot of each cell minus pretrained full attention's at the same n: `{forest_png}`."]
    grids = sorted({(t, tuple(v["grid"])) for r in rows for t, v in r["_lr"].items()})
    if grids:
        lines += ["", "Learning-rate grid per task: " + "; ".join(
            f"{t}: {', '.join(f'{lr:g}' for lr in g)}" for t, g in grids) + ". Every cell at every lr:", ""]
        for r in rows:
            cells = [f"{t} " + ", ".join(f"{_fmt(a)} at {lr:g}" for lr, a in v["per_lr"].items())
                     for t, v in sorted(r["_lr"].items())]
            if cells:
                lines.append(f"- {r['name']}: " + "; ".join(cells))
    deltas = [(r["name"], r["average"] - base[r["n"]]["average"], paper_analogue(r)) for r in rows
              if projects_keys(r["attention"]) and r["pretrained"] and r["n"] in base]
    if deltas:
        lines += ["", ("Average minus the full-attention baseline at the same n (ours; paper's analogue row minus "
                       "RoBERTa-base's 92.25):"), ""]
        for name, d, key in deltas:
            paper_d = f"{PAPER[key][5] - PAPER[('full', 512, None, None)][5]:+.2f}" if key else "-"
            lines.append(f"- {name}: {d:+.2f} (paper {paper_d})")
    scratch = {r["n"]: r for r in rows if not projects_keys(r["attention"]) and not r["pretrained"]}
    for n, s in scratch.items():
        if n in base and base[n]["sst2"] is not None and s["sst2"] is not None:
            lines.append(f"- Pretraining gain, full attention n={n}, SST-2: {base[n]['sst2'] - s['sst2']:+.1f} points")
    return "\n".join(lines) + "\n"


def to_json(rows: list[dict], hardware: str, command: str, runs_on: str | None = None) -> dict:
    return {"hardware": hardware, "run_devices": runs_on or "not recorded", "command": command,
            "rows": [{k: v for k, v in r.items() if not k.startswith("_")} for r in rows]}


def detect_hardware() -> str:
    try:
        import torch

        if torch.cuda.is_available():
            return f"{torch.cuda.device_count()} x {torch.cuda.get_device_name(0)}"
    except ImportError:
        pass

    cpu = cpu_model_name()
    return f"CPU: {cpu}, {len(os.sched_getaffinity(0))} cores"


def write_table2(runs: list[str], out: str, hardware: str | None = None, command: str | None = None,
                 subsets: bool = False) -> dict:
    """Read results.json under `runs` (paths, globs, directories) and write <out>.md and <out>.json. `subsets`:
    take runs scored on a subset of their split (``build_rows``)."""
    results = read_results(runs)
    if not results:
        raise DataError(f"no finished finetuning runs (with {RESULTS}) at or under {', '.join(runs)}")
    other = sorted({str(r.get("task")) for r in results if _column(r) is None})
    if len(other) and all(_column(r) is None for r in results):
        raise DataError(f"the {len(results)} finished runs at or under {', '.join(runs)} are of task(s) "
                        f"{', '.join(other)}; Table 2 has {', '.join(TITLES[t] for t in TASKS)}")
    rows = build_rows(results, subsets)
    hardware = hardware or detect_hardware()
    command = command or shell_command("python", *sys.argv)
    unfinished = unfinished_runs(runs)
    note = "" if not unfinished else (f"\nLeft out: {len(unfinished)} run(s) without results.json (still running, "
                                      f"stopped or failed): {', '.join(unfinished)}.\n")
    if other:
        note += f"\nLeft out: runs of tasks Table 2 has no column for ({', '.join(other)}).\n"
    runs_on = run_devices(results)
    data = to_json(rows, hardware, command, runs_on) | ({"unfinished": unfinished} if unfinished else {})
    forest_png = draw_forest(data, out)
    atomic_write(f"{out}.md", to_markdown(rows, hardware, command, forest_png, runs_on) + note)
    write_json(f"{out}.json", data)
    return data


def forest_title(data: dict) -> str:
    return (f"Table 2 from finetuning runs: each cell minus pretrained full attention's at the same n (no interval: "
            f"the report keeps each cell's mean over its seeds); runs made on: "
            f"{data.get('run_devices') or 'not recorded'}")


def draw_forest(data: dict, out: str) -> str | None:
    """<out>_forest.png from a paper-layout report's JSON `data`: each row's cells minus pretrained full attention's
    at the same n, marked as the table marks them; its file name, or None where no row has such a reference."""
    cells = forest.paper_cells(data, _subset_mark)
    if not any(cells.values()):
        return None
    forest.plot(cells, f"{out}_forest.png", forest_title(data), "full attention")
    return Path(f"{out}_forest.png").name


def render(path: str, out: str | None = None, overwrite: bool = False) -> list[str]:
    """``scripts/table2.py --render``: a report's figures again from its JSON at `path` (<out> default: the JSON's
    path less .json), nothing read from the runs: the pretrained layout's table and figures (table2_pretrained.render),
    the paper layout's <out>_forest.png (its table needs what the JSON does not keep: each cell's seeds and lr).
    Written under the report's own record (an output of the same runs, replaced by the next table2 of them); a
    JSON kept without its record replaces files only with `overwrite`. Returns the files written."""
    data = read_measured(path, "scripts/table2.py")
    out = out or str(path).removesuffix(".json")
    rows = data.get("rows")
    if isinstance(data.get("meta"), dict) and isinstance(rows, list) and all("tasks" in r for r in rows):
        outputs = [f"{out}.md", f"{out}.json", f"{out}_forest.png"] + ([f"{out}_by_length.png"]
                                                                     if data.get("by_length") else [])
    elif "hardware" in data and isinstance(rows, list) and all("attention" in r and "n" in r for r in rows):
        outputs = [f"{out}_forest.png"]
    else:
        raise ConfigError(f"--render {path} is not the JSON of a pretrained or paper layout table2 report (a "
                          "scratch layout's has no forest plot): give the <out>.json of scripts/table2.py.")
    recorded = file_record(path)
    if not (isinstance(recorded, dict) and recorded.get("command") == "table2"):  # a JSON kept without its record
        recorded = made_by("table2", {"rendered_from": repo_relative(path)})
    with output_files(outputs, recorded, overwrite):
        if len(outputs) == 1:
            if draw_forest(data, out) is None:
                raise ConfigError(f"--render {path}: no row has a pretrained full-attention row at its n to draw "
                                  "its difference from.")
        else:
            table2_pretrained.render(data, out)
    outputs = [o for o in outputs if Path(o).exists()]
    print(f"wrote {', '.join(outputs)}")
    return outputs


def write_report(runs: list[str], out: str, layout: str = "paper", profile: str | None = None,
                 hardware: str | None = None,
                 command: str | None = None, measure: bool | None = None, by_length: bool = True,
                 overwrite: bool = False, subsets: bool = False) -> dict:
    """``scripts/table2.py``: <out>.md and <out>.json (the pretrained layout also <out>_by_length.png) from the runs,
    under the output rule (only an earlier table2 of the same runs and layout is replaced unless `overwrite`); prints
    the table.

    layout ``paper``: rows by (attention, n, k, sharing, pretrained) and every other architecture field beside the paper's numbers (`subsets`: take
    runs scored on a subset of their split, marked); ``pretrained``: a
    converted encoder's teacher against its Linformer variants with paired intervals and cost per example, for the
    reproduce-pretrained `profile` (its recipe, and its jobs not run yet); ``scratch``: the framework's own
    pretraining against full attention and no pretraining, with Figure 3a (reproduce-scratch `profile`; also <out>.png).
    `profile` None: the reproduction's default (``layout_profile``)."""
    if layout not in LAYOUTS:
        raise ConfigError(f"--layout {layout!r} is not one of {', '.join(LAYOUTS)}")
    plan_profile = layout_profile(layout, profile)
    outputs = [f"{out}.md", f"{out}.json",
               *{"pretrained": [f"{out}_by_length.png", f"{out}_forest.png"], "scratch": [f"{out}.png"]}.get(
                   layout, [f"{out}_forest.png"])]
    # which runs make the table: a table of other runs at the same path is not replaced without `overwrite`
    settings = {"layout": layout, "runs": list(runs), **({"profile": plan_profile.name} if plan_profile else {})}
    # no output file inside a run it reads (<run>/results.json would be replaced by <out>=<run>/results)
    with output_files(outputs, made_by("table2", settings), overwrite, key="--out" if run_from_a_script() else "out=",
                      reads=_runs_read(runs)):
        if layout == "pretrained":
            data = _write_pretrained(runs, out, plan_profile, hardware, command, measure, by_length)
        elif layout == "scratch":
            data = table2_scratch.write_table(runs, out, plan_profile, hardware or detect_hardware(),
                                              command or shell_command("python", *sys.argv))
        else:
            data = write_table2(runs, out, hardware, command, subsets)
    print(Path(f"{out}.md").read_text(encoding="utf-8"))
    print(f"wrote {out}.md and {out}.json ({len(data['rows'])} rows)")
    return data


def _runs_read(patterns: list[str]) -> list[Path]:
    """The run directories `patterns` name (by metrics.jsonl or results.json), which no output may lie inside; a
    pattern naming nothing is left to the layout's reader, which refuses it in its own words."""
    try:
        named = named_paths(patterns)
    except LinformerError:
        return []
    return [*find_runs(named), *find_runs(named, marker=RESULTS)]


def _write_pretrained(runs: list[str], out: str, profile: exp.Profile, hardware: str | None, command: str | None,
                      measure: bool | None, by_length: bool) -> dict:

    load = load_average()
    meta = {"source": f"{exp.SOURCE} (all-MiniLM-L6-v2, BertModel 6 x 384, Apache-2.0)",
            "hardware": hardware or detect_hardware(), "command": command or shell_command("python", *sys.argv),
            "recipe": exp.recipe_text(profile), "n": exp.N, "cost_batch": 8,
            "load": (f"the 1-minute load average was {load:.1f}" if load is not None else "the load average was not "
                     "read") + f" on {os.cpu_count()} cores",
            "missing": exp.missing_runs(profile)}
    return table2_pretrained.write_table(runs, out, meta, measure=measure, lengths=by_length,
                                         declared=table2_pretrained.declared_rows(profile), profile=profile.name)
