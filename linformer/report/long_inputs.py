"""Long inputs, where the Linformer pays off: a finetuned full-attention classifier lengthened to n tokens against
the same weights with Linformer attention, on the task's eval examples longer than the classifier's own limit.

The classifier (a finetuned BERT/RoBERTa-family one, or a Linformer in full mode) is converted at each n
(``from_pretrained_encoder``), its positions extended by Longformer's copy; its Linformer twin
keeps every weight and starts E and F as window means with the converted models' length policy. Nothing is trained
at the new length, so accuracy here is what conversion alone keeps. Beside accuracy: agreement with the full model
at the same n, and the forward time and peak memory per example at n tokens (the paper's setting; random weights of
the same configs, interleaved rounds: ``bench.per_example``). The reference row is the classifier as finetuned,
which reads each example's first tokens only.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from transformers import AutoModelForSequenceClassification

from .. import plots
from ..bench.common import beyond_flop_bound, flop_bound_warning, load_words, threads_words, warning_paragraph
from ..bench.per_example import cost_per_example
from ..data.io import configured_path, default_data_mirror, load_auto
from ..data.task_loading import load_task
from ..data.task_splits import longer_than
from ..data.tasks import TASKS
from ..data.tokenizer import load_tokenizer
from ..errors import ConfigError
from ..files.atomic import atomic_write, save_figure, write_json
from ..files.tables import table_lines, table_row
from ..modeling import LinformerForSequenceClassification
from ..modeling.configuration import exact_key_variants, exact_keys_label
from ..modeling.convert import NO_EXACT_KEYS, architecture, classifier_config
from ..modeling.flops import forward_flops_per_token
from ..modeling.loading import model_length
from ..train.distill import check_same_tokenization
from . import measured
from .length_policy import padded_batches
from .measured import check_measured_settings
from .paired import MIN_INTERVAL_EXAMPLES, bootstrap_interval, fmt1, interval_text, paired_difference
from .rows import relabelled

BASE = "as finetuned"  # the reference row's name: the classifier at its own n, each example cut to its first tokens
VARIANTS = ("full", "linformer k=")  # the rows measure() builds from the classifier at each n (the rest: students)


@dataclass
class Examples:
    """What a measurement runs on: the classifier (its directory and n), the students by row name, and the eval
    examples longer than the classifier's n (token ids, labels; how many there were of that length)."""
    classifier: str
    base_n: int
    students: dict[str, str]
    ids: list[list[int]]
    labels: np.ndarray
    longer: int
    pad_id: int


def prepare(given: str, task: str, ns: list[int], k: int, examples: int, students: list[str],
            rows: dict[str, dict] | None = None) -> Examples:
    """Check the classifier (a finetuned one with full attention, n below every ``ns``, k below every n),
    the settings of the `rows` to be built from it (``variants``) and each student (a Linformer sequence classifier
    of the classifier's vocabulary), then draw ``examples`` of the task's eval examples longer than the classifier's
    n at random (0: all). ConfigError naming the option."""
    classifier, config = classifier_config(given, "--classifier")
    base_n = model_length(config)
    if config.model_type == "linformer" and config.projects_keys:
        raise ConfigError(f"--classifier {given}: a finetuned classifier with full attention (a BERT/RoBERTa-family "
                          f"one, or a Linformer in full mode), not one with {config.attention_label} attention (the "
                          "Linformer rows are built from the full-attention one)")
    if min(ns) <= base_n or k >= min(ns):
        raise ConfigError(f"--ns {ns} --k {k}: every n must be above the classifier's n = {base_n}, and k below "
                          "every n")
    check_variants(classifier, ns, rows or {})
    configs = {name: classifier_config(name, "--students") for name in students}  # each one before any model loads
    for student_given, (_, student) in configs.items():
        if student.model_type != "linformer":
            raise ConfigError(f"--students {student_given}: a Linformer sequence classifier, not a "
                              f"{architecture(student)}")
        if student.max_seq_len < min(ns):  # a student is a row at every n up to its own: here at none
            raise ConfigError(f"--students {student_given}: its n = {student.max_seq_len} is below every --ns "
                              f"{ns}, so it would have no row: give an --ns of at most {student.max_seq_len}, or "
                              "leave it out")
    tokenizer = load_tokenizer(classifier, "--classifier")
    named = {}
    for student_given, (path, student) in configs.items():
        check_same_tokenization(tokenizer, load_tokenizer(path, "--students"), f"--classifier {classifier}",
                                f"--students {student_given}")
        exact = (f" + {exact_keys_label(student.local_window, student.global_positions, student.landmark_pooling)}"
                 if student.local_window or student.global_positions else "")
        named[f"{Path(student_given).name} ({student.attention_label}{exact}, n = {student.max_seq_len})"] = path
    # one token past the largest n: an example that long reaches every n, and its length says "longer than all"
    split = load_task(task, str(Path(default_data_mirror()) / TASKS[task].mirror_subdir), tokenizer, max(ns) + 1,
                      splits=("eval",), cache_dir=configured_path("finetune", "task_cache_dir"))["eval"]
    rows, available = longer_than(split, base_n, examples, f"--task {task}")
    return Examples(classifier, base_n, named, rows["input_ids"], np.asarray(rows["labels"]), available,
                    tokenizer.pad_token_id)


def reached(ns: list[int], ids: list[list[int]]) -> tuple[list[int], list[int]]:
    """(the ns some example reaches, those none does): a row at an n no input reaches repeats the row below it, as if
    measured at a length that was never seen. ConfigError when no n is reached."""
    longest = max(map(len, ids))
    kept = [n for n in ns if longest >= n]
    if not kept:
        raise ConfigError(f"--ns {' '.join(map(str, ns))}: no example of the sample reaches any of them (the longest "
                          f"has {longest} tokens): give an n of at most {longest}")
    return kept, [n for n in ns if n not in kept]


def longest_text(lengths: dict, ns: list[int]) -> str:
    """The sample's longest input as the report prints it: its tokens, or 'over N' when it was cut at max(ns) + 1."""
    top = max(ns)
    return f"over {top:,} tokens" if lengths["max"] > top else f"{lengths['max']:,} tokens"


def header(run: Examples, result: dict, given: str, task: str, k: int, sharing: str, provenance: list[str],
           dropped: list[int] = ()) -> list[str]:
    """The report's lines above the table: what was measured, on which examples, how, where and by which command."""
    lens = result["lengths"]
    return [(f"Classifier: `{given}` (finetuned at n = {run.base_n}); positions extended by copying its learned rows; "
             f"the Linformer twin: k = {k}, {sharing}, E/F as window means, the converted length policy. Nothing "
             "trained at the new lengths" + (f" but the students: {', '.join(run.students)}." if run.students
                                             else ".")),
            (f"Examples: {len(run.ids)} {task} eval examples longer than {run.base_n} tokens (of {run.longer}; "
             f"from {lens['min']:,} tokens, median {lens['median']:,.0f}; the longest input of the sample: "
             f"{longest_text(lens, result['ns'])}), each truncated to n."
             + (f" No row at n = {', '.join(f'{n:,}' for n in dropped)}: no input of the sample reaches it."
                if dropped else "")),
            ("Cost: forward time and peak memory per example at n tokens (batch 1, median of 3 interleaved rounds), "
             "and their ratios to full attention at the same n, measured side by side."),
            *provenance]


def truncate(ids: list[int], n: int) -> list[int]:
    """The first n tokens with the closing token ([SEP] or </s>) kept last, as the tokenizer truncates."""
    return ids if len(ids) <= n else ids[: n - 1] + ids[-1:]


@torch.no_grad()
def predict(model, ids: list[list[int]], n: int, pad_id: int, batch_size: int,
            progress: Callable[[str], None] | None = None) -> np.ndarray:
    """Predicted labels in the order of ``ids``, each example truncated to n tokens; padded batches of similar
    length (the models' outputs do not depend on padding)."""
    cut = [truncate(x, n) for x in ids]
    order = sorted(range(len(cut)), key=lambda i: len(cut[i]))  # padded_batches' order
    preds = []
    for b, batch in enumerate(padded_batches(cut, pad_id, batch_size).batches):
        preds.append(model(**batch).logits.argmax(-1))
        if progress and b % 10 == 9:
            progress(f"  {min((b + 1) * batch_size, len(cut))}/{len(cut)}")
    out = np.empty(len(cut), dtype=np.int64)
    out[order] = torch.cat(preds).numpy()
    return out


def variants(k: int, sharing: str, local_windows=(), global_positions=(0, -1), landmarks: bool = False,
             overlap: bool = False) -> dict[str, dict]:
    """The rows ``measure`` builds from the classifier at each n: name -> the settings ``from_pretrained_encoder``
    takes (besides max_seq_len)."""
    twin = dict(attention="linformer", projected_dim=k, sharing=sharing, **NO_EXACT_KEYS)  # the paper's Linformer: projected keys alone
    rows = {"full": {"attention": "full"}, f"linformer k={k}": twin}
    for label, fields in exact_key_variants(local_windows, global_positions, landmarks, overlap).items():
        rows[f"linformer k={k} + {label}"] = {**twin, **fields}
    return rows


# the option that sets each LinformerConfig field of the measured rows (long_inputs.py)
OPTIONS = {"projected_dim": "--k", "sharing": "--sharing", "max_seq_len": "--ns", "local_window": "--local-windows",
           "global_positions": "--global-positions"}


def run(classifier: str, task: str, ns: list[int], k: int, sharing: str, out: str, examples: int = 200,
        batch_size: int = 4, students: list[str] = (), local_windows: tuple[int, ...] = (),
        global_positions: tuple[int, ...] = (0, -1), landmarks: bool = False, overlap: bool = False,
        warn: Callable[[str], None] | None = None) -> dict:
    """scripts/long_inputs.py's measurement, whole: the rows (``variants``) checked with the classifier and the
    students (``prepare``), measured at each n some input reaches (``reached``, ``measure``), and the report written
    to `out` (.md, .json, .png) with its header; `warn` (default: a line on stderr) takes each time ratio far below
    its FLOP ratio (``beyond_flops_warnings``). Returns the measurement."""
    started = measured.start()
    rows = variants(k, sharing, tuple(local_windows), tuple(global_positions), landmarks, overlap)
    examples_run = prepare(classifier, task, ns, k, examples, list(students), rows)
    reached_ns, dropped = reached(ns, examples_run.ids)
    result = measure(examples_run.classifier, examples_run.ids, examples_run.labels, reached_ns, k, sharing,
                     examples_run.pad_id, batch_size, local_windows=tuple(local_windows),
                     global_positions=tuple(global_positions), students=examples_run.students, landmarks=landmarks,
                     overlap=overlap, rows_at_n=rows)
    command, provenance = measured.provenance("scripts/long_inputs.py", started)
    result["load"] = load_words(started.load)  # what the time ratios were measured under
    for line in beyond_flops_warnings(result):
        (warn or (lambda text: print(text, file=sys.stderr)))(line)
    write_report(result, out, header(examples_run, result, classifier, task, k, sharing, provenance, dropped),
                 {"command": command})
    return result


def check_variants(classifier: str, ns: list[int], rows: dict[str, dict]) -> None:
    """Every row's settings at every n, from the configs alone (``convert.check_settings``): a bad one is one
    ConfigError naming the options, before any example is read or model built."""
    for n in ns:
        for fields in rows.values():
            check_measured_settings(classifier, {"max_seq_len": n, **fields}, OPTIONS)


def measure(classifier: str, ids: list[list[int]], labels: np.ndarray, ns: list[int], k: int, sharing: str,
            pad_id: int, batch_size: int = 4, cost_reps: int = 3, local_windows: tuple[int, ...] = (),
            global_positions: tuple[int, ...] = (0, -1), students: dict[str, str] | None = None,
            progress: Callable[[str], None] = print, landmarks: bool = False, overlap: bool = False,
            rows_at_n: dict[str, dict] | None = None) -> dict:
    """Rows: the classifier at its own n, then per n the full model, its Linformer twin and, per window w in
    ``local_windows``, the twin with exact local keys of w tokens and the global tokens beside the projected ones
    (with ``landmarks`` also with landmark pooling, with ``overlap`` each of those also under overlap_columns "mask"
    and "reduce"), then each of ``students`` (name -> directory: a Linformer classifier trained at length, distilled
    from the classifier, say) whose n reaches n (accuracy, interval, agreement with the full model at n, paired
    difference, ms and MiB per example at n tokens and their ratios to full attention, measured side by side; every
    example's prediction). `rows_at_n`: the rows ``variants`` gives for these settings, where the caller has them
    (``run``); else built here."""
    base = load_auto(AutoModelForSequenceClassification, classifier).eval()
    base_n = model_length(base.config)
    rows = []

    def row(name: str, n: int, attention: str, preds: np.ndarray, full: np.ndarray | None, cost: dict | None):
        correct = (preds == labels).astype(float)
        out = {"model": name, "n": n, "attention": attention, "accuracy": float(correct.mean()),
               "interval": bootstrap_interval(correct), "examples": len(labels),
               "truncated": int(sum(len(x) > n for x in ids)), "predictions": preds.tolist()}
        if full is not None:
            out["agreement"] = float((preds == full).mean())
            out["difference"] = paired_difference(correct, (full == labels).astype(float))
        return out | (cost or {})

    progress(f"the classifier as finetuned (n = {base_n})")
    rows.append(row(BASE, base_n, "full", predict(base, ids, base_n, pad_id, batch_size, progress), None,
                    None))
    if rows_at_n is None:
        rows_at_n = variants(k, sharing, local_windows, global_positions, landmarks, overlap)
    for n in ns:
        models = {name: LinformerForSequenceClassification.from_pretrained_encoder(classifier, max_seq_len=n,
                                                                                   **fields).eval()
                  for name, fields in rows_at_n.items()}
        for name, path in (students or {}).items():
            student = load_auto(AutoModelForSequenceClassification, path).eval()
            if student.config.max_seq_len >= n:  # inputs cut to n tokens, as every row's
                models[name] = student
        costs = cost_per_example({name: m.config for name, m in models.items()}, n=n, batch=1, reps=cost_reps)
        for name, cost in costs.items():  # side by side in one run: ratios hold where absolute figures move
            # the FLOP count bounds what the attention can save where the feed-forward layers cost the same
            cost["gflops"] = forward_flops_per_token(models[name].config, n) * n / 1e9
            for key in ("gflops", "ms", "mib", "tensor_mib"):
                if cost.get(key) and costs["full"].get(key):
                    cost[f"{key}_vs_full"] = cost[key] / costs["full"][key]
        full = None
        for name, model in models.items():
            progress(f"n = {n}, {name}")
            preds = predict(model, ids, n, pad_id, batch_size, progress)
            rows.append(row(name, n, model.config.attention_label, preds, full, costs[name])
                        | ({"student": True} if name in (students or {}) else {}))
            full = preds if full is None else full
        del models
    majority = max(float(np.mean(labels == c)) for c in np.unique(labels))
    return {"rows": rows, "base_n": base_n, "k": k, "sharing": sharing, "labels": labels.tolist(), "ns": list(ns),
            "majority_rate": majority,
            "lengths": {"min": int(min(map(len, ids))), "median": float(np.median([len(x) for x in ids])),
                        "max": int(max(map(len, ids)))}}


def _is_student(r: dict) -> bool:
    return r.get("student", r["model"] != BASE and not r["model"].startswith(VARIANTS))


def paired_rows(result: dict) -> list[dict]:
    """Each row at a lengthened n against the classifier as finetuned (what a user without long-input support runs:
    every example cut to its first base_n tokens), and against every full-attention student at the same n (a
    teacher trained at that length, against which its distilled twins are judged): paired differences with their
    95% intervals, from the rows' per-example predictions."""
    labels = np.asarray(result["labels"])
    rows = result["rows"]
    preds = [np.asarray(r["predictions"]) for r in rows]
    base = next(i for i, r in enumerate(rows) if r["model"] == BASE)
    out = []
    for i, r in enumerate(rows):
        if i == base:
            continue
        references = [base] + [j for j, x in enumerate(rows) if x["n"] == r["n"] and j != i and _is_student(x)
                               and x["attention"].startswith("full")]
        for j in references:
            out.append({"n": r["n"], "model": r["model"], "against": rows[j]["model"], "against_n": rows[j]["n"],
                        "difference": paired_difference((preds[i] == labels).astype(float),
                                                        (preds[j] == labels).astype(float)),
                        "agreement": float((preds[i] == preds[j]).mean())})
    return out


def _pct(x) -> str:
    return "" if x is None else fmt1(100 * x)


# every row is one model (one finetuning seed, or none): its intervals resample its examples and nothing else
SINGLE_RUNS = ("Intervals (95%): a bootstrap over the examples of single runs, each row one model of one finetuning "
               "seed, so they say how much another sample of reviews would move a result, not how much another "
               "seed of a trained row would: a difference between two trained rows may be that much less sure.")


def to_markdown(result: dict, header: list[str]) -> str:
    majority = result.get("majority_rate")
    lines = ["# Long inputs: a finetuned classifier lengthened, with full and Linformer attention", "", *header]
    if majority is not None:
        lines.append(f"Always answering the examples' majority class scores {_pct(majority)}: an accuracy near it "
                     "means the model has lost the task.")
    lines += ["", ("Memory: the process's peak resident memory, which moves with the heap's state; tensor memory: the "
                   "peak of live torch tensors, replayed from the profiler's allocations (the same every run)."),
              ("FLOPs: the forward pass's count (linformer.modeling.flops), what time vs full would be if every "
               "operation ran at the same speed: the feed-forward layers cost the same in every row, so they bound "
               "what the attention can save."),
              SINGLE_RUNS,
              "", *table_lines(["model", "n", "accuracy (95% CI)", "agreement with full at n",
                                "difference vs full (95% CI)", "FLOPs vs full", "time vs full", "memory vs full",
                                "tensor memory vs full", "ms / example at n", "MiB / example at n",
                                "tensor MiB / example at n"])]
    for r in result["rows"]:
        examples = r.get("examples", MIN_INTERVAL_EXAMPLES)
        accuracy = f"{_pct(r['accuracy'])} " + interval_text(100 * r["interval"][0], 100 * r["interval"][1], examples,
                                                             brackets="()", sep="-")
        diff = r.get("difference")
        diff_text = "" if diff is None else \
            f"{fmt1(diff['diff'], True)} {interval_text(diff['lo'], diff['hi'], examples, True, '()')}"
        ratios = [f"{r[key]:.2f}x" if r.get(key) is not None else ""
                  for key in ("gflops_vs_full", "ms_vs_full", "mib_vs_full", "tensor_mib_vs_full")]
        cells = ["" if r.get(key) is None else f"{r[key]:.0f}" for key in ("ms", "mib", "tensor_mib")]
        lines.append(table_row([r["model"], r["n"], accuracy, _pct(r.get("agreement")), diff_text, *ratios, *cells]))
    lines += _thread_lines(result)
    pairs = paired_rows(result)
    if pairs:
        examples = len(result["labels"])
        lines += ["", "## Paired differences", "",
                  ("Each row against the classifier as finetuned (every example cut to its first "
                   f"{result['base_n']} tokens) and against each full-attention student at the same n (a teacher "
                   "trained at that length): accuracy difference on the same examples, with its paired bootstrap "
                   "95% interval over the examples (single runs: no seed variance)."), "",
                  *table_lines(["model", "n", "against", "difference (95% CI)", "agreement"])]
        for p in pairs:
            d = p["difference"]
            against = p["against"] + (f" (n = {p['against_n']})" if p["against_n"] != p["n"] else "")
            lines.append(table_row([p["model"], p["n"], against,
                                    f"{fmt1(d['diff'], True)} {interval_text(d['lo'], d['hi'], examples, True, '()')}",
                                    _pct(p["agreement"])]))
    return "\n".join(lines) + "\n"


def beyond_flops_warnings(result: dict) -> list[str]:
    """A warning line for each row whose time against full attention beats its FLOPs against full attention by far
    (bench.common.beyond_flop_bound), naming the machine's load over the measurement and each model's threads."""
    full = {r["n"]: r for r in result["rows"] if r["model"] == "full"}
    return [flop_bound_warning(f"{r['model']} at n = {r['n']}", 1 / r["ms_vs_full"], 1 / r["gflops_vs_full"],
                               result.get("load") or "load average not recorded",
                               f"it at {threads_words(r.get('threads'))} and full attention at "
                               f"{threads_words(full.get(r['n'], {}).get('threads'))}")
            for r in result["rows"] if r.get("ms_vs_full") and r.get("gflops_vs_full")
            and beyond_flop_bound(1 / r["ms_vs_full"], 1 / r["gflops_vs_full"])]


def _thread_lines(result: dict) -> list[str]:
    """The CPU threads each row's timed forwards ran with (under the adaptive policy a Linformer's follow the cores
    other processes leave free, full attention keeps torch's setting), and the beyond_flops_warnings."""
    timed = [r for r in result["rows"] if r.get("threads")]
    out = ["", "CPU threads per timed forward: " + "; ".join(f"{r['model']} at n = {r['n']}: {r['threads']}"
                                                               for r in timed) + "."] if timed else []
    warnings = beyond_flops_warnings(result)
    return out + (["", *map(warning_paragraph, warnings)] if warnings else [])


def plot(result: dict, path: str, header: list[str] | None = None) -> None:
    """Accuracy and cost per example against n, full and Linformer side by side (one row per model instead when
    every row is at one n: points on a single n would sit on one vertical line); the title names what is shown and
    the machine `header` (default: the result's) records."""
    header = header or result.get("header") or []
    plt = plots.pyplot()
    rows = [r for r in result["rows"] if r["model"] != BASE]
    if len({r["n"] for r in rows}) == 1:
        return _plot_one_n(rows, result, header, path, plt)
    fig, axes = plots.figure(3, size=(13, 3.8))
    axes = axes[0]
    names = list(dict.fromkeys(r["model"] for r in rows))
    for name, colour, marker in zip(names, plots.colours(len(names)), plots.markers(len(names))):
        mine = [r for r in rows if r["model"] == name]
        style = dict(marker=marker, color=colour, label=name, linestyle=plots.FULL_STYLE if name == "full" else "-")
        acc = np.array([100 * r["accuracy"] for r in mine])
        lo, hi = (np.array([100 * (r.get("interval") or [r["accuracy"]] * 2)[i] for r in mine]) for i in (0, 1))
        axes[0].errorbar([r["n"] for r in mine], acc, yerr=[acc - lo, hi - acc], capsize=3, **style)
        for ax, key in ((axes[1], "ms"), (axes[2], "mib")):
            # a value not measured is left out (no point), never drawn as 0
            measured = [(r["n"], r[key]) for r in mine if r.get(key) is not None]
            if measured:
                ax.plot(*zip(*measured), **style)
    base = result["rows"][0]
    axes[0].axhline(100 * base["accuracy"], color="grey", ls="--", label=f"as finetuned (n = {base['n']})")
    ns = sorted({r["n"] for r in rows})
    for ax, title, unit in zip(axes, ("accuracy (95% interval)", "forward time per example",
                                      "peak memory per example"), ("accuracy (%)", "ms", "MiB")):
        ax.set_xscale("log", base=2)
        ax.set_xticks(ns, [f"{n:,}" for n in ns])  # a tick at every measured n, written out
        ax.minorticks_off()
        ax.set_xlabel("n (tokens)")
        ax.set_ylabel(unit)
        ax.set_title(title)
    plots.title(fig, "Long inputs: " + _figure_subject(result, header))
    # one legend under the panels: the rows' names are long (a student's says what it is)
    plots.legend_below(fig, *axes[0].get_legend_handles_labels())
    save_figure(fig, path)


def _figure_subject(result: dict, header: list[str]) -> str:
    """What the figure shows, for its title: the reference classifier's n and examples, and the machine its header
    records."""
    base = result["rows"][0]
    return (f"accuracy and cost by input length n, against the classifier finetuned at n = {base['n']:,} "
            f"({base.get('examples', '?')} examples); {plots.machine(header)}")


def _plot_one_n(rows: list[dict], result: dict, header: list[str], path: str, plt) -> None:
    """Every row at one n, top to bottom as in the table: accuracy with its 95% interval beside the truncated
    classifier's, and time and tensor memory as ratios to full attention, with the FLOP ratio marked (what the time
    would be if every operation ran at the same speed)."""
    base = result["rows"][0]
    names = [r["model"] for r in rows]
    y = np.arange(len(rows))[::-1]
    fig, axes = plt.subplots(1, 3, figsize=(15, 1.2 + 0.42 * len(rows)), sharey=True,
                             gridspec_kw={"width_ratios": [1.4, 1, 1]})
    acc = np.array([100 * r["accuracy"] for r in rows])
    lo, hi = (np.array([100 * r["interval"][i] for r in rows]) for i in (0, 1))
    axes[0].errorbar(acc, y, xerr=[acc - lo, hi - acc], fmt="o", capsize=3)
    axes[0].axvline(100 * base["accuracy"], color="grey", ls="--", label=f"as finetuned (n = {base['n']})")
    axes[0].legend(fontsize=8, loc="lower left")
    axes[0].set_title(f"accuracy (%) at n = {rows[0]['n']:,}\n(95% interval)")
    for ax, key, title in ((axes[1], "ms_vs_full", "time vs full attention\n(x: FLOPs vs full)"),
                           (axes[2], "tensor_mib_vs_full" if any("tensor_mib_vs_full" in r for r in rows)
                            else "mib_vs_full", "tensor memory\nvs full attention")):
        # a row without the value gets no bar and says so, never a bar of 0
        ax.barh(y, [r.get(key) if r.get(key) is not None else np.nan for r in rows], color="tab:blue", alpha=0.7)
        for r, yi in zip(rows, y):
            if r.get(key) is None:
                ax.text(0.02, yi, "not measured", va="center", fontsize=8, transform=ax.get_yaxis_transform())
        ax.axvline(1.0, color="grey", ls="--")
        ax.set_title(title)
    flops = [(r["gflops_vs_full"], yi) for r, yi in zip(rows, y) if r.get("gflops_vs_full")]
    if flops:
        axes[1].plot(*zip(*flops), "kx")
    axes[0].set_yticks(y, names, fontsize=8)
    plots.title(fig, "Long inputs: " + _figure_subject(result, header))
    fig.tight_layout()
    save_figure(fig, path)


def write_report(result: dict, out: str, header: list[str], meta: dict) -> None:
    """<out>.md, .json (the result with its header, so that render() can write the report again) and .png."""
    atomic_write(f"{out}.md", to_markdown(result, header))
    write_json(f"{out}.json", {**meta, **result, "header": header})
    plot(result, f"{out}.png", header)


def render(measured: dict, out: str) -> None:
    """The report written again from a JSON that write_report wrote (its tables and figure from the recorded
    predictions and costs, nothing measured again)."""
    if "header" not in measured or "rows" not in measured:
        raise ConfigError("--render reads a JSON written by scripts/long_inputs.py with its header; this one has "
                          f"no {'header' if 'rows' in measured else 'rows'}: measure again.")
    measured = relabelled(measured)  # the rows' names as today's reports give them; numbers untouched
    result = {k: v for k, v in measured.items() if k not in ("command", "header")}
    header = measured["header"]
    write_report(result, out, [*header, *unreached_note(result, header)], {"command": measured.get("command")})


def unreached_note(result: dict, header: list[str]) -> list[str]:
    """For a report measured before rows were kept to the ns its inputs reach: a line naming the rows at an n that
    no input of the sample reaches (they score whole inputs of at most the longest's tokens in a model built for n),
    once."""
    longest = (result.get("lengths") or {}).get("max")
    if longest is None or any("no input reaches" in line or "no input of the sample reaches" in line
                              for line in header):
        return []
    over = sorted({r["n"] for r in result["rows"] if r["n"] > longest})
    if not over:
        return []
    return [(f"The longest input of the sample has {longest:,} tokens: no input reaches n = "
             f"{', '.join(f'{n:,}' for n in over)}, so those rows score whole inputs of at most {longest:,} tokens in "
             "models built for n (measured before the report kept its rows to the ns its inputs reach; a new "
             f"measurement takes --ns of at most {longest:,}).")]
