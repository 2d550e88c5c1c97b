"""Which length policy keeps a converted Linformer closest to its source, measured before any training.

For each policy and k, the source is converted (E, F start as window means; no transfer) and run on a task's eval
examples in padded batches, beside the source itself with full attention. Per example: the relative error
||linformer - source|| / ||source|| of the mean-pooled sentence embedding (what a mean-pooling classifier reads)
and of the last layer's hidden states at the real tokens. Reported as means by input length, so the policies'
effect on short and long inputs shows separately, and as the median embedding error over all examples (what an error
target on the typical input states; records measured before per-example errors were kept have means only).
Finetuning adapts every weight afterwards, so this ranks the starting points; the Table 2 runs decide accuracy.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from .. import plots
from ..data.io import configured_path, default_data_mirror
from ..data.task_loading import load_task
from ..data.task_splits import longer_than
from ..data.tasks import TASKS
from ..data.tokenizer import load_tokenizer
from ..devices import DTYPES
from ..errors import ConfigError
from ..files.atomic import atomic_write, save_figure, write_json
from ..files.tables import table_lines, table_row
from ..modeling import LinformerModel
from ..modeling.configuration import exact_key_variants
from ..modeling.convert import NO_EXACT_KEYS
from ..modeling.loading import resolve_model_path
from . import measured
from .measured import check_measured_settings
from .paired import LEVEL, combined
from .rows import relabelled

# label -> LinformerConfig fields (projected keys alone: the exact keys are rows of their own, with_local_keys)
POLICIES = {
    "slice": dict(length_policy="slice", mask_empty_windows=False, exact_short_inputs=False, **NO_EXACT_KEYS),
    "slice, window mask": dict(length_policy="slice", mask_empty_windows=True, exact_short_inputs=False,
                               **NO_EXACT_KEYS),
    "resample": dict(length_policy="resample", mask_empty_windows=False, exact_short_inputs=False, **NO_EXACT_KEYS),
    "slice, window mask, exact <= k": dict(length_policy="slice", mask_empty_windows=True, exact_short_inputs=True,
                                           **NO_EXACT_KEYS),
    "resample, exact <= k": dict(length_policy="resample", mask_empty_windows=False, exact_short_inputs=True,
                                 **NO_EXACT_KEYS),
}
CONVERTED = "resample, exact <= k"  # convert.CONVERTED_LENGTH_POLICY
# a row's per-example embedding errors, in its task's batch order (the same order in every row of that task), to 6
# significant digits: what the best policy's interval pairs (``best_margin``)
PER_EXAMPLE = "embedding_per_example"
VERDICT = "Best by mean embedding error over tasks and k:"  # the report's line under its header
BUCKETS = (16, 32, 64, 128, 256, 512, 1024, 2048, 4096)  # upper token counts of the length buckets


def with_local_keys(windows: list[int], global_positions: list[int], local_only: bool = False,
                    landmarks: bool = False, overlap: bool = False) -> dict[str, dict]:
    """POLICIES (or only the converted one) and, per window w, the converted policy with exact local keys of w
    tokens and the global tokens beside the projected ones (and, with ``landmarks``, with landmark pooling too; with
    ``overlap``, each also with the columns the exact keys hold masked, and with their counts lowered)."""
    policies = {CONVERTED: POLICIES[CONVERTED]} if local_only else dict(POLICIES)
    for label, fields in exact_key_variants(windows, global_positions, landmarks, overlap).items():
        policies[f"{CONVERTED}, {label}"] = {**POLICIES[CONVERTED], **fields}
    return policies


@dataclass
class Inputs:
    """One task's eval examples, sorted by length and cut into padded batches."""
    batches: list[dict[str, torch.Tensor]]
    lengths: np.ndarray  # tokens per example, in batch order


def padded_batches(ids: list[list[int]], pad_id: int, batch_size: int) -> Inputs:
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
    batches = []
    for start in range(0, len(order), batch_size):
        rows = [ids[i] for i in order[start : start + batch_size]]
        T = max(map(len, rows))
        input_ids = torch.full((len(rows), T), pad_id)
        mask = torch.zeros(len(rows), T, dtype=torch.long)
        for r, row in enumerate(rows):
            input_ids[r, : len(row)], mask[r, : len(row)] = torch.tensor(row), 1
        batches.append({"input_ids": input_ids, "attention_mask": mask})
    return Inputs(batches, np.array([len(ids[i]) for i in order]))


@torch.no_grad()
def outputs(model, inputs: Inputs) -> list[torch.Tensor]:
    """The last hidden states of every batch (B, T, D), in batch order."""
    return [model(**batch).last_hidden_state for batch in inputs.batches]


def example_errors(student: list[torch.Tensor], teacher: list[torch.Tensor], inputs: Inputs) -> dict[str, np.ndarray]:
    """Per example: relative error of the mean-pooled embedding and of the hidden states at the real tokens."""
    embedding, hidden = [], []
    for s, t, batch in zip(student, teacher, inputs.batches):
        m = batch["attention_mask"].unsqueeze(-1).to(t.dtype)
        s_mean, t_mean = (s * m).sum(1) / m.sum(1), (t * m).sum(1) / m.sum(1)
        embedding.append(((s_mean - t_mean).norm(dim=-1) / t_mean.norm(dim=-1)).numpy())
        diff = ((s - t) * m).flatten(1).norm(dim=-1) / (t * m).flatten(1).norm(dim=-1)
        hidden.append(diff.numpy())
    return {"embedding": np.concatenate(embedding), "hidden": np.concatenate(hidden)}


def by_bucket(lengths: np.ndarray, errors: np.ndarray) -> dict[str, dict]:
    """{"1-16": {"examples": ..., "mean": ...}, ...} over the BUCKETS that hold examples."""
    out, low = {}, 1
    for high in BUCKETS:
        inside = (lengths >= low) & (lengths <= high)
        if inside.any():
            out[f"{low}-{high}"] = {"examples": int(inside.sum()), "mean": float(errors[inside].mean())}
        low = high + 1
    return out


def load_examples(tokenizer, counts: dict[str, int], n: int, longer_than_tokens: int = 0, split: str = "eval"
                  ) -> tuple[dict[str, Inputs], dict[str, int]]:
    """The padded batches of 32 of each task of `counts` (task -> examples; 0 skips it) from the data mirror's
    `split`: a stratified subset, or with `longer_than_tokens` drawn at random among the examples longer than that
    (tokenized at `n`); and, for those, how many there were (task -> count)."""
    mirror = Path(default_data_mirror())
    tasks, drawn = {}, {}
    for task, count in counts.items():
        if not count:
            continue
        directory = str(mirror / TASKS[task].mirror_subdir)
        if longer_than_tokens:
            examples = load_task(task, directory, tokenizer, n, splits=(split,),
                                 cache_dir=configured_path("finetune", "task_cache_dir"))[split]
            examples, drawn[task] = longer_than(examples, longer_than_tokens, count, f"--{task} {count}")
        else:
            examples = load_task(task, directory, tokenizer, n, splits=(split,), max_examples={split: count})[split]
        tasks[task] = padded_batches(examples["input_ids"], tokenizer.pad_token_id, 32)
    if not tasks:
        raise ConfigError(" and ".join(f"--{task} 0" for task in counts) + ": no examples to measure")
    return tasks, drawn


def header(source: str, n: int, sharing: str, dtypes: list[str], tasks: dict[str, Inputs], drawn: dict[str, int],
           longer_than_tokens: int, split: str, provenance: list[str]) -> list[str]:
    """The report's lines above its tables: the models, the examples, where and how it was measured."""
    run_in = "" if dtypes == ["fp32"] else f", run in {' and '.join(dict.fromkeys(dtypes))}"
    return [(f"Source: `{source}`, converted at n = {n}, {sharing} sharing, E/F as window means (no transfer, no "
             f"finetuning){run_in}; reference: the source with full attention in fp32."),
            "Examples: " + ", ".join(_examples_text(t, len(i.lengths), drawn.get(t), longer_than_tokens, split)
                                     for t, i in tasks.items()) + ", padded batches of 32 sorted by length.",
            *provenance]


def _examples_text(task: str, count: int, available: int | None, longer_than_tokens: int, split: str) -> str:
    clean = "" if split == "eval" else f"none whose text is also in its {TASKS[task].eval_split} split; "
    if available is None:
        return f"{task} {count} {split} examples ({clean}stratified subset)"
    how = "all of them" if count == available else f"drawn at random from {available}"
    return f"{task} {count} {split} examples longer than {longer_than_tokens} tokens ({clean}{how}, cut to n)"


# the option that sets each LinformerConfig field of the measured models (length_policy.py)
OPTIONS = {"projected_dim": "--ks", "sharing": "--sharing", "max_seq_len": "--n", "local_window": "--local-windows",
           "global_positions": "--global-positions"}


def run(source: str, ks: list[int], sharing: str, n: int, counts: dict[str, int], out: str,
        local_windows: list[int] = (), global_positions: list[int] = (0, -1), local_only: bool = False,
        landmarks: bool = False, overlap: bool = False, longer_than_tokens: int = 0, split: str = "eval",
        dtypes: list[str] = ("fp32",), progress=print) -> dict:
    """scripts/length_policy.py's measurement, whole: the options checked (ConfigError naming the flag), the
    converted models' settings checked from the configs (``check_models``), the examples drawn (``load_examples``;
    `counts`: task -> examples, 0 to skip it), each policy measured (``measure``) and the report written to `out`
    (.md, .json, .png) with its header. Returns the measurement."""
    if min(ks) < 1 or max(ks) > n:
        raise ConfigError(f"--ks {list(ks)}: each k must be in 1..n={n}")
    if not 0 <= longer_than_tokens < n:
        raise ConfigError(f"--longer-than {longer_than_tokens}: a token count in 0..n-1 (--n {n})")
    started = measured.start()
    model = resolve_model_path(source, "--source")
    policies = with_local_keys(list(local_windows), list(global_positions), local_only, landmarks, overlap)
    check_models(model, ks, sharing, n, policies)
    tokenizer = load_tokenizer(model, "--source")
    tasks, drawn = load_examples(tokenizer, counts, n, longer_than_tokens, split)
    results = measure(model, tasks, ks, sharing, n, policies, progress=progress, dtypes=tuple(dict.fromkeys(dtypes)))
    command, provenance = measured.provenance("scripts/length_policy.py", started)
    lines = header(source, n, sharing, list(dtypes), tasks, drawn, longer_than_tokens, split, provenance)
    write_report(results, out, lines, {"command": command, "machine": provenance[0], "split": split})
    return results


def check_models(source: str, ks: list[int], sharing: str, n: int, policies: dict[str, dict] = POLICIES) -> None:
    """The settings of every model ``measure`` converts, from the configs alone (``convert.check_settings``): a bad
    one is one ConfigError naming the options, before any example is read or weight loaded."""
    for k, fields in itertools.product(ks, policies.values()):
        check_measured_settings(source, _settings(k, sharing, n, fields), OPTIONS, LinformerModel)


def _settings(k: int, sharing: str, n: int, fields: dict) -> dict:
    """The conversion settings of the model measured at k with a policy's `fields`."""
    return dict(projected_dim=k, sharing=sharing, max_seq_len=n, **fields)


def measure(source: str, tasks: dict[str, Inputs], ks: list[int], sharing: str, n: int,
            policies: dict[str, dict] = POLICIES, progress=None, dtypes: tuple[str, ...] = ("fp32",)) -> dict:
    """{task: {"k=..": {policy: {"embedding": {...}, "hidden": {...}, "mean_embedding": ..., "mean_hidden": ...}}}}

    Each policy runs in each of `dtypes` (names of ``devices.DTYPES``; a row in another dtype than fp32 is labelled
    with it); the reference stays the source in fp32, so a bf16 row's error holds the policy's and bf16's."""
    reference = LinformerModel.from_pretrained_encoder(source, attention="full", max_seq_len=n).eval()
    teacher = {task: outputs(reference, inputs) for task, inputs in tasks.items()}
    results: dict = {task: {} for task in tasks}
    for k, (policy, fields), dtype in itertools.product(ks, policies.items(), dtypes):
        label = policy if dtype == "fp32" else f"{policy}, {dtype}"
        model = LinformerModel.from_pretrained_encoder(source, **_settings(k, sharing, n, fields)).eval().to(
            DTYPES[dtype])
        for task, inputs in tasks.items():
            student = [h.float() for h in outputs(model, inputs)]
            errors = example_errors(student, teacher[task], inputs)
            results[task].setdefault(f"k={k}", {})[label] = {
                "dtype": dtype,
                **{what: by_bucket(inputs.lengths, e) for what, e in errors.items()},
                **{f"mean_{what}": float(e.mean()) for what, e in errors.items()},
                PER_EXAMPLE: [float(f"{x:.6g}") for x in errors["embedding"]],
            }
            if progress:
                progress(f"{task} k={k} {label}: embedding error {errors['embedding'].mean():.3f}")
    return results


def _scores(results: dict) -> dict[str, float]:
    """Each policy's mean embedding error averaged over every task and k, among the fp32 rows (a policy is chosen at
    full precision; a bf16 row measures what the dtype adds to it)."""
    scores: dict[str, list[float]] = {}
    for by_k in results.values():
        for by_policy in by_k.values():
            for label, r in by_policy.items():
                if r.get("dtype", "fp32") == "fp32":
                    scores.setdefault(label, []).append(r["mean_embedding"])
    return {label: float(np.mean(s)) for label, s in scores.items()}


def best_policy(results: dict) -> str:
    """The policy with the lowest mean embedding error averaged over every task and k, among the fp32 rows."""
    scores = _scores(results)
    return min(scores, key=scores.get)


def best_margin(results: dict) -> dict:
    """The best policy (``best_policy``) against the runner-up: {"best", "error", "runner_up", "runner_up_error",
    "margin"} (the runner-up's mean error less the best's) and the margin's interval over the examples, "lo", "hi"
    and "examples", or "no_interval" saying why there is none. The interval pairs each example's errors under the
    two policies (the same examples in every row): per task, an example's difference averaged over k; the tasks'
    means averaged, each task weighing the same, as the scores are (``paired.combined``, one seed)."""
    scores = _scores(results)
    ranked = sorted(scores, key=scores.get)
    best = ranked[0]
    out: dict = {"best": best, "error": scores[best]}
    if len(ranked) == 1:
        return out
    runner = ranked[1]
    out.update(runner_up=runner, runner_up_error=scores[runner], margin=scores[runner] - scores[best])
    tables = []
    for by_k in results.values():
        rows = [(by_policy[runner], by_policy[best]) for by_policy in by_k.values()]
        if any(PER_EXAMPLE not in r for pair in rows for r in pair):
            return {**out, "no_interval": "this record keeps no per-example errors (it was measured before they "
                                          "were recorded); a new measurement has them"}
        tables.append(np.mean([np.subtract(a[PER_EXAMPLE], b[PER_EXAMPLE]) for a, b in rows], axis=0)[None])
    if min(t.shape[1] for t in tables) < 2:
        return {**out, "no_interval": "a task has a single example"}
    d = combined(tables)  # in points: x 100
    return {**out, "lo": d["lo"] / 100, "hi": d["hi"] / 100, "examples": sum(t.shape[1] for t in tables)}


def verdict(margin: dict) -> str:
    """The report's line on ``best_margin``: the best policy in bold only where its interval leaves 0 out; "no clear
    best" where it holds 0; the bare margin, said to have no interval, where the record cannot give one."""
    best, error = margin["best"], margin["error"]
    if "runner_up" not in margin:
        return f"{VERDICT} **{best}** ({error:.3f}), the only policy measured."
    against = (f"{error:.3f}, the runner-up \"{margin['runner_up']}\" {margin['runner_up_error']:.3f}: lower by "
               f"{margin['margin']:.2g}")
    if "no_interval" in margin:
        return f"{VERDICT} **{best}** ({against}; no interval: {margin['no_interval']})."
    interval = (f"{LEVEL:.0%} interval [{margin['lo']:.2g}, {margin['hi']:.2g}], paired over the "
                f"{margin['examples']:,} examples")
    if margin["lo"] <= 0:
        return f"{VERDICT} no clear best: \"{best}\" {against}, {interval}, which holds 0."
    return f"{VERDICT} **{best}** ({against}, {interval})."


def median_embedding(row: dict) -> float:
    """The median of a row's per-example embedding errors (``PER_EXAMPLE``): the statistic an error target on the
    typical input is stated in, where the table's other cells are means."""
    return float(np.median(row[PER_EXAMPLE]))


def to_markdown(results: dict, header: list[str], png: str) -> str:
    lines = ["# Length policies on a converted encoder, before training", "", *header, "",
             verdict(best_margin(results)), ""]
    for task, by_k in results.items():
        for k, by_policy in by_k.items():
            buckets = list(next(iter(by_policy.values()))["embedding"])
            counts = [next(iter(by_policy.values()))["embedding"][b]["examples"] for b in buckets]
            # the median where the rows keep their per-example errors (a record measured before keeps means only)
            medians = any(PER_EXAMPLE in r for r in by_policy.values())
            title = f"## {task}, {k}: relative error of the mean-pooled embedding"
            title += (", mean (hidden states in brackets) and median over the examples" if medians
                      else " (hidden states in brackets)")
            lines += [title, "", *table_lines(["policy", *(["all: mean", "all: median"] if medians else ["all"]),
                                               *(f"{b} tokens ({c})" for b, c in zip(buckets, counts))])]
            for label, r in by_policy.items():
                cells = [f"{r['embedding'][b]['mean']:.3f} ({r['hidden'][b]['mean']:.3f})" for b in buckets]
                median = [f"{median_embedding(r):.3f}" if PER_EXAMPLE in r else "-"] if medians else []
                lines.append(table_row([label, f"{r['mean_embedding']:.3f} ({r['mean_hidden']:.3f})", *median,
                                        *cells]))
            lines.append("")
    lines.append(f"![embedding error by length]({png})")
    return "\n".join(lines) + "\n"


def plot(results: dict, path: str, header: list[str] | None = None):
    """The embedding error of each row by input length, a panel per task and k. A policy has one colour and marker
    (plots.colours, plots.markers), each a little aside from the others; a row in another dtype than fp32 is its
    policy's look hollow on a dotted line, set a little aside so that it never hides its fp32 twin. Each bucket's examples are under its tick, and a bucket of fewer than
    plots.MIN_EXAMPLES examples is drawn hollow (one or two inputs make its mean). Where every panel has one bucket, a
    line would be one column of dots: each row is then a dot on its own line, its value written beside it. The title
    says what is measured, the source and the machine (`header`'s lines, "not recorded" where they have none)."""
    panels = [(task, k) for task, by_k in results.items() for k in by_k]
    rows = {label: r for task, k in panels for label, r in results[task][k].items()}
    policy = {label: label.removesuffix(f", {r.get('dtype', 'fp32')}") for label, r in rows.items()}
    policies = list(dict.fromkeys(policy.values()))
    colour = {p: (c, m) for p, c, m in zip(policies, plots.colours(len(policies)), plots.markers(len(policies)))}
    dtypes = list(dict.fromkeys(r.get("dtype", "fp32") for r in rows.values()))
    style = {d: ("-", True) if d == "fp32" else (":", False) for d in dtypes}  # line, filled
    if all(len(r["embedding"]) == 1 for r in rows.values()):
        fig = _dots(results, panels, rows, policy, colour, style)
    else:
        fig = _lines(results, panels, policy, colour, style, dtypes)
    plots.title(fig, figure_title(header or []))
    return save_figure(fig, path)


def figure_title(header: list[str]) -> str:
    """What a length-policy figure shows, the source its header names and the machine."""
    source = next((line.removeprefix("Source: ").split(";")[0].replace("`", "") for line in header
                   if line.startswith("Source: ")), "source not recorded")
    return (f"Embedding error of a converted encoder by input length and length policy: {source}; "
            f"{plots.machine(header)}")


def _mark(ax, x, y, look: tuple, filled: bool, **kw):
    """Points in a policy's (colour, marker), hollow where not `filled`."""
    colour, marker = look
    return ax.plot(x, y, marker=marker, color=colour, markersize=6, markerfacecolor=colour if filled else "white",
                   **kw)


def _dots(results: dict, panels: list, rows: dict, policy: dict, colour: dict, style: dict):
    labels = list(rows)
    fig, axes = plots.figure(len(panels), size=(3.2 * len(panels) + 3.4, 1.4 + 0.34 * len(labels)), sharey=True)
    for ax, (task, k) in zip(axes[0], panels):
        for label, r in results[task][k].items():
            (bucket, cell), = r["embedding"].items()
            _, filled = style[r.get("dtype", "fp32")]
            small = cell["examples"] < plots.MIN_EXAMPLES
            _mark(ax, [cell["mean"]], [labels.index(label)], colour[policy[label]], filled and not small,
                  linestyle="none")
            ax.annotate(f"{cell['mean']:.3f}", (cell["mean"], labels.index(label)), xytext=(6, 0),
                        textcoords="offset points", va="center", fontsize=7)
        ax.margins(x=0.25, y=0.5 / len(labels))
        plots.title(ax, f"{task}, {k}: {bucket} tokens ({cell['examples']:,} examples)", fontsize=9)
        ax.set_xlabel("embedding relative error vs source")
        ax.grid(alpha=0.3, axis="x")
    axes[0][0].set_yticks(range(len(labels)), [plots.wrapped(fig, label, 8, 2.8 * fig.dpi) for label in labels],
                          fontsize=8)
    axes[0][0].invert_yaxis()
    return fig


def _lines(results: dict, panels: list, policy: dict, colour: dict, style: dict, dtypes: list):
    from matplotlib.lines import Line2D

    fig, axes = plots.figure(len(panels), size=(4.2 * len(panels), 3.8))
    small = False
    policies = list(colour)
    for ax, (task, k) in zip(axes[0], panels):
        for label, r in results[task][k].items():
            dtype = r.get("dtype", "fp32")
            line, filled = style[dtype]
            # each policy a little aside from the others, and a dtype from its twin: rows with equal values (every
            # policy exact at 0 below k, two policies that agree) stay visible side by side, never one under another
            shift = 0.5 * (policies.index(policy[label]) - (len(policies) - 1) / 2) / max(len(policies), 4)
            shift += 0.04 * dtypes.index(dtype)
            cells = list(r["embedding"].values())
            x = np.arange(len(cells)) + shift
            ax.plot(x, [c["mean"] for c in cells], linestyle=line, color=colour[policy[label]][0], linewidth=1.3)
            for xi, c in zip(x, cells):
                few = c["examples"] < plots.MIN_EXAMPLES
                small |= few
                _mark(ax, [xi], [c["mean"]], colour[policy[label]], filled and not few, linestyle="none")
        buckets = next(iter(results[task][k].values()))["embedding"]
        ax.set_xticks(range(len(buckets)), plots.count_ticks(list(buckets), [c["examples"] for c in buckets.values()]),
                      fontsize=7)
        plots.title(ax, f"{task}, {k}", fontsize=9)
        ax.set_xlabel("input tokens (examples)")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("embedding relative error vs source")
    handles = [Line2D([], [], color=c, marker=m, linewidth=1.3) for c, m in colour.values()]
    names = list(colour)
    if len(dtypes) > 1:
        for d in dtypes:
            line, filled = style[d]
            handles.append(Line2D([], [], color="grey", marker="o", linestyle=line,
                                  markerfacecolor="grey" if filled else "white"))
            names.append(f"in {d}")
    if small:
        handles.append(Line2D([], [], color="grey", marker="o", markerfacecolor="white", linestyle="none"))
        names.append(f"hollow: a bucket of fewer than {plots.MIN_EXAMPLES} examples")
    plots.legend_below(fig, handles, names)
    return fig


def write_report(results: dict, out: str, header: list[str], record: dict) -> None:
    png = plot(results, f"{out}.png", header)
    atomic_write(f"{out}.md", to_markdown(results, header, png.name))
    write_json(f"{out}.json", {**record, "header": header, "best": best_policy(results),
                               "best_margin": best_margin(results), "results": results})


def render(measured: dict, out: str) -> None:
    """The report written again from the JSON of an earlier measurement (``--render``): its table and figure from
    the recorded errors, with today's labels (``rows.relabelled``), nothing measured. The lines above the tables are
    the JSON's; a JSON written before it kept them takes them from the report <out>.md beside it."""
    if not isinstance(measured.get("results"), dict):
        raise ConfigError("--render reads a JSON written by scripts/length_policy.py; this one has no results: "
                          "measure again.")
    measured = relabelled(measured)
    header = measured.get("header") or _header_of(Path(f"{out}.md"))
    record = {k: v for k, v in measured.items() if k not in ("header", "best", "best_margin", "results")}
    write_report(measured["results"], out, header, record)


def _header_of(md: Path) -> list[str]:
    """The lines between a length-policy report's title and its VERDICT line, relabelled."""
    lines = md.read_text(encoding="utf-8").splitlines() if md.is_file() else []
    if not lines or not lines[0].startswith("# Length policies") or not any(x.startswith(VERDICT) for x in lines):
        raise ConfigError(f"--render: the JSON keeps no header and {md} is not its report: measure again.")
    body = lines[1:next(i for i, x in enumerate(lines) if x.startswith(VERDICT))]
    return relabelled([x for x in body if x.strip()])
