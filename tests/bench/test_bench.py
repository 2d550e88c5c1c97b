"""The benchmark's core on a tiny grid: plans, models, outputs, the Hydra config. No timed asserts."""

import contextlib
import csv
import time
from pathlib import Path

import pytest
import torch

from linformer import LinformerModel
from linformer.bench import InferenceSettings, ThroughputSettings, plan_grid, run_benchmark
from linformer.bench.cli import settings_from_config
from linformer.bench.common import interleaved_medians, max_batch_that_fits, peak_memory_bytes
from linformer.bench.inference import batch_of, build_model, eager_scores_bytes, estimate_seconds, grid_cells
from linformer.bench.model_checks import padding_leak
from linformer.bench.models import Size
from linformer.bench.paper import PAPER_MEMORY_SAVED, PAPER_TIME_SAVED, paper_value
from linformer.configs import compose
from linformer.errors import ConfigError
from linformer.modeling.configuration import YOUR_OWN_IMPORTED as YOUR_OWN
from linformer.modeling.flops import flop_ratio

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


def tiny_inference(**kw) -> InferenceSettings:
    base = {"ns": [64, 128], "ks": [16, 32], "layers": 1, "hidden": 32, "heads": 4, "ffn": 64, "vocab": 64, "reps": 2, "warmup": 1,
                "budget_s": 1e9, "device": "cpu"}
    base.update(kw)
    return InferenceSettings(**base)


def tiny_throughput(**kw) -> ThroughputSettings:
    base = {"ns": [64], "tokens_per_step": 128, "layers": 1, "hidden": 32, "heads": 4, "ffn": 64, "vocab": 64, "k": 16, "steps": 1,
                "warmup": 1, "precisions": ["fp32"], "device": "cpu"}
    base.update(kw)
    return ThroughputSettings(**base)


def _paper_table3() -> tuple[dict, dict]:
    """Table 3 as the paper's text prints it: rows 'n a.bx c.dx ... -', time saved first, then memory saved."""
    import re

    from linformer.files.locations import repo_root

    text = repo_root().parent / "shared" / "paper" / "linformer-wang-2020.txt"
    if not text.is_file():
        pytest.skip(f"{text} is not here (the paper's text sits beside the checkout in ../shared)")
    rows = [line.split() for line in text.read_text().splitlines()
            if re.fullmatch(r"\d+( (\d+(\.\d+)?x|-)){5}", line.strip())]
    assert len(rows) == 16, rows
    parse = [{int(r[0]): tuple(float(v[:-1]) for v in r[1:] if v != "-") for r in half} for half in (rows[:8], rows[8:])]
    return parse[0], parse[1]


def test_the_paper_s_numbers_are_the_paper_s_text():
    time_saved, memory_saved = _paper_table3()
    assert time_saved == PAPER_TIME_SAVED
    assert memory_saved == PAPER_MEMORY_SAVED


def test_paper_value_lookup():
    assert paper_value(PAPER_TIME_SAVED, 65536, 128) == 20
    assert paper_value(PAPER_TIME_SAVED, 4096, 2048) == 1.3  # the last column
    assert paper_value(PAPER_MEMORY_SAVED, 512, 1024) is None  # k >= n: no cell
    assert paper_value(PAPER_MEMORY_SAVED, 100, 128) is None


def test_grid_skips_k_at_or_above_n_and_the_plan_says_so():
    s = tiny_inference(ns=[16, 32, 64], ks=[16, 32])
    assert grid_cells(s) == [(32, [16]), (64, [16, 32])]
    s.budget_s = 1e9
    kept, dropped = plan_grid(s, 50e9, free_bytes=2**40)
    assert kept == [(32, [16]), (64, [16, 32])]
    assert dropped == [(16, "k=16, 32 only: k >= n leaves nothing to project"),
                       (32, "k=32 only: k >= n leaves nothing to project")]


def test_plan_trims_largest_n_by_budget_and_memory():
    s = InferenceSettings(ns=[512, 1024, 2048, 4096], ks=[128, 256], layers=2)
    rate = 50e9
    costs = [estimate_seconds(n, ks, s, rate) for n, ks in grid_cells(s)]
    assert costs == sorted(costs)  # larger n cost more
    s.budget_s = sum(costs[:2]) + 0.5 * costs[2]
    kept, dropped = plan_grid(s, rate, free_bytes=2**40)
    assert [n for n, _ in kept] == [512, 1024]
    assert [n for n, _ in dropped] == [2048, 4096] and "budget" in dropped[0][1]
    s.budget_s, s.max_n = 1e9, 2048
    kept, dropped = plan_grid(s, rate, free_bytes=2**40)
    assert [n for n, _ in kept] == [512, 1024, 2048] and dropped == [(4096, "n > max_n=2048")]
    s.max_n = None  # eager 1024 x 1024 scores: 3 * 12 * 1024^2 * 4 bytes = 144 MiB > 0.6 * 200 MiB
    kept, dropped = plan_grid(s, rate, free_bytes=200 * 2**20)
    # only the eager baseline leaves the larger n; the Linformer and full attention still run there
    assert [n for n, _ in kept] == [512, 1024, 2048, 4096]
    assert [n for n, _ in dropped] == [1024, 2048, 4096] and all("eager baseline only" in w for _, w in dropped)
    s.baselines = ["full"]
    assert plan_grid(s, rate, free_bytes=200 * 2**20)[1] == []


def test_tokens_per_batch_sets_the_batch_per_n():
    s = InferenceSettings(ns=[512, 4096, 65536], tokens_per_batch=32768)
    assert [batch_of(n, s) for n in s.ns] == [64, 8, 1]
    assert eager_scores_bytes(512, s) == 64 * eager_scores_bytes(512, InferenceSettings(batch_size=1))
    assert batch_of(512, InferenceSettings(batch_size=3)) == 3


def test_roberta_baseline_is_our_full_mode_with_other_attention_code():
    """Same weights, same outputs: the baselines differ from our full mode only in how attention is computed."""
    s = tiny_inference()
    ids = torch.randint(4, 64, (2, 64))
    ours = build_model("full", 64, None, s)
    for kind in ("eager", "roberta_sdpa"):
        hf = build_model(kind, 64, None, s)
        ours.load_state_dict(hf.state_dict(), strict=True)
        with torch.no_grad():
            torch.testing.assert_close(ours(ids).last_hidden_state, hf(ids).last_hidden_state, atol=1e-5, rtol=1e-5)
    lin = build_model("linformer", 64, 16, s)
    assert isinstance(lin, LinformerModel) and lin.config.projected_dim == 16 and lin.config.sharing == "layerwise"


def test_interleaved_medians_rotates_the_order():
    calls = []
    fns = {name: (lambda name=name: calls.append(name)) for name in "abc"}
    medians = interleaved_medians(fns, reps=3, device=torch.device("cpu"))
    assert set(medians) == {"a", "b", "c"} and all(t >= 0 for t in medians.values())
    assert [calls[i] for i in (0, 3, 6)] == ["a", "b", "c"]  # each round starts with the next model


def test_interleaved_rounds_vary_which_model_runs_before_which():
    """A fixed cyclic order puts each model always right after the same one (roberta_sdpa after eager's n x n pass),
    so a cache or allocator state one leaves biases the next every round: alternate rounds run backward."""
    from linformer.bench.common import interleaved_rounds

    calls = []
    fns = {name: (lambda name=name: calls.append(name)) for name in "abcd"}
    times = interleaved_rounds(fns, reps=4, device=torch.device("cpu"))
    assert {name: len(t) for name, t in times.items()} == dict.fromkeys("abcd", 4)
    rounds = ["".join(calls[i:i + 4]) for i in range(0, 16, 4)]
    assert rounds == ["abcd", "badc", "cdab", "dcba"]
    before = {name: {r[r.index(name) - 1] for r in rounds if r.index(name) > 0} for name in "abcd"}
    assert before == {"a": {"b", "d"}, "b": {"a", "c"}, "c": {"b", "d"}, "d": {"a", "c"}}


def test_each_cell_records_the_spread_of_its_rounds_and_its_report_shows_it(monkeypatch, tmp_path):
    """A median of three rounds alone cannot say whether a difference is real: each row keeps every model's fastest
    and slowest round and each speed ratio's lowest and highest per-round ratio, in its CSV and its report."""
    from linformer.bench import inference
    from linformer.bench.report import inference_markdown, read_csv, write_csv

    def rounds(fwds, reps, device, on_call=None, threads_used=None):
        per_round = {"full": [0.80, 0.82, 0.90], "roberta_sdpa": [0.82, 0.80, 0.91],
                     "linformer@16": [0.40, 0.50, 0.45]}
        return {name: per_round[name] for name in fwds}

    monkeypatch.setattr(inference, "interleaved_rounds", rounds)
    rows, meta = inference.run_inference(tiny_inference(ns=[64], ks=[16], reps=3, baselines=["full", "roberta_sdpa"]),
                                         progress=False, log=lambda *_: None)
    (row,) = read_csv(write_csv(rows, tmp_path / "t.csv"))
    assert row["time_linformer_s"] == pytest.approx(0.45) and row["time_full_s"] == pytest.approx(0.82)
    assert (row["time_linformer_min_s"], row["time_linformer_max_s"]) == pytest.approx((0.40, 0.50))
    assert (row["time_full_min_s"], row["time_full_max_s"]) == pytest.approx((0.80, 0.90))
    # per round: 0.80/0.40, 0.82/0.50, 0.90/0.45
    assert (row["speedup_vs_full_min"], row["speedup_vs_full_max"]) == pytest.approx((1.64, 2.0))
    assert (row["full_vs_roberta_sdpa_min"], row["full_vs_roberta_sdpa_max"]) == pytest.approx((0.80 / 0.82, 1.025))
    md = inference_markdown([row], meta, "cmd")
    assert "**1.8x (1.64-2.00) / " in md
    assert "| 64 | 1 | 820 ms (800-900), " in md and "450 ms (400-500), " in md
    assert "n=64: 1.00x (0.98-1.02)" in md


def test_padding_leak_check_sees_the_fairseq_leak():
    ours, leaky = padding_leak(n=32, k=8, size=Size(layers=1, hidden=32, heads=4, ffn=64, vocab=64), real=10)
    assert ours < 1e-5 < leaky


def test_peak_memory_sees_a_large_temporary():
    size = 64 * 2**20
    peak = peak_memory_bytes(lambda: torch.ones(size // 4).sum(), torch.device("cpu"))
    if peak is None:
        pytest.skip("no /proc/self/clear_refs here")
    assert peak >= 0.9 * size


def test_peak_tensor_memory_sees_live_tensors_and_temporaries_and_is_the_same_every_call():
    from linformer.bench.common import peak_tensor_bytes

    mib = 2**20

    def work():
        kept = torch.ones(4 * mib // 4)        # 4 MiB alive to the end
        temporary = torch.ones(8 * mib // 4)   # 8 MiB, freed before the next one
        del temporary
        other = torch.ones(2 * mib // 4)       # 2 MiB: the peak stays at 4 + 8
        return kept, other

    peaks = [peak_tensor_bytes(work, torch.device("cpu")) for _ in range(3)]
    assert len(set(peaks)) == 1 and 12 * mib <= peaks[0] < 12.1 * mib


def test_peak_tensor_memory_drops_the_profilers_own_lines_on_stderr_and_keeps_the_calls(capfd):
    """Kineto writes "USDT:... profiler_start" and "profiler_stop" to fd 2 on every profiled call (two lines per model
    per n in a CPU benchmark): those go; what the call itself writes to fd 2 stays, also when it raises, and fd 2 is
    written to again after it."""
    import os

    from linformer.bench.common import peak_tensor_bytes

    kineto = b"USDT:2026-12-01 01:22:52 18243:18243 SyncActivityProfilerHandler.cpp:52] profiler_start\n"

    def work():
        os.write(2, b"the call's own line\n" + kineto + b"STAGE:2026-12-01 01:22:52 1:1 "
                 b"ActivityProfilerController.cpp:312] Completed Stage: Warm Up\n")
        return torch.ones(8) * 2

    peak_tensor_bytes(work, torch.device("cpu"))

    def fails():
        os.write(2, b"written before it failed\n" + kineto)
        raise ValueError("the call failed")

    with pytest.raises(ValueError, match="the call failed"):
        peak_tensor_bytes(fails, torch.device("cpu"))
    os.write(2, b"after\n")
    err = capfd.readouterr().err
    assert "USDT:" not in err and "STAGE:" not in err
    assert err.splitlines() == ["the call's own line", "written before it failed", "after"]


def test_peak_tensor_memory_runs_unfiltered_where_no_temporary_file_can_be_made(capfd, monkeypatch):
    """Where the temporary file that holds fd 2's lines could not be made (no writable temporary folder), the
    duplicated fd 2 leaked and the benchmark failed where it ran before: the call now runs unfiltered."""
    import os
    import tempfile

    from linformer.bench import common

    def no_temp(*args, **kwargs):
        raise FileNotFoundError(2, "No usable temporary directory found")

    monkeypatch.setattr(tempfile, "mkstemp", no_temp)
    opened = set(os.listdir("/proc/self/fd"))
    common.peak_tensor_bytes(lambda: os.write(2, b"the call's own line\n") and torch.ones(8) * 2, torch.device("cpu"))
    assert set(os.listdir("/proc/self/fd")) <= opened
    assert "the call's own line" in capfd.readouterr().err


def test_max_batch_binary_search():
    calls = []

    def try_batch(b):
        calls.append(b)
        if b > 37:
            raise torch.OutOfMemoryError("out of memory")

    assert max_batch_that_fits(try_batch) == 37
    assert max_batch_that_fits(lambda b: None, limit=64) == 64
    assert max_batch_that_fits(lambda b: None, limit=100) == 100  # the limit itself, not the last doubling
    assert max_batch_that_fits(try_batch, limit=50) == 37  # a limit past the largest fit still bisects
    calls.clear()
    max_batch_that_fits(try_batch, limit=4096)
    exact_tries = len(calls)
    calls.clear()
    found = max_batch_that_fits(try_batch, limit=4096, tolerance=0.1)  # 32 fits, 64 fails: bisect to within 10%
    assert 37 / 1.1 <= found <= 37 and len(calls) < exact_tries


def test_paper_table3_matches_the_paper_text():
    """paper.py transcribes Table 3 of the paper's full text (shared/paper, beside the checkout, when present)."""
    text = Path(__file__).resolve().parents[3] / "shared" / "paper" / "linformer-wang-2020.txt"
    if not text.is_file():
        pytest.skip(f"{text} is not here")
    lines = text.read_text().splitlines()
    end = next(i for i, line in enumerate(lines) if line.startswith("Table 3:"))
    rows = [line.split() for line in lines[end - 20 : end] if line.split() and line.split()[0].isdigit()
            and line.split()[1].endswith("x")]
    parse = lambda cells: tuple(float(c.rstrip("x")) for c in cells if c != "-")
    time_rows, mem_rows = rows[:8], rows[8:]
    assert {int(r[0]): parse(r[1:]) for r in time_rows} == PAPER_TIME_SAVED
    assert {int(r[0]): parse(r[1:]) for r in mem_rows} == PAPER_MEMORY_SAVED
    with pytest.raises(ValueError):
        max_batch_that_fits(lambda b: (_ for _ in ()).throw(ValueError("other")))


def test_tiny_benchmark_writes_csv_markdown_png(tmp_path):
    written = run_benchmark(tmp_path, "t3", tiny_inference(), tiny_throughput(), "thr", command="cmd x",
                            progress=False, log=lambda *_: None)
    assert {p.name for p in written.values()} == {"t3.csv", "t3.md", "t3.png", "thr.csv", "thr.md"}
    rows = list(csv.DictReader((tmp_path / "t3.csv").read_text().splitlines()))
    assert [(int(r["n"]), int(r["k"])) for r in rows] == [(64, 16), (64, 32), (128, 16), (128, 32)]
    for r in rows:
        for col in ("time_linformer_s", "time_full_s", "time_eager_s", "time_roberta_sdpa_s", "flop_ratio",
                    "speedup_vs_full", "speedup_vs_eager"):
            assert float(r[col]) > 0
        assert float(r["flop_ratio"]) == pytest.approx(flop_ratio(int(r["n"]), int(r["k"]), 32, 64), rel=1e-5)
    md = (tmp_path / "t3.md").read_text()
    assert "| n | k = 16 | k = 32 |" in md and "| 64 |" in md and "| 128 |" in md and "cmd x" in md
    assert "Machine:" in md and "1-minute load average" in md and "at the start" in md
    for r in rows:  # the threads each model ran with, per row (the Linformer's fitted to the free cores)
        assert r["threads_full"] == str(torch.get_num_threads()) and r["threads_linformer"]
    eager_table = md.split("## Against the paper-era")[1].split("## Against today")[0]
    assert "| 64 | **" in eager_table and "x)*" not in eager_table  # the paper has no n < 512 cells
    assert (tmp_path / "t3.png").read_bytes()[:4] == b"\x89PNG"
    thr = list(csv.DictReader((tmp_path / "thr.csv").read_text().splitlines()))
    assert [r["model"] for r in thr] == ["linformer", "full", "roberta"]
    assert [(r["k"], r["sharing"]) for r in thr] == [("16", "layerwise"), ("", ""), ("", "")]  # full has no k
    assert thr[1]["label"] == "ours, full attention"
    assert "| ours, linformer k=16, layerwise |" in md and "| ours, full attention |" in md
    assert all(float(r["tokens_per_s"]) > 0 for r in thr)
    assert float(thr[2]["speedup_vs_roberta"]) == pytest.approx(1.0)


def test_config_composes():
    inf, thr = settings_from_config(compose("benchmark", ["device=cpu"]))
    assert inf.max_n == 8192 and thr is not None  # the CPU cap on n
    inf, thr = settings_from_config(compose("benchmark", ["device=cuda", "throughput.enabled=false"]))
    assert inf.max_n is None and thr is None
    with pytest.raises(ConfigError, match=r"inference.hiden is not a inference setting \(did you mean inference.hidden\?\)"):
        settings_from_config(compose("benchmark", ["+inference.hiden=1"]))


def _benchmark_folders() -> Path:
    """Where configs/benchmark.yaml puts a benchmark's Hydra folder (hydra.run.dir without its run_name)."""
    return Path(compose("benchmark", ["run_name=x"], with_hydra=True).hydra.run.dir).parent


@pytest.mark.parametrize("run_name", ["../../elsewhere", "a/b", ".."])
def test_a_run_name_that_is_a_path_is_refused_where_it_names_the_benchmark_s_folder(tmp_path, run_name):
    """With out_dir given too: Hydra's own files (.hydra/, benchmark.log) go to the folder run_name names. The
    folder is named as it is (its message named paths.output_dir, which is no benchmark key)."""
    for out in ([], [f"out_dir={tmp_path}"]):
        with pytest.raises(ConfigError, match=r"run_name=.* must name a benchmark's folder \(one name, not a path") \
                as refused:
            settings_from_config(compose("benchmark", ["device=cpu", f"run_name={run_name}", *out]))
        assert f"straight into {_benchmark_folders()}/, or outside it" in str(refused.value)


def test_a_benchmark_named_as_its_sweep_folder_is_refused_with_out_dir_given_too(tmp_path):
    """run_name=multirun was checked only where out_dir was null: with out_dir given, Hydra's .hydra/ and
    benchmark.log still went into outputs/benchmark/multirun, the benchmark's sweep folder (named as it is)."""
    sweeps = Path(compose("benchmark", ["run_name=x"], with_hydra=True).hydra.sweep.dir)
    with pytest.raises(ConfigError, match=r"^run_name='multirun' is the name of the benchmark sweep folder") \
            as refused:
        settings_from_config(compose("benchmark", ["device=cpu", "run_name=multirun", f"out_dir={tmp_path}"]))
    assert f"sweep folder ({sweeps}, where --multirun puts its jobs)" in str(refused.value)


@pytest.mark.parametrize("device, cuda_devices, message", [
    ("cuda", 0, "device='cuda': this machine has no CUDA device"),
    ("cuda:2", 2, r"device='cuda:2': this machine has 2 CUDA device\(s\), cuda:0 .. cuda:1"),
    ("gpu", 1, "device='gpu' is not a device here: use auto, cpu, cuda or cuda:<index>"),
    ("cpu:1", 0, "device='cpu:1' is not a device here"),
    ("mps", 0, "device='mps' is not a device here"),
])
def test_a_device_the_machine_lacks_is_one_error_naming_the_key(device, cuda_devices, message, monkeypatch):
    """The one device check (devices.resolve_device): torch would fail at the first tensor moved there, with a
    traceback, after the models were built."""
    from linformer.devices import resolve_device

    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda_devices > 0)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: cuda_devices)
    with pytest.raises(ConfigError, match="^" + message):
        resolve_device(device)
    assert resolve_device("auto") == torch.device("cuda" if cuda_devices else "cpu")
    assert resolve_device("cpu") == torch.device("cpu")


def test_the_benchmark_refuses_a_missing_gpu_before_it_starts_anything(tmp_path, monkeypatch):
    from linformer.bench import cli

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(cli, "competing_processes", lambda n: pytest.fail("busy processes started"))
    cfg = compose("benchmark", ["device=cuda", "competing=1", f"out_dir={tmp_path / 'b'}"])
    with pytest.raises(ConfigError, match="^device='cuda': this machine has no CUDA device"):
        cli.benchmark_from_config(cfg)
    assert not (tmp_path / "b").exists()


@pytest.mark.parametrize("override, message", [
    ("inference.ks=[abc]", "inference.ks=['abc'] must be a list, each entry a whole number."),
    ("inference.hidden=wide", "inference.hidden='wide' must be a whole number."),
    ("inference.max_n=1.5", "inference.max_n=1.5 must be a whole number or null."),
    ("inference.memory=3", "inference.memory=3 must be true or false."),
])
def test_benchmark_settings_of_the_wrong_type_are_one_error_naming_the_key(override, message):
    with pytest.raises(ConfigError) as err:
        settings_from_config(compose("benchmark", ["device=cpu", override]))
    assert str(err.value) == message


@pytest.mark.parametrize("threads", ["0", "-2", "1.5"])
def test_a_thread_count_below_one_is_one_error_before_anything_runs(threads, tmp_path):
    from linformer.bench.cli import benchmark_from_config

    cfg = compose("benchmark", ["device=cpu", f"threads={threads}", f"out_dir={tmp_path}"])
    with pytest.raises(ConfigError, match=rf"^threads={threads} must be a whole number of at least 1\.$"):
        benchmark_from_config(cfg)
    assert not any(tmp_path.iterdir())  # nothing measured, nothing written


def test_a_benchmark_with_other_threads_does_not_replace_an_earlier_one(tmp_path, monkeypatch):
    """Threads and the thread policy change what is measured, so they are in the output's record."""
    from linformer.bench import cli
    from linformer.errors import OutputPathError

    def measured(out_dir, name, inf, thr, throughput_name, **_):  # the files a benchmark writes, without measuring
        for path in cli.benchmark_files(out_dir, name, inf, thr, throughput_name).values():
            Path(path).write_text("measured")

    from linformer.modeling import threads

    monkeypatch.setattr(cli, "run_benchmark", measured)
    monkeypatch.setattr(threads, "_state", threads._State())  # cpu_threads= sets the process's policy
    before = torch.get_num_threads()
    try:
        base = ["device=cpu", "throughput.enabled=false", f"out_dir={tmp_path}", "name=t"]
        cli.benchmark_from_config(compose("benchmark", [*base, "threads=1"]))
        cli.benchmark_from_config(compose("benchmark", [*base, "threads=1"]))  # the same settings: rebuilt
        with pytest.raises(OutputPathError, match=r"other settings \(threads: 1 -> 2\)"):
            cli.benchmark_from_config(compose("benchmark", [*base, "threads=2"]))
        with pytest.raises(OutputPathError, match=r"other settings \(cpu_threads: null -> 'fixed'\)"):
            cli.benchmark_from_config(compose("benchmark", [*base, "threads=1", "cpu_threads=fixed"]))
    finally:
        torch.set_num_threads(before)


def test_a_benchmark_s_lines_are_in_its_log_file(tmp_path, monkeypatch, capsys):
    """benchmark.log (Hydra's log file in the run directory) held none of the benchmark's lines: each grid's summary
    ("[bench] inference: N cells in S s -> table3.md") was printed alone. They are in the file too, printed once."""
    import logging

    from linformer.bench import cli

    line = "[bench] inference: 3 cells in 1 s -> t.md"
    monkeypatch.setattr(cli, "run_benchmark", lambda *a, log=print, **_: log(line))
    handler = logging.FileHandler(tmp_path / "benchmark.log")
    logging.getLogger().addHandler(handler)
    try:
        cli.benchmark_from_config(compose("benchmark", ["device=cpu", "throughput.enabled=false",
                                                        f"out_dir={tmp_path}", "name=t"]))
    finally:
        logging.getLogger().removeHandler(handler)
        handler.close()
    assert capsys.readouterr().out.splitlines() == [line]
    assert (tmp_path / "benchmark.log").read_text().splitlines() == [line]


def test_the_cpu_thread_policy_is_checked_set_and_recorded(tmp_path, monkeypatch):
    from linformer.bench.cli import benchmark_from_config
    from linformer.bench.common import machine_description
    from linformer.bench.report import thread_policy
    from linformer.modeling import threads

    monkeypatch.setattr(threads, "_state", threads._State())
    cfg = compose("benchmark", ["device=cpu", "cpu_threads=sometimes", f"out_dir={tmp_path}"])
    with pytest.raises(ConfigError, match=r"^cpu_threads='sometimes' is not one of adaptive, fixed\.$"):
        benchmark_from_config(cfg)
    assert not any(tmp_path.iterdir())
    monkeypatch.setenv(threads.ENV, "fixed")
    machine = machine_description(torch.device("cpu"))
    assert machine["cpu_thread_policy"] == "fixed"
    assert thread_policy(machine) == "; every model at torch's setting (cpu_threads=fixed)"
    threads.set_policy("adaptive", key="cpu_threads")
    assert "fitted to the cores other processes leave free" in thread_policy(machine_description(torch.device("cpu")))
    assert thread_policy({"device": "cuda", "cpu_thread_policy": "adaptive"}) == ""


@pytest.mark.parametrize("competing", ["-1", "1.5", "many"])
def test_a_bad_competing_count_is_one_error_before_anything_runs(competing, tmp_path):
    from linformer.bench.cli import benchmark_from_config

    cfg = compose("benchmark", ["device=cpu", f"competing={competing}", f"out_dir={tmp_path}"])
    with pytest.raises(ConfigError, match=r"^competing=.* must be a whole number of at least 0\.$"):
        benchmark_from_config(cfg)
    assert not any(tmp_path.iterdir())


def _cpu_ticks(pid: int) -> int:  # user + system clock ticks of a process (Linux /proc)
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def _running(pid: int) -> bool:  # a process that has not ended (a zombie not yet reaped has)
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] not in "ZX"
    except FileNotFoundError:
        return False


def _children(pid: int) -> list[int]:  # the running processes whose parent is `pid`
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, IndexError):
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == pid and _running(int(stat.parent.name)):
                found.append(int(stat.parent.name))
    return found


def test_competing_processes_run_beside_the_block_and_the_report_says_so():
    """A shared machine on demand: busy processes for the block's length, free to run on any core where the
    benchmark is pinned to one, recorded in the machine description and printed on the report's machine line; gone
    afterwards."""
    import os

    from linformer.bench import common
    from linformer.bench.report import competing

    cores = set(range(os.cpu_count() or 1))
    pinned = hasattr(os, "sched_setaffinity") and len(cores) > 1 and os.sched_getaffinity(0) == cores
    if pinned:
        os.sched_setaffinity(0, {0})
    try:
        with common.competing_processes(2):
            children = list(common._COMPETING)
            assert len(children) == 2 and all(p.poll() is None for p in children)
            if pinned:
                assert all(os.sched_getaffinity(p.pid) == cores for p in children)
            if Path("/proc/self/stat").exists():  # busy from the block's first moment, not still starting
                before = [_cpu_ticks(p.pid) for p in children]
                time.sleep(0.5)
                assert all(_cpu_ticks(p.pid) > b for p, b in zip(children, before))
            machine = common.machine_description(torch.device("cpu"))
            assert machine["competing_processes"] == "2"
    finally:
        if pinned:
            os.sched_setaffinity(0, cores)
    assert competing(machine).startswith(", beside 2 competing one-thread busy processes it started, 1-minute load")
    assert all(p.returncode == 0 for p in children)  # ended by the block's end, not killed
    assert common.machine_description(torch.device("cpu"))["competing_processes"] == "0"
    assert competing({"competing_processes": "0"}) == ""


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads processes from Linux /proc")
def test_a_benchmark_killed_by_sigkill_leaves_no_busy_process():
    """SIGKILL runs no cleanup: the busy process ends because its stdin, whose one writer was the benchmark, closes."""
    import os
    import signal

    from linformer.bench import common

    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the benchmark: one busy process, then a line once it is busy, then waiting to be killed
        try:
            os.close(r)
            with common.competing_processes(1):
                os.write(w, b"busy\n")
                time.sleep(common.COMPETING_START_S)
        finally:
            os._exit(1)
    os.close(w)
    reaped = False
    try:
        with os.fdopen(r) as told:
            assert told.readline() == "busy\n"
        left = _children(pid)
        assert left
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        reaped = True
        deadline = time.monotonic() + 10
        while any(map(_running, left)) and time.monotonic() < deadline:
            time.sleep(0.05)
        running = [p for p in left if _running(p)]
        for p in running:  # nothing left behind by a failure either
            os.kill(p, signal.SIGKILL)
        assert not running
    finally:
        if not reaped:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)


@pytest.mark.parametrize("overrides, message", [
    (["inference.reps=0"], "inference.reps=0 must be a whole number of at least 1."),
    (["device=tpu"], "device='tpu' is not one of auto, cpu, cuda."),
    (["inference.dtype=fp8"], "inference.dtype='fp8' is not one of fp32, bf16, fp16."),
    (["inference.reference_dtype=fp64"],
     "inference.reference_dtype='fp64' is not one of fp32, bf16, fp16 (or null)."),
    (["inference.budget_s=-1"], "inference.budget_s=-1 must be a positive number of seconds."),
    (["inference.ks=[1024]", "inference.ns=[512]"], ("inference.ns=[512] and inference.ks=[1024] (max_n=8192): no cell "
                                                    "has k < n, so nothing would be measured.")),
    (["inference.baselines=[full,bigbird]"], ("inference.baselines: 'bigbird' is not one of full, eager, roberta_sdpa, "
                                             "modernbert, longformer.")),
    (["inference.linformer_attn_implementation=xformers"],
     "inference.linformer_attn_implementation='xformers' is not one of sdpa, flex_attention."),
    # the models' settings, as LinformerConfig takes them, at every n of the grid (they used to fail mid-run)
    (["inference.sharing=bogus"], ("inference: sharing='bogus' is not one of none, headwise, kv, layerwise; one of "
                                   f"your own: an entry in linformer.modeling.configuration.SHARING {YOUR_OWN}.")),
    (["inference.heads=7"], "inference: hidden_size (768) must be a multiple of num_attention_heads (7)."),
    (["inference.ns=[512,4096]", "inference.global_positions=[1000]"],
     ("inference: global_positions=[1000]: [1000] not a position in -512..511 (max_seq_len n=512; negative counts "
      "from each row's last real token).")),
    (["throughput.enabled=true", "throughput.sharing=kvv"],
     ("throughput: sharing='kvv' is not one of none, headwise, kv, layerwise; one of your own: an entry in "
      f"linformer.modeling.configuration.SHARING {YOUR_OWN}.")),
    # the throughput grid is checked as the inference grid is: it used to time k > n, or write an empty table
    (["inference.enabled=false", "throughput.ns=[512]", "throughput.ks=[1024]"],
     "throughput.ns=[512] and throughput.ks=[1024]: no cell has k < n, so nothing would be measured."),
    (["inference.enabled=false", "throughput.ns=[]"],
     "throughput.ns=[] / throughput.ks=[256]: every n and k must be at least 1."),
    (["inference.enabled=false", "throughput.ks=[0]"],
     "throughput.ns=[512, 2048] / throughput.ks=[0]: every n and k must be at least 1."),
    (["inference.enabled=false", "throughput.precisions=[]"],
     "throughput.precisions=[]: nothing would be measured; give at least one."),
    (["inference.enabled=false", "throughput.models=[]"],
     "throughput.models=[]: nothing would be measured; give at least one."),
    (["inference.enabled=false", "throughput.enabled=false"],
     "inference.enabled=false and throughput.enabled=false: nothing would be measured; enable one of them."),
    # a mode torch.compile does not know used to fail per model (traceback, rows of "failed", exit 0); with nothing
    # compiled it was silently ignored
    (["inference.enabled=false", "throughput.compile=[true]", "throughput.compile_mode=bogus"],
     ("throughput.compile_mode='bogus' is not one of default, reduce-overhead, max-autotune, "
     "max-autotune-no-cudagraphs (or null).")),
    (["inference.enabled=false", "throughput.compile_mode=max-autotune"],
     ("throughput.compile_mode=max-autotune: nothing is compiled (throughput.compile=[False]): set "
     "throughput.compile=[true] (or [false,true]), or leave compile_mode null.")),
    # every n above the CPU's cap: the cap and how to lift it are named (not "no cell has k < n")
    (["inference.ns=[16384]", "inference.ks=[64]", "throughput.enabled=false"],
     ("inference.ns=[16384]: every n is above inference.max_n=8192 (the CPU's default cap), so nothing would be "
     "measured; give an n up to 8192, or inference.max_n=null to lift the cap.")),
])
def test_a_benchmark_value_nothing_can_run_with_is_one_error_line(overrides, message):
    """They used to run and write an empty table with exit 0, or fail deep inside with a traceback."""
    with pytest.raises(ConfigError) as err:
        settings_from_config(compose("benchmark", ["device=cpu", *overrides] if "device=tpu" not in overrides
                                     else overrides))
    assert str(err.value) == message


def test_the_linformer_rows_run_through_flex_when_asked_and_full_attention_keeps_sdpa():
    from linformer.bench.inference import build_model
    from linformer.bench.report import inference_markdown

    s = tiny_inference(ns=[64], ks=[16], local_window=8, global_positions=[0, -1], baselines=["full"],
                       linformer_attn_implementation="flex_attention")
    assert build_model("linformer", 64, 16, s).config._attn_implementation == "flex_attention"
    assert build_model("full", 64, 16, s).config._attn_implementation == "sdpa"
    meta = {"settings": s, "machine": {"device": "cpu"}, "elapsed_s": 0.0, "note": ""}
    assert 'through `attn_implementation="flex_attention"`' in inference_markdown([], meta)


def test_the_training_step_rows_carry_the_local_and_global_keys_and_their_kernel():
    from linformer.bench.throughput import build_mlm, flops_per_token

    s = tiny_throughput(ks=[16], local_window=8, global_positions=[0, -1], linformer_attn_implementation="flex_attention")
    model = build_mlm("linformer", 64, s)
    assert (model.config.local_window, model.config.global_positions) == (8, [0, -1])
    assert model.config._attn_implementation == "flex_attention"
    assert build_mlm("full", 64, s).config._attn_implementation == "sdpa"
    plain = tiny_throughput(ks=[16])
    assert flops_per_token("linformer", 64, s) > flops_per_token("linformer", 64, plain)  # the band and globals
    assert flops_per_token("full", 64, s) == flops_per_token("full", 64, plain)


def test_table3_measures_the_linformer_with_local_and_global_keys_when_asked():
    """The Linformer rows carry the local window and the global tokens, their FLOPs in the ratio, and the header
    says so."""
    from linformer.bench.inference import build_model, run_inference
    from linformer.bench.report import inference_markdown

    s = tiny_inference(ns=[64, 128], ks=[16], local_window=8, global_positions=[0, -1], baselines=["full"])
    model = build_model("linformer", 64, 16, s)
    assert (model.config.local_window, model.config.global_positions) == (8, [0, -1])
    rows, meta = run_inference(s, progress=False, log=lambda *_: None)
    plain_ratio = flop_ratio(64, 16, 32, 64)
    assert all(r["time_linformer_s"] > 0 for r in rows) and rows[0]["flop_ratio"] < plain_ratio
    md = inference_markdown(rows, meta, "cmd")
    assert "exact local keys of w = 8 tokens and global tokens [0, -1]" in md
    assert "landmark_pooling" not in md
    local_ratio = rows[0]["flop_ratio"]  # n = 64
    pooled = tiny_inference(ns=[64], ks=[16], local_window=8, global_positions=[0, -1], baselines=["full"],
                            landmark_pooling=True)
    model = build_model("linformer", 64, 16, pooled)
    assert (model.config.landmark_pooling, model.config.length_policy) == (True, "resample")
    rows, meta = run_inference(pooled, progress=False, log=lambda *_: None)
    assert rows[0]["flop_ratio"] > local_ratio  # E^T Q replaces E^T K and F^T V: fewer FLOPs
    assert "pooled by attention (landmark_pooling" in inference_markdown(rows, meta, "cmd")


def test_the_peer_encoders_run_side_by_side_at_the_same_size_and_get_their_own_section(tmp_path):
    """inference.baselines=[full,modernbert,longformer]: HF ModernBERT and Longformer of the benchmark's size, timed
    in the same rounds; each row gets the Linformer's speed-up and memory saved against each, and the report a
    section of its own."""
    from linformer.bench.inference import build_model, run_inference
    from linformer.bench.report import inference_markdown

    s = tiny_inference(ns=[128], ks=[16], local_window=8, global_positions=[0, -1],
                       baselines=["full", "modernbert", "longformer"])
    peers = {kind: build_model(kind, 128, None, s) for kind in ("modernbert", "longformer")}
    config = peers["modernbert"].config
    assert (config.num_hidden_layers, config.hidden_size, config.num_attention_heads) == (s.layers, s.hidden, s.heads)
    assert peers["longformer"].model.config.attention_window == [256] * s.layers
    rows, meta = run_inference(s, progress=False, log=lambda *_: None)
    (row,) = rows
    for kind in ("modernbert", "longformer"):
        assert row[f"time_{kind}_s"] > 0
        assert row[f"speedup_vs_{kind}"] == pytest.approx(row[f"time_{kind}_s"] / row["time_linformer_s"])
    md = inference_markdown(rows, meta, "cmd")
    assert "## Against the long-document encoders users pick instead" in md
    assert "HF ModernBERT (local 128, global every 2nd layer, SDPA):" in md and "HF Longformer (window 256" in md
    assert "## Against the paper-era" not in md  # no eager baseline ran: no section of empty cells


@pytest.mark.parametrize("shape", [(2, 64, 4, 256), (2, 384, 12, 1536)])
def test_the_modernbert_peer_has_our_encoder_s_parameters_its_glu_ffn_at_two_thirds_width(shape):
    """ModernBERT's MLP is a GLU (Wi: hidden -> 2 x intermediate): given our FFN width it did 1.5x our feed-forward's
    work (14.2M against 11.0M encoder parameters at MiniLM's shape), so every speed-up against it was overstated.
    Its encoder (all but the token embeddings) holds within a few percent of ours."""
    from linformer.bench.inference import build_model

    layers, hidden, heads, ffn = shape
    s = tiny_inference(layers=layers, hidden=hidden, heads=heads, ffn=ffn, vocab=64)

    def encoder(model, embeddings):
        return sum(p.numel() for name, p in model.named_parameters() if not name.startswith(embeddings))

    ours = encoder(build_model("full", 128, None, s), "embeddings.")
    peer = encoder(build_model("modernbert", 128, None, s), "embeddings.tok_embeddings")
    assert peer == pytest.approx(ours, rel=0.05)


def test_a_reference_dtype_runs_full_attention_and_the_linformer_again_in_it_side_by_side(monkeypatch):
    """inference.dtype=bf16 with reference_dtype=fp32: full attention and the Linformer also run in fp32 in the same
    interleaved rounds (their weights really fp32, the others bf16); each row gets the Linformer in bf16 against full
    attention in fp32, and what bf16 alone gains for each model; the report a section of its own."""
    from linformer.bench import inference
    from linformer.bench.report import inference_markdown

    timed_names, dtypes = [], {}
    medians = inference.interleaved_rounds

    def spy(fwds, reps, device, on_call=None, **kw):
        timed_names.append(list(fwds))
        for name, fwd in fwds.items():  # each forward is a lambda with its model as first default
            dtypes[name] = next(fwd.__defaults__[0].parameters()).dtype
        return medians(fwds, reps, device, on_call, **kw)

    monkeypatch.setattr(inference, "interleaved_rounds", spy)
    s = tiny_inference(ns=[64], ks=[16], baselines=["full", "roberta_sdpa"], dtype="bf16", reference_dtype="fp32")
    rows, meta = inference.run_inference(s, progress=False, log=lambda *_: None)
    assert timed_names == [["full", "roberta_sdpa", "linformer@16", "full:fp32", "linformer@16:fp32"]]
    assert dtypes == {"full": torch.bfloat16, "roberta_sdpa": torch.bfloat16, "linformer@16": torch.bfloat16,
                      "full:fp32": torch.float32, "linformer@16:fp32": torch.float32}
    (row,) = rows
    assert row["reference_dtype"] == "fp32"
    assert row["speedup_vs_full_ref"] == pytest.approx(row["time_full_ref_s"] / row["time_linformer_s"])
    assert row["dtype_speedup_linformer"] == pytest.approx(row["time_linformer_ref_s"] / row["time_linformer_s"])
    assert row["dtype_speedup_full"] == pytest.approx(row["time_full_ref_s"] / row["time_full_s"])
    md = inference_markdown(rows, meta, "cmd")
    assert "## Against the same models in fp32" in md and "bf16 (full attention and the Linformer also in fp32)" in md
    assert "ours, linformer k=16, layerwise in fp32" in md
    same = tiny_inference(ns=[64], ks=[16], baselines=["full"], dtype="fp32", reference_dtype="fp32")
    rows, _ = inference.run_inference(same, progress=False, log=lambda *_: None)  # its own dtype: nothing twice
    assert "reference_dtype" not in rows[0] and timed_names[-1] == ["full", "linformer@16"]


def test_a_speed_up_far_beyond_its_flop_ratio_is_warned_naming_the_load_and_the_threads(monkeypatch):
    """On a loaded CPU the adaptive policy runs the Linformer on the free cores while full attention waits for the
    busy ones: a speed-up far above the FLOP ratio measures the machine. Each such cell is a warning line (logged and
    in the report) naming the load average and the threads each model ran with."""
    from linformer.bench import inference
    from linformer.bench.report import inference_markdown

    def loaded(fwds, reps, device, on_call=None, threads_used=None):  # full attention 20x slower, on 2 threads
        threads_used.update({name: [1] if name.startswith("linformer") else [2, 2] for name in fwds})
        return {name: [0.01] if name.startswith("linformer") else [0.2] for name in fwds}

    monkeypatch.setattr(inference, "interleaved_rounds", loaded)
    logged = []
    rows, meta = inference.run_inference(tiny_inference(ns=[64], ks=[16], baselines=["full"]), progress=False,
                                         log=logged.append)
    (row,) = rows
    assert (row["threads_linformer"], row["threads_full"]) == ("1", "2")
    (warning,) = [line for line in logged if line.startswith("warning:")]
    assert "n=64, k=16" in warning and "20.00x" in warning and "1-minute load average" in warning
    assert "the Linformer at 1 thread and full attention at 2 threads" in warning
    md = inference_markdown(rows, meta, "cmd")
    assert "**Warning: n=64, k=16: measured speed-up 20.00x" in md
    assert "CPU threads per timed forward (Linformer / full attention): n=64, k=16: 1 / 2." in md


def test_memory_is_measured_after_a_warm_up_forward_even_with_one_warm_up(monkeypatch):
    """With warmup=1 the memory used to be read on the very first forward, counting one-off allocations (7.4 MiB
    for a cell that takes 0.63 MiB once warm)."""
    from linformer.bench import inference

    calls, seen = [], []
    forward = inference._forward
    monkeypatch.setattr(inference, "_forward", lambda model, ids: calls.append(id(model)) or forward(model, ids))

    def peak(fn, device):
        seen.append(calls.count(calls[-1]) if calls else 0)  # forwards this model ran before its memory forward
        fn()
        return 1

    monkeypatch.setattr(inference, "peak_memory_bytes", peak)
    monkeypatch.setattr(inference, "peak_tensor_bytes", peak)
    inference.run_inference(tiny_inference(ns=[64], ks=[16], warmup=1, reps=1, baselines=["full"]), progress=False,
                            log=lambda *_: None)
    assert len(seen) == 4 and all(before >= 1 for before in seen)  # the resident set's and the tensors', each model


def test_cpu_memory_ratios_use_the_tensors_peak_with_the_resident_set_beside_it(tmp_path):
    """One resident-set reading per model moved by -41% to +38% between two identical runs on a busy machine, as much
    as the effects reported. The column the ratios use is the peak of live tensors (the profiler's: the same figure
    every run); the resident-set peak stays beside it, and the report says which is which."""
    from linformer.bench.common import peak_tensor_bytes
    from linformer.bench.inference import _forward, build_model, run_inference
    from linformer.bench.report import inference_markdown

    s = tiny_inference(ns=[64], ks=[16], reps=1, baselines=["full", "eager"])
    rows, meta = run_inference(s, progress=False, log=lambda *_: None)
    (row,) = rows
    ids = torch.randint(3, s.vocab, (1, 64))
    expected = {}
    for kind, k in (("full", None), ("eager", None), ("linformer", 16)):
        model = build_model(kind, 64, k, s)
        _forward(model, ids)
        expected[kind] = peak_tensor_bytes(lambda m=model: _forward(m, ids), torch.device("cpu")) / 2**20
    assert {kind: row[f"mem_{kind}_mib"] for kind in expected} == pytest.approx(expected)
    assert row["mem_saved_vs_eager"] == pytest.approx(expected["eager"] / expected["linformer"])
    if peak_memory_bytes(lambda: None, torch.device("cpu")) is not None:
        assert all(row[f"rss_{kind}_mib"] is not None for kind in expected)
    md = inference_markdown(rows, meta, "cmd")
    assert "Memory: peak bytes of live tensors a forward adds" in md and "In brackets the process's resident-set" in md
    assert "the paper's the ratio of the largest batches that fit" in md  # the paper measured memory otherwise


def test_a_budget_that_drops_every_n_is_refused_before_anything_is_written(tmp_path):
    """The budget is applied once the device's speed is known: a budget no n fits used to write an empty table (the
    default ks as its columns, a CSV without a header) and exit 0."""
    with pytest.raises(ConfigError, match=r"inference.budget_s=1e-06: nothing would be measured, n=128 over the "
                                          r"time budget .*: raise inference.budget_s, or give smaller inference.ns."):
        run_benchmark(tmp_path / "out", inference=tiny_inference(ns=[128], ks=[16], budget_s=1e-6), progress=False,
                      log=lambda *_: None)
    assert not (tmp_path / "out").exists()


def test_a_run_stopped_before_its_first_cell_writes_the_ks_asked_for_and_a_csv_header(tmp_path):
    from linformer.bench.report import inference_markdown, write_csv

    meta = {"settings": tiny_inference(ks=[16, 32]), "machine": {"device": "cpu"}, "stopped": "Partial: stopped"}
    assert "| n | k = 16 | k = 32 |" in inference_markdown([], meta)
    assert write_csv([], tmp_path / "t.csv").read_text().splitlines() == ["n,k"]


def test_a_benchmark_refused_before_measuring_leaves_no_directory(tmp_path):
    from linformer.bench.runner import run_benchmark

    out = tmp_path / "bench" / "run"
    with pytest.raises(ConfigError, match="hidden_size=0"):
        run_benchmark(out, inference=tiny_inference(hidden=0), progress=False, log=lambda *_: None)
    assert not (tmp_path / "bench").exists()


_TINY = ["device=cpu", "progress=false", "inference.layers=1", "inference.hidden=32", "inference.heads=4",
         "inference.ffn=64", "inference.vocab=64", "inference.reps=1", "inference.baselines=[full]",
         "throughput.layers=1", "throughput.hidden=32", "throughput.heads=4", "throughput.ffn=64",
         "throughput.vocab=64", "throughput.ks=[16]", "throughput.steps=1", "throughput.precisions=[fp32]",
         "throughput.models=[linformer,full]"]


@pytest.mark.parametrize("part", ["inference", "throughput"])
def test_a_benchmark_stopped_by_sigterm_writes_what_it_measured_marked_partial(part, tmp_path, monkeypatch):
    """A GPU target's deadline or a scheduler stops a benchmark with SIGTERM: the cells measured before it are
    written and recorded (so the same command replaces them), the report says it is partial and which cells were not
    measured, the part after it does not start, and the run ends as stopped."""
    import os
    import signal

    from linformer.bench import cli, inference, throughput
    from linformer.errors import Preempted

    def signal_at_second_n(build, n_at: int):
        def build_then_stop(*args, **kw):
            if args[n_at] == 128:  # the second n: the real signal, through the handler the CLI installs
                os.kill(os.getpid(), signal.SIGTERM)
            return build(*args, **kw)
        return build_then_stop

    if part == "inference":  # build_model(kind, n, k, settings)
        monkeypatch.setattr(inference, "build_model", signal_at_second_n(inference.build_model, 1))
        overrides = ["inference.ns=[64,128,256]", "inference.ks=[16]", "throughput.ns=[64]", "throughput.tokens_per_step=128"]
        md, csv_file, measured = tmp_path / "t.md", tmp_path / "t.csv", "after 1 cells"
        unmeasured = ["n=128 (the run was stopped", "n=256 (the run was stopped"]
    else:  # _Models.get(self, entry, n)
        monkeypatch.setattr(throughput._Models, "get", signal_at_second_n(throughput._Models.get, 2))
        overrides = ["inference.enabled=false", "throughput.ns=[64,128,256]", "throughput.tokens_per_step=256"]
        md, csv_file, measured = tmp_path / "t_throughput.md", tmp_path / "t_throughput.csv", "after 2 rows"
        unmeasured = ["Not measured: grid n=128 fp32 compile=False; grid n=256 fp32 compile=False."]
    from linformer.bench import runner

    titles, plot = [], runner.plot_times
    monkeypatch.setattr(runner, "plot_times", lambda rows, path, title="", *rest: titles.append(title) or plot(
        rows, path, title, *rest))
    cfg = compose("benchmark", [*_TINY, *overrides, f"out_dir={tmp_path}", "name=t"])
    with pytest.raises(Preempted, match="^stopped by SIGTERM: any cells measured before it are written") as stop:
        cli.benchmark_from_config(cfg)
    assert all(title.endswith("partial: the run was stopped before the whole grid") for title in titles)
    assert stop.value.exit_code == 128 + signal.SIGTERM
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # the handler is the benchmark's only while it runs
    text = md.read_text()
    assert f"**Partial: the run was stopped (SIGTERM) {measured}; the rest was not measured." in text
    assert all(words in text for words in unmeasured), text
    with open(csv_file) as f:
        assert {int(r["n"]) for r in csv.DictReader(f)} == {64}  # the whole first n, nothing of the others
    assert not (tmp_path / "t_throughput.md").exists() or part == "throughput"  # the part after it never started
    monkeypatch.undo()
    cli.benchmark_from_config(cfg)  # the same command again replaces the partial output: it was recorded as its own
    assert "Partial" not in md.read_text()


def test_model_checks_record_their_command_the_load_and_threads_and_warn_beyond_the_flop_ratio(tmp_path,
                                                                                               monkeypatch):
    """model_checks' Machine line is the machine's load (never a count of the benchmark's own busy processes read as
    "idle"), its Command line the command that ran, and its speed-up is checked against the FLOP ratio."""
    from linformer.bench import model_checks

    def loaded(n, k, threads_used=None):  # full attention 20x slower than the Linformer, on 2 threads against 1
        threads_used.update(linformer=[1, 1], full=[2, 2])
        return {"linformer": 0.05, "full": 1.0}

    monkeypatch.setattr(model_checks, "roberta_logits_delta", lambda: 1e-6)
    monkeypatch.setattr(model_checks, "padding_leak", lambda: (0.0, 0.5))
    monkeypatch.setattr(model_checks, "forward_times", loaded)
    out = tmp_path / "mc.md"
    text = model_checks.report(str(out), "python scripts/model_checks.py --out mc.md")
    assert out.read_text() == text
    assert "Command: `python scripts/model_checks.py --out mc.md`" in text
    assert "competing_processes" not in text and "1-minute load average" in text
    assert "| CPU threads of the timed forwards, linformer / full | 1 / 2 |" in text
    assert "**Warning: forward time: measured speed-up 20.00x" in text
    assert "the Linformer at 1 thread and full attention at 2 threads" in text


def test_a_refused_benchmark_start_leaves_the_run_directory_s_hydra_record_as_it_was(tmp_path, monkeypatch, capsys):
    """Hydra writes .hydra/ before the script refuses a start whose outputs would replace other settings'; the record
    beside the earlier outputs is put back, so it still describes them (it held the refused command). The script's
    main in-process, with its command line."""

    from linformer.bench import cli
    from tests.conftest import as_command, load_script

    run = tmp_path / "bad"
    cli.benchmark_from_config(compose("benchmark", [*_TINY, "inference.ns=[64]", "inference.ks=[16]",
                                                    "throughput.enabled=false", f"out_dir={run}"]))
    earlier = {name: f"earlier {name}\n" for name in ("config.yaml", "hydra.yaml", "overrides.yaml")}
    (run / ".hydra").mkdir()
    for name, text in earlier.items():
        (run / ".hydra" / name).write_text(text)
    monkeypatch.chdir(CONFIGS.parent)
    as_command(monkeypatch, ["scripts/benchmark.py", *_TINY, "inference.ns=[64]", "inference.ks=[32]",
                             "throughput.enabled=false", f"hydra.run.dir={run}"])
    capsys.readouterr()
    with pytest.raises(SystemExit) as stop:
        load_script("benchmark").main()
    err = capsys.readouterr().err
    assert stop.value.code == 2 and "earlier benchmark output" in err, err
    assert {p.name: p.read_text() for p in (run / ".hydra").iterdir()} == earlier


def test_a_benchmark_s_out_dir_is_read_from_the_repository_with_home_expanded(tmp_path, monkeypatch):
    """out_dir=~/x wrote into a folder named "~" under the working directory, and a relative out_dir landed in the
    working directory: every command's paths are relative to the repository, "~" expanded."""
    from linformer.bench import cli
    from linformer.files.locations import repo_root

    written = []
    monkeypatch.setattr(cli, "run_benchmark", lambda out_dir, *args, **kwargs: written.append(out_dir))
    monkeypatch.setattr(cli, "output_files", lambda *args, **kwargs: contextlib.nullcontext())  # nothing written
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    base = ["device=cpu", "throughput.enabled=false", "name=t"]
    cli.benchmark_from_config(compose("benchmark", [*base, "out_dir='~/bench'"]))
    assert written == [str(tmp_path / "home" / "bench")] and not (tmp_path / "~").exists()
    cli.benchmark_from_config(compose("benchmark", [*base, "out_dir=some/where"]))
    assert written[1] == str(repo_root() / "some" / "where")


@pytest.mark.parametrize(("probe_s", "size"), [(1e-5, 1024), (0.01, 640)])
def test_the_flops_calibration_shrinks_its_product_where_one_would_take_long(monkeypatch, probe_s, size):
    """bf16 on a CPU without native bf16 took seconds per 1024-wide calibration product (six of them), before a
    benchmark measured anything: a slow probe now shrinks the product to CALIBRATION_SECONDS' worth."""
    from linformer.bench import inference

    monkeypatch.setattr(inference, "timed", lambda fn, device: (fn(), probe_s)[1])
    rate = inference.calibrate_flops_per_s(torch.device("cpu"), torch.float32, size=1024)
    assert round((rate * probe_s / 2) ** (1 / 3)) == size


@pytest.mark.parametrize("gpu", [False, True])
def test_device_auto_caps_n_as_the_device_it_finds(monkeypatch, gpu):
    """device=auto capped n at 8192 on a GPU too (the cap was looked up by the word "auto"), where the config's
    comment and the guide say a GPU has none: the cap follows the device auto finds."""
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: gpu)
    inf, _ = settings_from_config(compose("benchmark", ["device=auto"]))
    assert inf.max_n == (None if gpu else 8192)


def test_the_inference_grid_says_a_line_per_n_where_stderr_is_a_log_file(capsys):
    """Where stderr is a log file (no bar there) the grid said "planned N s" before it started and nothing more until
    its last cell, an hour later on a CPU; throughput says a line per block. Now each n's line says what was measured."""
    import re

    from linformer.bench.inference import run_inference
    from linformer.progress import progress_to_log_file

    assert progress_to_log_file()  # pytest's captured stderr: not a terminal
    logged = []
    rows, _ = run_inference(tiny_inference(ns=[64, 128], ks=[16, 32], reps=1, baselines=["full"], memory=False),
                            progress=True, log=logged.append)
    assert len(rows) == 4
    lines = [re.sub(r"\d+\.\d s", "T s", line) for line in logged if line.startswith("[bench] inference n=")]
    assert lines == ["[bench] inference n=64: 3 models, T s (2 of 4 cells)",
                     "[bench] inference n=128: 3 models, T s (4 of 4 cells)"]
    assert "\r" not in capsys.readouterr().err  # no bar either: its redraws run into one line in a file
