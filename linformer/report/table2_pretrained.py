"""Table 2 from a pretrained encoder converted to Linformer: the teacher (full attention) against each variant,
without and with attention transfer, with 95% intervals and paired differences on the same eval examples.

Reads finished finetuning runs (results.json and eval_predictions.json); a run's row is its model's attention,
k, sharing and length policy, and whether the model's card records a transfer. Every seed and row saw the same eval
examples (the experiment fixes subset_seed), so differences are paired: each seed of a row against the teacher's
same seed (``paired.seed_matched``), whose difference, seed-aware interval and p (the test that interval inverts)
come from those pairs alone. A row's runs start from one set of weights (``start_weights_sha256``) unless the plan declares
otherwise. Runs recorded before the protocol that chose their epoch on the reported split, and eval examples an old
run also trained on, are left out and listed. Time and peak memory per example are measured here, side by side, at
n for every architecture in the table.
"""

from __future__ import annotations

import os
import re
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

from ..bench.common import load_average
from ..bench.per_example import cost_per_example
from ..data.tasks import MIRROR_TASKS, TITLES
from ..errors import DataError
from ..experiments.pretrained import CLOSES, POLICIES, SEEDS, TEACHER_TARGET, WITHIN, profile_of
from ..files.atomic import atomic_write, write_json
from ..files.locations import repo_relative, resolve_path
from ..files.mappings import read_json
from ..files.runs import PREDICTIONS, RESULTS
from ..files.tables import table_lines, table_row
from ..modeling.card import read_card_info
from ..modeling.configuration import LinformerConfig, attention_label, exact_keys_label
from ..modeling.convert import CONVERTED_EXACT_KEYS, CONVERTED_LENGTH_POLICY, NO_EXACT_KEYS, converted_config
from ..modeling.values import projects_keys
from ..rundir import RunRecord, chosen_on_reported, is_full_attention
from . import by_length, forest
from .paired import (
    comparison_notes,
    comparison_text,
    fmt1,
    interval_text,
    one_seed_p,
    pairing_prose,
    seed_example_interval,
    seed_matched,
    seeds_note,
    target_verdict,
)
from .rows import (
    FAIRSEQ_SLICE,
    check_one_architecture,
    check_profile_runs,
    check_result,
    finished_runs,
    k_of,
    made_on,
    one_run_per_seed,
    relabelled,
    run_devices,
)

# Runs of one row finetune its transfer recipe's model. Rebuilt on another machine (a fresh clone resuming the
# experiment) a CPU build may differ in the last digits; layer errors further apart than this (relative) mean
# another build of the recipe (transfer_builds).
SAME_TRANSFER = 1e-3
TRANSFER_RECIPE = ("steps", "tokens", "train", "target")  # what makes two transfers builds of one experiment


def read_runs(patterns: list[str], tasks: tuple[str, ...] = MIRROR_TASKS) -> list[dict]:
    """Every finished finetuning run with its per-example predictions: results.json plus ``_correct`` (bool per
    eval example), ``_labels`` and ``_transfer`` (the model card's transfer record, or None)."""
    runs = []
    for d in finished_runs(patterns):
        r = RunRecord(d, "finetune").results()  # a damaged one refused, naming it
        pred = read_json(d / PREDICTIONS)
        if (d / PREDICTIONS).is_file() and not pred:
            raise DataError(f"{d / PREDICTIONS} is damaged (not a JSON object): restore it (git checkout, or the "
                            "run's own copy) or delete the run's records to run it again; no table is written from "
                            "a damaged record.")
        if r.get("task") not in tasks or not pred:
            continue
        check_result(r, d / RESULTS, also=("seed", "model_path"))
        labels, preds = np.asarray(pred["labels"]), np.asarray(pred["predictions"])
        recorded = (r.get("metrics") or {}).get("accuracy")
        if recorded is not None and (len(labels) != len(preds) or abs(float(np.mean(preds == labels)) - recorded) > 1e-9):
            raise DataError(f"{d / PREDICTIONS} disagrees with {d / RESULTS}: its predictions score "
                            f"{float(np.mean(preds == labels)) if len(labels) == len(preds) else 'nothing'} against a "
                            f"recorded accuracy of {recorded}; they are not the same run's records.")
        model = resolve_path(r["model_path"])  # a kept record names it relative to the repository
        card = read_card_info(d) or (read_card_info(model) if Path(model).is_dir() else {})
        runs.append({**r, "_dir": str(d), "_labels": labels, "_correct": preds == labels,
                     "_transfer": card.get("transfer"), "_card": card,
                     "_chosen_on_reported": chosen_on_reported(r)})
    return runs


def kept_on_reported(runs: list[dict]) -> list[str]:
    """The runs a table keeps that were recorded before the protocol and evaluated on the reported split more than
    once: kept because their best evaluation there was their last (``chosen_on_reported``), so whether they are in
    the table was itself decided on that split."""
    return sorted(Path(r["_dir"]).name for r in runs if "selection" not in r and len(r.get("history") or []) > 1)


def protocol_exclusions(runs: list[dict]) -> tuple[list[dict], list[dict]]:
    """(the runs a table may use, the ones it must leave out: chosen on the reported split), the latter with what
    their last evaluation scored (their predictions are the chosen epoch's, so they pair with nothing)."""
    kept = [r for r in runs if not r["_chosen_on_reported"]]
    out = []
    for r in runs:
        if r["_chosen_on_reported"]:
            last = (r.get("history") or [{}])[-1]
            out.append({"run": Path(r["_dir"]).name, "task": r["task"], "seed": r["seed"], "chosen_step": r["best_step"],
                        "steps": r["steps"], "last_accuracy": last.get("accuracy"),
                        "chosen_accuracy": r["metrics"].get("accuracy")})
    return kept, out


def policy_label(fields: dict) -> str | None:
    """A Linformer's length policy in words (LinformerConfig fields, as results.json records them); None for runs
    recorded before the policy fields, which used the slice (window-masked when converted)."""
    policy = fields.get("length_policy")
    if policy is None:
        return None
    text = "resample" if policy == "resample" else \
        ("slice, window mask" if fields.get("mask_empty_windows") else FAIRSEQ_SLICE)
    text += ", exact <= k" if fields.get("exact_short_inputs") else ""
    if fields.get("local_window") or fields.get("global_positions"):
        text += ", " + exact_keys_label(fields.get("local_window") or 0, fields.get("global_positions"),
                                        bool(fields.get("landmark_pooling")))
    return text


# the policy the targets are set for: the converted models' default, exact local and global keys included
TARGET_POLICY = policy_label({**CONVERTED_LENGTH_POLICY, **CONVERTED_EXACT_KEYS})


def row_key(r: dict) -> tuple:
    full = is_full_attention(r)
    if full:
        return ("full", None, None, None, False)
    return ("linformer", k_of(r), r.get("sharing"), policy_label(r), bool(r.get("_transfer")))


def row_label(key: tuple) -> str:
    attention, k, sharing, policy, transfer = key
    if not projects_keys(attention):
        return "full attention (teacher)"
    return attention_label("linformer", k, sharing) + (f", {policy}" if policy else "") + \
        (" + transfer" if transfer else "")


TEACHER = ("full", None, None, None, False)


def _group(runs: list[dict]) -> dict[tuple, dict[str, list[dict]]]:
    """Runs by row key, then task, in table order (the teacher first)."""
    groups: dict[tuple, dict[str, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for r in runs:
        groups[row_key(r)][r["task"]].append(r)
    check_one_architecture({(key, task): runs for key, by_task in groups.items() for task, runs in by_task.items()},
                           lambda cell: f"{row_label(cell[0])}, {cell[1]}")
    largest_k = lambda k: max(k) if isinstance(k, tuple) else k or 0
    order = sorted(groups, key=lambda key: (projects_keys(key[0]), key[2] or "", -largest_k(key[1]), key[3] or "", key[4]))
    return {key: groups[key] for key in order}


def build_rows(runs: list[dict], declared: dict[str, str] | None = None) -> list[dict]:
    """One row per (attention, k, sharing, length policy, transfer); per task the seed-averaged accuracy with its
    interval over seeds and examples and, against the teacher, the seed-matched difference. `declared`: row name ->
    why its runs may start from different weights (the plan's word); any other row with several starts is refused."""
    groups = _group(runs)
    teacher = groups.get(TEACHER, {})
    rows = []
    for key, by_task in groups.items():
        row = {"name": row_label(key), "attention": key[0], "k": key[1], "sharing": key[2], "policy": key[3],
               "transfer": key[4], "model_path": None, "tasks": {}}
        for task, task_runs in sorted(by_task.items()):
            row["model_path"] = task_runs[0]["model_path"]
            card = task_runs[0]["_card"]
            if card.get("source") and card.get("model"):  # the architecture, should its model be gone
                row["converted_from"] = {"source": card["source"]["name"],
                                         "settings": {k: v for k, v in card["model"].items() if k != "class"}}
            row["tasks"][task] = _cell(task_runs, teacher.get(task) if projects_keys(key[0]) else None)
        row["starts"] = start_weights([r for rs in by_task.values() for r in rs], row["name"], declared or {})
        records = [r for rs in by_task.values() for r in rs if r["_transfer"]]
        if records:
            builds = transfer_builds(records)
            row["transfer_info"] = {**{k: records[0]["_transfer"].get(k) for k in TRANSFER_RECIPE},
                                    "rel_err_before": builds[0]["rel_err_before"],
                                    "rel_err_after": builds[0]["rel_err_after"],
                                    "rebuilt_within": max(b["rebuilt_within"] for b in builds), "builds": builds}
        rows.append(row)
    return rows


def start_weights(runs: list[dict], name: str, declared: dict[str, str]) -> dict:
    """The weights a row's runs started from, by ``start_weights_sha256``: {"hashes": {hash: [runs]}, "unrecorded":
    [runs whose results predate start_weights_sha256], "declared": the plan's reason, where it declares several}. DataError when
    its runs started from several and the plan does not say why."""
    hashes: dict[str, list[str]] = defaultdict(list)
    unrecorded = []
    for r in runs:
        h = r.get("start_weights_sha256")
        (hashes[h] if h else unrecorded).append(Path(r["_dir"]).name)
    if len(hashes) > 1 and name not in declared:
        parts = "; ".join(f"{h[:12]}: {', '.join(sorted(names))}" for h, names in hashes.items())
        quoted = f'"{name}"'
        raise DataError(f"row {quoted}: its runs started from {len(hashes)} different weights ({parts}): a row's seeds "
                        "and tasks finetune one start. Rebuild its transfer once and rerun the others, or declare it "
                        "in the plan (Profile.mixed_starts) with the reason.")
    return {"hashes": {h: sorted(n) for h, n in hashes.items()}, "unrecorded": sorted(unrecorded),
            "declared": declared.get(name) if len(hashes) > 1 else None}


def transfer_builds(runs: list[dict]) -> list[dict]:
    """The transferred models a row's runs were finetuned from, as builds of its transfer recipe. Runs whose per-layer
    errors after transfer agree to SAME_TRANSFER (relative) finetuned one model, rebuilt to its last digits where they
    differ at all ("rebuilt_within"); further apart, they started from another build of the same recipe (a fresh
    machine rebuilds the transfer, and GPU kernels are not bitwise reproducible), so the row's intervals, drawn over
    its runs, draw over those builds too. DataError where the runs' transfers differ in recipe or depth: those are
    different experiments, whose seeds one row must not mix."""
    first = runs[0]["_transfer"]
    builds: list[dict] = []
    for r in runs:
        t = r["_transfer"]
        differing = [key for key in TRANSFER_RECIPE if t.get(key) != first.get(key)]
        if differing:
            raise DataError(f"{r['_dir']} and {runs[0]['_dir']} were finetuned from transfers of different recipes "
                            f"({', '.join(f'{key} {t.get(key)} vs {first.get(key)}' for key in differing)}): one "
                            "row's runs must share one transfer recipe; rebuild the transfer job with the "
                            "experiment's settings, or keep the runs apart")
        errors = np.asarray(t.get("rel_err_after") or [], dtype=float)
        for build in builds:
            if errors.shape != build["_errors"].shape:
                raise DataError(f"{r['_dir']} and {runs[0]['_dir']} were finetuned from transferred models of "
                                "different depth: one row's runs must share one model")
            spread = float(np.max(np.abs(errors - build["_errors"]) / np.maximum(np.abs(build["_errors"]), 1e-12),
                                  initial=0.0))
            if spread <= SAME_TRANSFER:
                build["runs"].append(Path(r["_dir"]).name)
                build["rebuilt_within"] = max(build["rebuilt_within"], spread)
                break
        else:
            builds.append({"_errors": errors, "rel_err_before": t.get("rel_err_before"),
                           "rel_err_after": t.get("rel_err_after"), "runs": [Path(r["_dir"]).name],
                           "rebuilt_within": 0.0})
    return [{key: value for key, value in b.items() if key != "_errors"} for b in builds]


def check_length_data(runs: list[dict]) -> None:
    """DataError, in one line naming LINFORMER_DATA_MIRROR and --no-by-length, where the task data that
    ``length_breakdown`` rebuilds each teacher's eval examples from is not here."""
    teacher = _group(runs).get(TEACHER, {})
    for task in MIRROR_TASKS:
        if task in teacher:
            by_length.eval_data(teacher[task][0])


def length_breakdown(runs: list[dict]) -> dict[str, dict]:
    """Per task with a teacher: every other row's seed-matched difference from it by input-length quartile
    (``report/by_length.py``; the lengths are rebuilt from the teacher run's config)."""
    groups = _group(runs)
    teacher = groups.get(TEACHER, {})
    out = {}
    for task in MIRROR_TASKS:
        if task not in teacher:
            continue
        t_runs = teacher[task]
        t_by_seed = _correct_by_seed(t_runs)
        rows = {}
        for key, by_task in groups.items():
            if key == TEACHER or task not in by_task or not np.array_equal(by_task[task][0]["_labels"], t_runs[0]["_labels"]):
                continue
            mine = _correct_by_seed(by_task[task])
            common = sorted(set(mine) & set(t_by_seed))
            if common:
                rows[row_label(key)] = np.stack([mine[s].astype(float) - t_by_seed[s] for s in common])
        if rows:
            lengths = by_length.eval_lengths(t_runs[0])[t_runs[0].get("_kept", slice(None))]
            out[task] = by_length.by_length(lengths, _seed_mean(t_by_seed), rows)
    return out


def _correct_by_seed(runs: list[dict]) -> dict[int, np.ndarray]:
    labels = runs[0]["_labels"]
    for r in runs[1:]:
        if not np.array_equal(r["_labels"], labels):
            raise DataError(f"{r['_dir']} was evaluated on other examples than {runs[0]['_dir']}: compare runs "
                            "with the same max_eval_examples and subset_seed")
    one_run_per_seed(runs, lambda r: (r.get("seed"),), lambda r: f"row {row_label(row_key(r))}, {r.get('task')}")
    return {int(r["seed"]): r["_correct"] for r in runs}


def _seed_mean(by_seed: dict[int, np.ndarray]) -> np.ndarray:
    """Per example, the share of seeds that got it right (``_correct_by_seed``)."""
    return np.mean([c for _, c in sorted(by_seed.items())], axis=0)


def _seed_matrix(by_seed: dict[int, np.ndarray]) -> np.ndarray:
    return np.stack([c for _, c in sorted(by_seed.items())])


def _cell(runs: list[dict], teacher_runs: list[dict] | None) -> dict:
    by_seed = _correct_by_seed(runs)
    interval = seed_example_interval(_seed_matrix(by_seed))
    per_seed = {s: 100 * float(c.mean()) for s, c in sorted(by_seed.items())}
    walls = [r["wall_time_s"] for r in runs if r.get("wall_time_s")]
    cell = {"acc": interval["mean"], "lo": interval["lo"], "hi": interval["hi"], "seeds": per_seed,
            "seed_variance": interval["seed_variance"],
            "examples": int(by_seed[next(iter(by_seed))].size), "train_examples": runs[0].get("num_train_examples"),
            "wall_s": round(sum(walls) / len(walls), 1) if walls else None}  # one finetuning run, mean over seeds
    if teacher_runs:
        t_by_seed = _correct_by_seed(teacher_runs)
        if not np.array_equal(teacher_runs[0]["_labels"], runs[0]["_labels"]):
            cell["vs_teacher"] = None  # other eval examples: no paired comparison
            return cell
        unmatched = sorted(set(by_seed) - set(t_by_seed))
        if unmatched:
            raise DataError(f"{runs[0]['_dir']} and its row's other runs: seed(s) {unmatched} have no teacher run of "
                            f"the same seed (the teacher has {sorted(t_by_seed)}): each seed is paired with its own; "
                            "run the teacher's seed, or leave those runs out.")
        d = one_seed_p(seed_matched(by_seed, t_by_seed))
        cell["vs_teacher"] = {"diff": d["diff"], "lo": d["lo"], "hi": d["hi"], "p": d["p"], "seeds": d["seeds"],
                              "seed_variance": d["seed_variance"], "teacher_seeds": len(t_by_seed)}
    return cell


def labelled_rows(rows: list[dict]) -> list[dict]:
    """`rows` of a report's JSON as ``_cell`` writes them today, for ``render``: each cell and comparison says
    whether its interval holds the seeds' variance (``seed_variance``), and a comparison of one seed pair keeps no
    p (``paired.one_seed_p``); numbers untouched. Reports written before these fields had them implicit in their
    seed counts."""
    def after_seeds(d: dict, value: bool) -> dict:  # "seed_variance" where _cell puts it, after "seeds"
        items = [(k, v) for k, v in d.items() if k != "seed_variance"]
        at = next(i for i, (k, _) in enumerate(items) if k == "seeds") + 1
        return dict([*items[:at], ("seed_variance", value), *items[at:]])

    out = []
    for r in rows:
        tasks = {}
        for task, cell in r["tasks"].items():
            if cell is not None:
                cell = after_seeds(cell, len(cell["seeds"]) > 1)
                if cell.get("vs_teacher"):
                    v = one_seed_p(cell["vs_teacher"])
                    cell["vs_teacher"] = after_seeds(v, v["seed_variance"])
            tasks[task] = cell
        out.append({**r, "tasks": tasks})
    return out


def measure_costs(rows: list[dict], n: int, batch: int = 8, reps: int = 5) -> dict:
    """Time and peak memory per example for each architecture in ``rows`` (rows with and without transfer share
    one), measured side by side."""

    configs = {}
    for row in rows:
        arch, origin = _arch(row), row.get("converted_from")
        if arch in configs:
            continue
        if row["model_path"] and Path(resolve_path(row["model_path"])).is_dir():
            config = LinformerConfig.from_pretrained(resolve_path(row["model_path"]))
        elif origin:  # a kept record whose model is gone: the same conversion's config (the weights do not matter)
            # cards written before the exact-key fields were of models without them, and a conversion told a window
            # field without overlap_columns gave "keep"
            settings = {**NO_EXACT_KEYS, "overlap_columns": "keep",
                        **{k: v for k, v in origin["settings"].items() if v is not None}}
            config = converted_config(origin["source"], **settings)
        else:
            continue
        config.num_labels = 2
        configs[arch] = config
    return cost_per_example(configs, n=n, batch=batch, reps=reps) if configs else {}


def table_costs(rows: list[dict], out: str, meta: dict, measure: bool | None) -> tuple[dict, dict]:
    """(each architecture's time and memory, where and while what they were measured: meta["costs_measured"]).
    `measure` True: timed here, now; False: none; None: those of the report this one replaces (<out>.json) where
    they cover every row's architecture, so that refreshing the accuracies does not replace costs timed on a quiet
    machine with ones timed on a busy one; else timed here."""
    if measure is False:
        return {}, meta
    earlier = relabelled(read_json(f"{out}.json")) if measure is None and Path(f"{out}.json").is_file() else {}
    kept, made = earlier.get("costs") or {}, earlier.get("meta") or {}
    archs = {_arch(r) for r in rows}
    if kept and archs <= kept.keys():
        measured = made.get("costs_measured") or {"hardware": made.get("hardware"), "load": made.get("load")}
        return {a: kept[a] for a in sorted(archs)}, {**meta, "costs_measured": {**measured, "kept": True}}
    load, cores = load_average(), os.cpu_count() or 1
    if load is not None and load > cores:
        print(f"warning: the 1-minute load average is {load:.1f} on {cores} cores: the cost columns are timed on a "
              "busy machine (slower, and each model at the threads the load leaves it); time them when it is idle",
              file=sys.stderr)
    return measure_costs(rows, meta["n"], meta["cost_batch"]), \
        {**meta, "costs_measured": {"hardware": meta["hardware"], "load": meta["load"], "kept": False}}


def _cost_line(costs: dict, meta: dict) -> str:
    if not costs:
        return "Time and memory: not measured (--no-measure)."
    made = meta["costs_measured"]
    where = (f"kept from the report this one replaced (measured on {made['hardware']} while {made['load']}; "
             "--measure times them here)") if made["kept"] else f"measured while {made['load']}"
    threads = {c.get("threads") for c in costs.values()}
    each = "; the threads of each row's timed passes are not recorded" if None in threads else \
        ("; each row at the threads in brackets (the adaptive policy gives fewer under load)" if len(threads) > 1
         else f"; every row at {threads.pop()} thread(s)")
    return (f"Time and memory: one forward pass of a batch of {meta['cost_batch']} inputs of n = {meta['n']} tokens "
            "per architecture (sentence classifier, inference), medians of interleaved rounds, divided by the batch; "
            f"{where}{each}.")


def _arch(row: dict) -> str:
    return row_label((row["attention"], row["k"], row["sharing"], row.get("policy"), False)).replace(" (teacher)", "")


def _verdict(point: float, lo: float, hi: float, bound: float, examples: int, sign: bool = False,
             seeds: int | None = None, note: str | None = None) -> str:
    """A target "at least `bound`" in words, with its figures (``paired.target_verdict``: judged on the 95%
    interval's lower end `lo`); with fewer than SEEDS `seeds`, not decided. `note`: the cell's seeds note."""
    figures = f"{fmt1(point, sign)} {interval_text(lo, hi, examples, sign)}" + (f", {note}" if note else "")
    if seeds is not None and seeds < SEEDS:
        return f"not decided: {seeds} seed(s) of {SEEDS} ({figures})"
    verdict = target_verdict(point, lo, bound)
    if verdict == "not shown":
        reach = fmt1(lo, sign)
        if float(reach) >= bound:  # rounded onto the bound: say by how much it falls short
            reach = f"{lo:+.2f}" if sign else f"{lo:.2f}"
        return (f"not shown: point estimate {fmt1(point, sign)} meets it, its 95% interval reaches {reach} "
                f"({figures})")
    return f"{verdict}{' at the 95% level' if verdict == 'met' else ''} ({figures})"


TARGETS_PROSE = ("\"met\": shown at the 95% level, the interval's lower end at or above the target; \"not shown\": the "
                 "point estimate meets it but the interval crosses it; \"missed\": the point estimate does not; "
                 f"\"not decided\": fewer than {SEEDS} seeds.")


def targets(rows: list[dict]) -> list[str]:
    """Each target of the experiment (TEACHER_TARGET, WITHIN, CLOSES) with its figures: "met" only where the 95%
    interval shows it (its lower end at or above the target), "not shown" where the point estimate meets it but
    the interval crosses it, "missed" where the point estimate does not; "not decided" with fewer than SEEDS
    seeds."""
    teacher = next((r for r in rows if not projects_keys(r["attention"])), None)
    out = []
    if teacher is None:
        return ["No teacher row yet: no target can be checked."]
    t = teacher["tasks"]
    for task, target in TEACHER_TARGET.items():
        if task not in t:
            continue
        c = t[task]
        out.append(f"Teacher {TITLES[task]} >= {target:g}: "
                   f"{_verdict(c['acc'], c['lo'], c['hi'], target, c['examples'], seeds=len(c['seeds']), note=seeds_note(len(c['seeds'])))}.")
    for r in rows:
        if not r["transfer"] or r.get("policy") != TARGET_POLICY:
            continue
        for task, cell in r["tasks"].items():
            if task in t and r["k"] in WITHIN.get(task, {}):
                within, v = WITHIN[task][r["k"]], cell.get("vs_teacher")
                if not v:
                    continue
                notes = comparison_notes(v, "teacher", v["teacher_seeds"])
                verdict = _verdict(v["diff"], v["lo"], v["hi"], -within, cell["examples"], True, len(cell["seeds"]),
                                   "; ".join(notes) or None)
                out.append(f"{r['name']}, {TITLES[task]} within {within:g} of the teacher: {verdict}.")
    for r in rows:
        if r["transfer"] or not projects_keys(r["attention"]) or "imdb" not in r["tasks"] or "imdb" not in t:
            continue
        partner = next((x for x in rows if x["transfer"] and x["k"] == r["k"] and x["sharing"] == r["sharing"]
                        and x.get("policy") == r.get("policy") and "imdb" in x["tasks"]), None)
        if partner is None or not r["tasks"]["imdb"].get("vs_teacher") or not partner["tasks"]["imdb"].get("vs_teacher"):
            continue
        gap = -r["tasks"]["imdb"]["vs_teacher"]["diff"]  # seed-matched, as every difference of the table
        if gap <= 1.0:
            out.append(f"{r['name']}, IMDB: the gap without transfer is {fmt1(gap)} (<= 1): nothing to close.")
            continue
        closed = (gap + partner["tasks"]["imdb"]["vs_teacher"]["diff"]) / gap
        # a share of two estimates: this report gives it no interval, so its point estimate shows nothing
        verdict = "not shown: its point estimate meets it, and the share has no interval" if closed >= CLOSES \
            else "missed"
        out.append(f"{r['name']}, IMDB: transfer closes {100 * closed:.0f}% of the {fmt1(gap)}-point gap "
                   f"({verdict}; target {100 * CLOSES:.0f}%).")
    return out


def _errors(values) -> str:
    return " ".join(f"{x:.3f}" for x in values or [])


def _cell_text(cell: dict | None) -> str:
    if cell is None:
        return "-"
    note = seeds_note(len(cell["seeds"]))
    return f"{fmt1(cell['acc'])} {interval_text(cell['lo'], cell['hi'], cell['examples'])}" + (f" ({note})" if note else "")


def _diff_text(cell: dict | None) -> str:
    v = (cell or {}).get("vs_teacher")
    if not v:
        return "-"
    return comparison_text(v, cell["examples"], "teacher", v["teacher_seeds"])


def to_markdown(rows: list[dict], costs: dict, meta: dict, lengths: dict | None = None) -> str:
    lines = [
        "# Table 2 from a pretrained encoder converted to Linformer", "",
        f"Source: {meta['source']}. {made_on(meta.get('run_devices'), meta['hardware'])}  ",
        f"Command: `{meta['command']}`", "",
        ("Accuracy in percent on the eval examples (SST-2: GLUE dev; IMDB: its test split, or a stratified subset of "
         "it where the recipe's eval count is under 25,000), "
         "averaged over seeds per example, with a 95% interval over seeds and examples (over the examples only "
         "where a cell says one seed). "
         f"{pairing_prose('vs teacher', 'the teacher')} "
         f"Finetuning recipe, read from the runs: {meta['recipe']}."), "",
        *table_lines(["model", "SST-2", "vs teacher", "IMDB", "vs teacher", "seeds (SST-2 / IMDB)", "ms / example",
                         "peak MiB / example"]),
    ]
    mixed_threads = len({c.get("threads") for c in costs.values()} - {None}) > 1
    for r in rows:
        c = costs.get(_arch(r), {})
        s, i = r["tasks"].get("sst2"), r["tasks"].get("imdb")
        seeds = " / ".join(str(len(x["seeds"])) if x else "-" for x in (s, i))
        mem = "-" if c.get("mib") is None else f"{c['mib']:.1f}"
        ms = "-" if c.get("ms") is None else f"{c['ms']:.1f}" + (f" ({c['threads']})" if mixed_threads else "")
        lines.append(table_row([r["name"], _cell_text(s), _diff_text(s), _cell_text(i), _diff_text(i), seeds, ms,
                                   mem]))
    lines += ["", _cost_line(costs, meta)]
    if meta.get("forest_png"):
        lines += ["", (f"Plot of the \"vs teacher\" columns (each cell's difference and interval, marked as here): "
                       f"`{Path(meta['forest_png']).name}`.")]
    lines += ["", "## Targets", "", TARGETS_PROSE, ""]
    lines += [f"- {t}" for t in targets(rows)]
    transfers = [r for r in rows if r.get("transfer_info")]
    if transfers:
        lines += ["", "## Transfer: relative error of each layer's output against the teacher (held-out blocks)", ""]
        for r in transfers:
            t = r["transfer_info"]
            rebuilt = t.get("rebuilt_within") or 0.0
            lines.append(f"- {r['name']}: {t['steps']} steps, {t['tokens']:,} tokens, train={t['train']}, "
                         f"target={t['target']}; before {_errors(t['rel_err_before'])}; "
                         f"after {_errors(t['rel_err_after'])}"
                         + (f" (rebuilt for some runs on another machine: its layer errors agree to {rebuilt:.0e} "
                            "relative)" if rebuilt else ""))
            builds = t.get("builds") or []
            if len(builds) > 1:
                lines.append(f"  - {len(builds)} builds of this transfer (a fresh machine rebuilds it; GPU kernels are "
                             "not bitwise reproducible); each cell's interval draws over its runs, so over their "
                             "builds too:")
                lines += [f"    - build {i}: before {_errors(b['rel_err_before'])}; after {_errors(b['rel_err_after'])}; "
                          f"runs {', '.join(b['runs'])}" for i, b in enumerate(builds, 1)]
    if lengths:
        lines += ["", "## Difference from the teacher by input length", "",
                  ("Each task's eval examples in length quartiles (tokens after truncation; examples per quartile in "
                  "brackets), each row's paired difference from the teacher inside each (points, 95% interval). "
                  f"Plot: `{Path(meta['by_length_png']).name}`."), ""]
        for task, result in lengths.items():
            lines += [*by_length.to_markdown(TITLES[task], result), ""]
    lines += protocol_notes(rows, meta)
    missing = meta.get("missing")
    if missing:
        lines += ["", f"## Not run yet ({len(missing)} runs)", "",
                  "The table holds the runs finished so far; the same command resumes the rest: "
                  + ", ".join(missing[:60]) + (" ..." if len(missing) > 60 else "")]
    return "\n".join(lines) + "\n"


RECIPE_KEYS = ("num_train_examples", "num_eval_examples", "lr", "batch_size", "max_length", "steps")


def recipe_from_runs(runs: list[dict]) -> str:
    """Each task's finetuning recipe as its runs' results.json record it; DataError when two runs of a task differ
    (a row trained otherwise would not be comparable with the others)."""
    parts = []
    for task in MIRROR_TASKS:
        task_runs = [r for r in runs if r["task"] == task]
        if not task_runs:
            continue
        first = task_runs[0]
        for r in task_runs[1:]:
            differ = [k for k in RECIPE_KEYS if r.get(k) != first.get(k)]
            if differ:
                raise DataError(f"{r['_dir']} was finetuned otherwise than {first['_dir']} "
                                f"({', '.join(f'{k}: {first.get(k)} vs {r.get(k)}' for k in differ)}): a table's "
                                "rows share one recipe")
        g = first.get
        parts.append(f"{TITLES[task]}: {g('num_train_examples')} train / {g('num_eval_examples')} eval examples, "
                     f"lr {g('lr')}, batch {g('batch_size')}, max length {g('max_length')}, {g('steps')} updates")
    return "; ".join(parts)


def by_length_title(meta: dict, what: str = "each row's accuracy minus the teacher's by input length") -> str:
    """What a figure of the report shows (`what`): the teacher, the profile its command names, and where the runs
    were made."""
    teacher = str(meta.get("source") or "teacher not recorded").split(" (")[0]
    profile = re.search(r"--profile[ =](\w+)", str(meta.get("command") or ""))
    return (f"Table 2, pretrained {teacher} teacher{f', profile {profile.group(1)}' if profile else ''}: {what}; "
            f"runs made on: {meta.get('run_devices') or 'not recorded'}")


FOREST_WHAT = "each row's accuracy minus the teacher's (the \"vs teacher\" columns), 95% interval over seeds and examples"


def draw_figures(meta: dict, breakdown: dict, out: str, rows: list[dict]) -> dict:
    """<out>_forest.png (the "vs teacher" columns, where a row has one) and, with a `breakdown`, <out>_by_length.png; `meta` with their
    repository-relative paths, the same on every checkout."""
    cells = forest.pretrained_cells({"rows": rows})
    if any(cells.values()):  # a table of the teacher alone has no difference to draw
        meta = {**meta, "forest_png": repo_relative(f"{out}_forest.png")}
        forest.plot(cells, f"{out}_forest.png", by_length_title(meta, FOREST_WHAT), "the teacher")
    if breakdown:
        meta = {**meta, "by_length_png": repo_relative(f"{out}_by_length.png")}
        by_length.plot(breakdown, TITLES, f"{out}_by_length.png", by_length_title(meta))
    return meta


def render(data: dict, out: str) -> dict:
    """The report written again from its JSON (``scripts/table2.py --render``): its table, its figures, nothing
    read from the runs or measured. Returns the JSON written (its meta with the figures' paths)."""
    rows = labelled_rows(data["rows"])
    meta = draw_figures(data["meta"], data.get("by_length") or {}, out, rows)
    atomic_write(f"{out}.md", to_markdown(rows, data["costs"], meta, data.get("by_length") or {}))
    data = {**data, "meta": meta, "rows": rows, "targets": targets(rows)}  # the targets as today's code judges them
    write_json(f"{out}.json", data)
    return data


def protocol_notes(rows: list[dict], meta: dict) -> list[str]:
    """The report's protocol section: each row's start weights, the runs left out for choosing on the reported
    split, and the eval examples left out because old runs trained on them."""
    lines = ["", "## Protocol", ""]
    conditioned = meta.get("kept_on_reported") or []
    if conditioned:
        lines += [(f"No run's reported model was chosen on the split it reports, but which runs are in the table "
                   f"partly was: {len(conditioned)} run(s) recorded before the protocol evaluated on the reported "
                   "split more than once during training and are in the table because their best evaluation there "
                   "was their last (those whose best was earlier are left out), so which seeds their rows hold was "
                   f"decided on that split: {', '.join(conditioned)}."), ""]
    lines.append(("" if conditioned else "Nothing in the table was chosen on the split it reports. ")
                 + "Start weights of each row (start_weights_sha256 of its runs):")
    for r in rows:
        st = r["starts"]
        hashes = ", ".join(f"{h[:12]} ({len(n)} run{'s' if len(n) > 1 else ''})" for h, n in st["hashes"].items())
        unrec = f"{len(st['unrecorded'])} run(s) recorded before runs recorded their start hash" \
            if st["unrecorded"] else ""
        text = "; ".join(x for x in (hashes, unrec) if x)
        lines.append(f"- {r['name']}: {text}" + (f". Declared by the plan: {st['declared']}" if st["declared"] else ""))
    excluded = meta.get("excluded") or []
    if excluded:
        lines += ["", (f"Left out: {len(excluded)} run(s) recorded before the protocol, whose reported epoch was "
                       "chosen on the reported split (their per-example predictions are that epoch's, so they pair "
                       "with nothing; the plan runs them again):"), ""]
        lines += [(f"- {e['run']}: chose step {e['chosen_step']} of {e['steps']} ({fmt1(100 * e['chosen_accuracy'])}); "
                   f"its last evaluation scored {_pct(e['last_accuracy'])}") for e in excluded]
    for task, c in (meta.get("contamination") or {}).items():
        lines += ["", _contamination_text(task, c)]
    return lines


def _contamination_text(task: str, c: dict) -> str:
    """``drop_trained_on``'s outcome for a task, in words."""
    if "not_made" in c:
        return (f"{TITLES[task]}: not checked for eval examples that {c['runs']} run(s) recorded before training "
                f"dropped the eval split's duplicates also trained on ({c['not_made']}): its accuracies and "
                "differences include any such examples.")
    return (f"{TITLES[task]}: {c['dropped']} of {c['examples']} eval examples left out of every row: runs recorded "
            "before training dropped the eval split's duplicates had them among their train rows "
            f"({c['runs']} run(s)). Runs made since train without them.")


def _pct(x: float | None) -> str:
    return "-" if x is None else fmt1(100 * x)


def drop_trained_on(runs: list[dict]) -> dict[str, dict]:
    """Per task where some run was recorded before training dropped the eval split's duplicates: the eval examples
    its train rows held (``by_length.trained_on_eval``, rebuilt from its config and the task data) are dropped from
    every run of the task, so every row is scored on the same clean examples. Returns {task: {"dropped",
    "examples", "runs"}}, or {task: {"not_made": why, "runs"}} where the config or the task data is not here: then
    the accuracies include those examples, which the report and stderr say."""
    out = {}
    for task in MIRROR_TASKS:
        task_runs = [r for r in runs if r["task"] == task]
        old = [r for r in task_runs if r.get("eval_duplicates_dropped") is None]
        if not old:
            continue
        try:
            seen = by_length.trained_on_eval(old[0])  # one recipe per table (recipe_from_runs): one train subset
        except (DataError, FileNotFoundError) as err:
            out[task] = {"not_made": str(err), "runs": len(old)}
            print(f"warning: {_contamination_text(task, out[task])}", file=sys.stderr)
            continue
        if seen.any():
            for r in task_runs:
                r["_kept"], r["_all_labels"] = ~seen, r["_labels"]
                r["_labels"], r["_correct"] = r["_labels"][~seen], r["_correct"][~seen]
        out[task] = {"dropped": int(seen.sum()), "examples": int(seen.size), "runs": len(old)}
    return out


def declared_rows(profile) -> dict[str, str]:
    """The profile's declared mixed starts (``Profile.mixed_starts``: policy -> reason) by the names of the rows
    they cover."""

    return {row_label(("linformer", k, sharing, policy_label(POLICIES[policy]), True)): reason
            for policy, reason in profile.mixed_starts.items() for k in profile.ks for sharing in profile.sharings}


def write_table(patterns: list[str], out: str, meta: dict, measure: bool | None = None, lengths: bool = True,
                declared: dict[str, str] | None = None, profile: str | None = None) -> dict:
    """<out>.md, <out>.json and <out>_forest.png (and <out>_by_length.png with ``lengths``: needs each teacher run's task data and
    tokenizer). The eval examples that old runs trained on are left out with or without ``lengths``
    (``drop_trained_on``: where the task data is not here, that check is not made, and the report says so).
    `measure`: ``table_costs``'s (None: keep the replaced report's costs). `declared`: row name -> why its runs may
    start from different weights. `profile`: the reproduce-pretrained
    profile whose recipe and unfinished jobs (meta's) the table states: refused over another profile's runs, and
    left out for runs of no profile."""
    runs = read_runs(patterns)
    if not runs:
        raise DataError(f"no finished finetuning runs with {PREDICTIONS} at or under {', '.join(patterns)}")
    if profile is not None and not check_profile_runs((Path(r["_dir"]).name for r in runs), profile, profile_of,
                                                      "make reproduce-pretrained", others_allowed=True):
        meta = {**meta, "recipe": None, "missing": None}  # not the experiment's runs: neither is theirs
    runs, excluded = protocol_exclusions(runs)
    if not runs:
        raise DataError(f"every run at or under {', '.join(patterns)} chose its epoch on the reported split: no table")
    meta = {**meta, "recipe": recipe_from_runs(runs) + (f"; {meta['recipe']}" if meta.get("recipe") else ""),
            "excluded": excluded, "kept_on_reported": kept_on_reported(runs)}
    if lengths:  # refused now, in one line, rather than after the contamination check and the cost columns
        check_length_data(runs)
    meta["contamination"] = drop_trained_on(runs)
    rows = build_rows(runs, declared)
    meta["run_devices"] = run_devices(runs)
    costs, meta = table_costs(rows, out, meta, measure)
    breakdown = length_breakdown(runs) if lengths else {}
    meta = draw_figures(meta, breakdown, out, rows)
    atomic_write(f"{out}.md", to_markdown(rows, costs, meta, breakdown))
    data = {"meta": meta, "rows": rows, "costs": costs, "targets": targets(rows), "by_length": breakdown}
    write_json(f"{out}.json", data)
    return data
