"""The paper's Figure 3 from pretraining runs: validation perplexity against updates.

- Panel a (``figure3_data``): runs of one n; each Linformer's final perplexity against full attention's (target:
  within 5% for every k >= 128, at the same tokens and steps).
- Panel d (``figure3d_data``): the Linformer at one k over several n, full attention beside it at any n; target: the
  Linformers' final perplexities within 5% of one another (the paper: "the perplexity ... remains largely the same"
  as n grows at fixed k).

Writes ``<out>.json`` (every run's curve, so the figure survives the run directories) and ``<out>.png``.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

from ..cli import run_from_a_script
from ..data.corpus import prepare_again, read_manifest
from ..data.io import local_path
from ..data.unigram import PLATEAU_RATIO, on_plateau
from ..errors import DataError
from ..files.atomic import output_files, write_json
from ..files.locations import repo_relative
from ..files.outputs import MANIFEST, made_by
from ..modeling.configuration import ATTENTION_FIELDS, SIZE_FIELDS
from ..modeling.values import projects_keys
from ..rundir import Run, find_runs, identity_diff, load_run, named_paths
from .compare import TOKENS_PER_STEP_KEYS, series
from .curves import plot_pretrain_curves
from .rows import k_label, variant_label, variant_of

TARGET_K = 128        # every Linformer with k >= this...
TARGET_RATIO = 1.05   # ...ends within 5% of full attention's validation perplexity
PAPER_3D_K = 256      # the k the paper's Figure 3d holds fixed (its section 5.1)


# What the runs of a panel may differ in: their attention (the figure's subject); panel d's n too, and the batch
# that keeps batch x n, the tokens per step, fixed. Any other setting (lr, seed, steps, corpus) is refused: the
# figure would show it as the attention's doing.
ATTENTION_KEYS = frozenset(f"model.{name}" for name in ("attention", *ATTENTION_FIELDS))
LENGTH_KEYS = (TOKENS_PER_STEP_KEYS - {"trainer.grad_accum", "model.max_seq_len"}) | {
    "data.name", "corpus_dir", "corpus_cache_key", "model.max_position_embeddings"}


def check_alike(runs: list[Run], free: frozenset[str], what: str) -> None:
    """DataError naming the first settings outside `free` in which a run differs from the first run
    (``rundir.identity_diff``, as compare_runs' columns)."""
    for run in runs[1:]:
        differ = [f"{k} ({a!r} and {b!r})" for k, (a, b) in identity_diff(runs[0].config, run.config).items()
                  if k not in free]
        if differ:
            raise DataError(f"{what} compares runs that differ only in their attention: {runs[0].path} and "
                            f"{run.path} also differ in {', '.join(differ[:3])}{' ...' if len(differ) > 3 else ''}")


def k_of(run: Run) -> int | tuple[int, ...] | None:
    """A run's k: None for full attention, a tuple for one k per layer."""
    k = run.key_config["k"]
    return tuple(k) if isinstance(k, list) else k


def _smallest(k: int | tuple[int, ...]) -> int:
    return min(k) if isinstance(k, tuple) else k


def _k_order(k: int | tuple[int, ...] | None) -> tuple[int, str]:
    """Ks in order: by the smallest, one k before a per-layer k that starts with it."""
    return _smallest(k or 0), str(k or 0)


def label_of(run: Run) -> str:
    """'Linformer k=128 (headwise)', with what else differs from the paper's Linformer in the run's model
    (``rows.variant_label``: ', conv'; 'k=16/32 per layer'), but its size: every run of the figure has the same
    (``check_alike``), so a line's label does not repeat it."""
    key = run.key_config
    if not projects_keys(key["attention"]):
        return "full attention"
    model = run.config.get("model") if isinstance(run.config.get("model"), dict) else {}
    variant = variant_of({**model, "attention": key["attention"], "projected_dim": key["k"]})
    variant = variant_label(tuple((f, v) for f, v in variant if f not in SIZE_FIELDS))
    return f"Linformer k={k_label(k_of(run))} ({key['sharing']}{variant})"


BASELINES = ("unigram_val_ppl", "context_free_val_ppl")  # data.unigram's perplexities, as summaries and manifests name them


def baselines_of(run: Run) -> tuple[dict[str, float | None], str | None]:
    """({name: value} of ``BASELINES`` on the run's validation split, the perplexities of token frequencies alone and
    of the best model that reads no context, whose plateau the run is judged against; why the context-free one is
    unknown, or None). Each from the run's summary.json, or else from the manifest of the corpus its config names
    where that corpus (same cache key) is here (``prepare_corpus`` adds the context-free one to an earlier manifest)."""
    values = {name: run.results.get(name) for name in BASELINES}
    if values["context_free_val_ppl"] is not None:
        return values, None
    corpus, key = run.config.get("corpus_dir"), run.config.get("corpus_cache_key")
    if not corpus:
        return values, f"{run.name} records neither context_free_val_ppl nor a corpus_dir"
    manifest = read_manifest(local_path(str(corpus))) or {}  # a record names it relative to the repository
    if key is None or manifest.get("cache_key") == key:
        values = {name: manifest.get(name) if values[name] is None else values[name] for name in BASELINES}
    if values["context_free_val_ppl"] is not None:
        return values, None
    why = (f"{run.name}'s summary.json predates context_free_val_ppl, and the manifest of the corpus it trained on "
           f"({Path(corpus) / MANIFEST}, cache key {key}) ")
    if manifest and (key is None or manifest.get("cache_key") == key):
        return values, why + f"predates it too: {prepare_again(str(corpus), manifest)} adds it"
    return values, why + "is not here to give it"


def replaced_baselines(path: Path) -> dict[tuple[str, float], dict[str, float]]:
    """{(run_dir, final_val_ppl): {name: value}} of the ``BASELINES`` an earlier <out>.json at `path` gives its runs:
    what a regeneration keeps where the corpus that gave them is not here (a fresh clone), rather than writing
    null over them and turning a judged target into "not judged". {} where there is no such file."""
    try:
        old = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    kept = {}
    for row in old.get("runs") or [] if isinstance(old, dict) else []:
        if isinstance(row, dict) and row.get("run_dir") and isinstance(row.get("final_val_ppl"), (int, float)):
            values = {name: row[name] for name in BASELINES if isinstance(row.get(name), (int, float))}
            if values:
                kept[row["run_dir"], row["final_val_ppl"]] = values
    return kept


def _curve_rows(runs: list[Run], label=label_of, kept: dict | None = None) -> list[dict[str, Any]]:
    """Each run's validation-perplexity curve, final perplexity and what it was trained on. `kept`
    (``replaced_baselines``): the baselines of the report being replaced, for the same run record (its folder and
    final perplexity), taken where this machine cannot give them, with a warning and the row saying so."""
    if not runs:
        raise DataError("figure 3 needs pretraining runs; none were given")
    rows = []
    for run in runs:
        if not run.config:
            raise DataError(f"{run.path} holds no record of a run (no config.yaml, only metrics): figure 3 needs "
                            "pretraining runs")
        if run.status not in (None, "complete") or not isinstance(run.results.get("steps"), int):
            state = run.status_line if run.status else "no run.json, and no steps in a summary.json"
            raise DataError(f"{run.path} is not a finished run ({state}): figure 3 compares finished pretraining "
                            "runs (a stopped or killed one goes on to its end when its command runs again)")
        steps, ppl = series(run, "val_ppl")
        if not steps:
            raise DataError(f"{run.path} logged no val_ppl: is it a finished pretraining run?")
        key = run.key_config
        rows.append({"label": label(run), "run_dir": repo_relative(run.path), "attention": key["attention"],
                     "k": k_of(run),
                     "sharing": key["sharing"], "n": key["n"], "steps": run.results.get("steps"),
                     "tokens": run.results.get("tokens"), "tokens_per_s": run.results.get("tokens_per_s"),
                     "device": run.results.get("device"),  # the machine it trained on, in words
                     "final_val_ppl": ppl[-1], "curve": {"step": steps, "val_ppl": ppl}})
        values, why = baselines_of(run)
        earlier = (kept or {}).get((rows[-1]["run_dir"], ppl[-1]), {})
        taken = {name: earlier[name] for name in BASELINES if values[name] is None and name in earlier}
        if taken:
            values = {**values, **taken}
            rows[-1]["baselines_kept"] = sorted(taken)
            print(f"warning: {run.name}: {', '.join(sorted(taken))} cannot be computed here"
                  f"{f' ({why})' if why else ''}: kept from the report this one replaces "
                  f"({', '.join(f'{n} {v:,.1f}' for n, v in sorted(taken.items()))})", file=sys.stderr)
            why = None if values["context_free_val_ppl"] is not None else why
        rows[-1].update({**values, **({"plateau_unknown": why} if why else {})})
    return rows


def figure3_data(runs: list[Run], kept: dict | None = None) -> dict[str, Any]:
    """Curves, final perplexities and the target, from pretraining runs of one n that saw the same tokens; `kept`:
    ``_curve_rows``'."""
    rows = _curve_rows(runs, kept=kept)
    check_alike(runs, ATTENTION_KEYS, "figure 3")
    seen: dict[str, str] = {}
    for r in rows:  # one line per label: a second would be drawn over the first
        if r["label"] in seen:
            raise DataError(f"figure 3 takes one run per attention; {r['run_dir']} and {seen[r['label']]} are both "
                            f"{r['label']}")
        seen[r["label"]] = r["run_dir"]
    budgets = {(r["steps"], r["tokens"], r["n"]) for r in rows}
    if len(budgets) > 1:
        raise DataError("figure 3 compares runs of the same steps, tokens and n; got "
                        + "; ".join(f"{r['label']}: {r['steps']} steps, {r['tokens']} tokens, n={r['n']}" for r in rows))
    full = [r for r in rows if not projects_keys(r["attention"])]
    if len(full) != 1:
        raise DataError(f"figure 3 needs exactly one full-attention run as its reference; got {len(full)}")
    reference = full[0]["final_val_ppl"]
    for r in rows:
        r["ppl_ratio_vs_full"] = r["final_val_ppl"] / reference if math.isfinite(reference) else None
    judged = [r for r in rows if projects_keys(r["attention"]) and r["k"] is not None and _smallest(r["k"]) >= TARGET_K]
    context_free = full[0]["context_free_val_ppl"]
    data = {
        "runs": sorted(rows, key=lambda r: (projects_keys(r["attention"]), _k_order(r["k"]))),
        "reference_val_ppl": reference,
        **{name: full[0][name] for name in BASELINES},
        "target": f"every Linformer with k >= {TARGET_K} within {TARGET_RATIO - 1:.0%} of full attention's final "
                  "validation perplexity",
        "target_met": all(r["ppl_ratio_vs_full"] is not None and r["ppl_ratio_vs_full"] <= TARGET_RATIO
                          for r in judged),
        "judged": [r["label"] for r in judged],
    }
    if not math.isfinite(reference):
        data["target_met"] = None
        data["not_judged"] = (f"full attention's final validation perplexity is {reference}, not a number a ratio "
                              "can be taken to: the reference run diverged or logged no finite value at its end")
    elif not judged:
        data["target_met"] = None
        linformers = sorted({r["k"] for r in rows if projects_keys(r["attention"])}, key=_k_order)
        data["not_judged"] = (f"no Linformer run with k >= {TARGET_K} (k = {', '.join(map(k_label, linformers))} only)"
                              if linformers else "no Linformer run, only full attention: nothing to compare with it")
    elif on_plateau(reference, context_free) is None:
        data["target_met"] = None
        data["not_judged"] = _plateau_unknown([full[0]["plateau_unknown"]])
    elif on_plateau(reference, context_free):
        data["target_met"] = None
        data["not_judged"] = (f"full attention ends at {reference:,.1f}, above {PLATEAU_RATIO:.0%} of the "
                              f"perplexity of a model that reads no context ({context_free:,.1f}): no run has "
                              "learned to use its context yet, so their attention cannot differ; pretrain for more "
                              "steps")
    return data


def _plateau_unknown(why: list[str]) -> str:
    return (f"the perplexity of a model that reads no context is unknown ({'; '.join(why)}), so whether the runs "
            f"have left its plateau (below {PLATEAU_RATIO:.0%} of it) could not be checked: runs still on it agree "
            "whatever their attention")


def figure3d_data(runs: list[Run], kept: dict | None = None) -> dict[str, Any]:
    """Panel d: the Linformer at one k over several n (the same steps and tokens: batch x n fixed), with full
    attention at any of those n; each run against full attention at its n where there is one, and the spread of the
    Linformers' final perplexities (largest / smallest) against the target."""
    rows = _curve_rows(runs, label=lambda run: f"{label_of(run)}, n={run.key_config['n']}", kept=kept)
    check_alike(runs, ATTENTION_KEYS | LENGTH_KEYS, "figure 3d")
    budgets = {(r["steps"], r["tokens"]) for r in rows}
    if len(budgets) > 1:
        raise DataError("figure 3d compares runs of the same steps and tokens; got "
                        + "; ".join(f"{r['label']}: {r['steps']} steps, {r['tokens']} tokens" for r in rows))
    linformer = [r for r in rows if projects_keys(r["attention"])]
    ks = {(r["k"], r["sharing"]) for r in linformer}
    if len(ks) != 1:
        raise DataError("figure 3d holds k fixed: it needs Linformer runs of one k and sharing; got "
                        + (", ".join(f"k={k_label(k)} ({sharing})" for k, sharing in sorted(ks, key=lambda x: (_k_order(x[0]), x[1]))) or "none"))
    by_n: dict[tuple[str, int], dict] = {}
    for r in rows:
        if (r["attention"], r["n"]) in by_n:
            raise DataError(f"figure 3d takes one run per attention and n; {r['run_dir']} and "
                            f"{by_n[r['attention'], r['n']]['run_dir']} are both {r['attention']} at n={r['n']}")
        by_n[r["attention"], r["n"]] = r
    for r in rows:
        full = by_n.get(("full", r["n"]))
        r["ppl_ratio_vs_full"] = r["final_val_ppl"] / full["final_val_ppl"] if full else None
    finals = [r["final_val_ppl"] for r in linformer]
    spread = max(finals) / min(finals)
    (k, sharing), = ks
    data = {
        "panel": "d",
        "runs": sorted(rows, key=lambda r: (r["n"], projects_keys(r["attention"]))),
        "k": k, "sharing": sharing, "ns": sorted({r["n"] for r in linformer}),
        "spread": spread,
        "target": f"the Linformer's final validation perplexities at k = {k_label(k)} within {TARGET_RATIO - 1:.0%} of one "
                  "another across n (largest / smallest)"
                  + ("" if k == PAPER_3D_K else f"; ours: the paper's Figure 3d holds k = {PAPER_3D_K}"),
        "target_met": len(linformer) > 1 and spread <= TARGET_RATIO,
        "judged": [r["label"] for r in linformer],
    }
    plateau = [r for r in linformer if on_plateau(r["final_val_ppl"], r["context_free_val_ppl"])]
    unknown = [r["plateau_unknown"] for r in linformer if "plateau_unknown" in r]
    if len(linformer) < 2:
        data["target_met"] = None
        data["not_judged"] = "one n only: a spread across n needs at least two"
    elif plateau:
        data["target_met"] = None
        data["not_judged"] = (f"{', '.join(r['label'] for r in plateau)} ends above {PLATEAU_RATIO:.0%} of the "
                              "perplexity of a model that reads no context: it has not learned to use its context yet, so "
                              "its length cannot matter; pretrain for more steps")
    elif unknown:
        data["target_met"] = None
        data["not_judged"] = _plateau_unknown(unknown)
    return data


def figure3(paths: list[str | Path], out: str | Path, overwrite: bool = False, panel: str = "a",
            command: str | None = None) -> dict[str, Any]:
    """Write ``<out>.json`` and ``<out>.png`` of Figure 3's `panel` (a or d) from the pretraining runs under
    `paths`; returns the data. The JSON records `command` (the command line that made it) and each run's device."""
    runs = [load_run(p, rows=False, strict=True) for p in find_runs(named_paths(paths), strict=True)]
    kept = replaced_baselines(Path(out).with_suffix(".json"))  # what the corpus gave, where it is not here now
    data = figure3d_data(runs, kept) if panel == "d" else figure3_data(runs, kept)
    if command:
        data["command"] = command
    out = Path(out)
    files = [out.with_suffix(".json"), out.with_suffix(".png")]
    record = {"runs": [r["run_dir"] for r in data["runs"]], **({"panel": panel} if panel != "a" else {})}
    with output_files(files, made_by("figure3", record), overwrite, key="--out" if run_from_a_script() else "out="):
        write_json(files[0], data)
        by_dir = {repo_relative(r.path): r for r in runs}
        trained = _trained_on(runs, data["runs"])
        if panel == "d":
            title = f"MLM validation perplexity at k = {data['k']} as n grows, {trained} (cf. Linformer Figure 3d)"
            plateau = data["runs"][0]["context_free_val_ppl"]  # the shortest n's (the splits hold the same documents)
        else:
            title = (f"MLM validation perplexity, n = {data['runs'][0]['n']}, {trained} "
                     "(cf. Linformer Figure 3a)")
            plateau = data["context_free_val_ppl"]
        if plateau is None:  # no line to show the plateau: the title says what the curves cannot
            title += ("; the perplexity of a model that reads no context is unknown, so whether these curves left "
                      "its plateau (where runs agree whatever their attention) is not judged")
        full = next((r["label"] for r in data["runs"] if not projects_keys(r["attention"])), None) if panel != "d" else None
        plot_pretrain_curves({r["label"]: by_dir[r["run_dir"]].path for r in data["runs"]}, files[1], title=title,
                             plateau_ppl=plateau, ratio_to=full)
    return data


def _trained_on(runs: list[Run], rows: list[dict]) -> str:
    """The model, tokens and device of the runs in words ("model small (4 layers x 256), 65.5M tokens, NVIDIA
    H200"), of what they share."""
    model = runs[0].config.get("model") if isinstance(runs[0].config.get("model"), dict) else {}
    words = []
    if model.get("name"):
        shape = (f" ({model['num_hidden_layers']} layers x {model['hidden_size']})"
                 if model.get("num_hidden_layers") and model.get("hidden_size") else "")
        words.append(f"model {model['name']}{shape}")
    tokens = {r.get("tokens") for r in rows}
    if len(tokens) == 1 and isinstance(next(iter(tokens)), int):
        words.append(f"{next(iter(tokens)) / 1e6:,.1f}M tokens")
    devices = sorted({str(r["device"]) for r in rows if r.get("device")})
    if devices:
        words.append(" / ".join(devices))
    return ", ".join(words)


def figure3_lines(data: dict[str, Any]) -> list[str]:
    """The closing summary: one line per run and the target."""
    versus = lambda r: "" if r["ppl_ratio_vs_full"] is None else f"  ({r['ppl_ratio_vs_full']:.3f}x full)"
    lines = [f"  {r['label']:<40} final val ppl {r['final_val_ppl']:9.2f}{versus(r)}" for r in data["runs"]]
    if data.get("panel") == "d":
        lines.append(f"  spread of the Linformer's final perplexities across n = {data['ns']}: {data['spread']:.3f}x")
    if data.get("not_judged"):
        lines.append(f"  target ({data['target']}): not judged: {data['not_judged']}")
    else:
        lines.append(f"  target ({data['target']}): {'met' if data['target_met'] else 'MISSED'}")
    return lines


__all__ = ["TARGET_K", "TARGET_RATIO", "figure3", "figure3_data", "figure3_lines", "figure3d_data"]
