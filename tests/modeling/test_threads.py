"""The CPU thread policy: inference forwards fitted to the cores other processes leave free (modeling/threads.py)."""

import pytest
import torch

from linformer import LinformerForMaskedLM, LinformerModel
from linformer.errors import ConfigError
from linformer.modeling import threads

from .conftest import tiny_config


class Clock:
    """Stands in for the time module: wall and process time set by the test."""

    def __init__(self):
        self.wall, self.cpu = 100.0, 10.0

    def monotonic(self):
        return self.wall

    def process_time(self):
        return self.cpu


def write_stat(path, busy_ticks: dict[int, int], idle_ticks: int = 1000) -> None:
    """A /proc/stat whose cpuN lines hold `busy_ticks[N]`, split over user, system and steal."""
    lines = ["cpu  1 2 3 4 5 6 7 8 9 10"]
    for cpu, busy in busy_ticks.items():
        user, system, steal = busy - busy // 2, busy // 4, busy // 2 - busy // 4
        lines.append(f"cpu{cpu} {user} 0 {system} {idle_ticks} 0 0 0 {steal} 0 0")
    path.write_text("\n".join([*lines, "intr 1 2 3", "procs_running 3"]) + "\n")


@pytest.fixture
def machine(tmp_path, monkeypatch):
    """A process allowed CPUs 0 and 1 of a 3-CPU machine, its /proc/stat and clocks the test's, policy adaptive."""
    stat, clock = tmp_path / "stat", Clock()
    write_stat(stat, {0: 100, 1: 100, 2: 100})
    monkeypatch.setattr(threads, "PROC_STAT", str(stat))
    monkeypatch.setattr(threads, "time", clock)
    monkeypatch.setattr(threads, "_state", threads._State())
    threads._state.cpus, threads._state.tick_s = [0, 1], 0.01
    threads._state.snapshot = threads._snapshot([0, 1], 0.01)
    threads.set_policy("adaptive")
    previous = torch.get_num_threads()
    torch.set_num_threads(2)
    yield stat, clock
    torch.set_num_threads(previous)


def advance(machine, seconds: float, busy_ticks: dict[int, int], own_cpu_s: float) -> None:
    stat, clock = machine
    clock.wall += seconds
    clock.cpu += own_cpu_s
    write_stat(stat, busy_ticks)


def test_busy_cores_are_other_processes_time_on_the_allowed_cpus_steal_included(machine):
    # 1 s: CPUs 0 and 1 busy 0.8 s and 0.7 s (1.5 s), this process 0.5 s of it; CPU 2 (not ours) fully busy
    advance(machine, 1.0, {0: 180, 1: 170, 2: 200}, own_cpu_s=0.5)
    assert threads.busy_cores() == pytest.approx(1.0)
    assert threads.fitted_threads(2) == 1
    # a window shorter than WINDOW_S keeps the last measurement
    advance(machine, threads.WINDOW_S / 4, {0: 180, 1: 170, 2: 200}, own_cpu_s=0.0)
    assert threads.busy_cores() == pytest.approx(1.0)
    # then a quiet second, measured from the last measurement that counted (1.05 s): both cores free again
    advance(machine, 1.0, {0: 280, 1: 270, 2: 300}, own_cpu_s=1.95)
    assert threads.busy_cores() == pytest.approx(0.05 / (1.0 + threads.WINDOW_S / 4))
    assert threads.fitted_threads(2) == 2


@pytest.mark.parametrize(("cpus", "busy", "requested", "fitted"), [
    (2, 0.4, 2, 2),     # rounds: 1.6 free cores are 2
    (2, 0.6, 2, 1),
    (2, 2.0, 2, 1),     # at least one
    (16, 5.4, 8, 8),    # at most what torch was given
    (16, 9.6, 16, 6),
])
def test_fitted_threads(cpus, busy, requested, fitted, monkeypatch):
    monkeypatch.setattr(threads, "busy_cores", lambda: busy)
    monkeypatch.setattr(threads._state, "cpus", list(range(cpus)))
    assert threads.fitted_threads(requested) == fitted


def threads_inside(model, grad: bool = False, **kwargs) -> int:
    """torch's thread count seen inside the model's encoder layers during one forward."""
    seen = []
    layer = model.base_model.encoder.layer[0]
    handle = layer.register_forward_pre_hook(lambda *_: seen.append(torch.get_num_threads()))
    ids = torch.randint(4, 64, (2, 16))
    try:
        with torch.set_grad_enabled(grad):
            model(ids, **kwargs)
    finally:
        handle.remove()
    return seen[0]


def test_recorded_lists_the_threads_each_model_call_ran_with(machine):
    """What a timing records beside its times: the fitted Linformer's threads, torch's for full attention (and for
    a training forward), one entry per outermost call."""
    linformer = LinformerForMaskedLM(tiny_config()).eval()
    full = LinformerForMaskedLM(tiny_config(attention="full")).eval()
    advance(machine, 1.0, {0: 200, 1: 200, 2: 100}, own_cpu_s=1.0)  # another process kept one core busy
    with threads.recorded() as calls:
        threads_inside(linformer)
        threads_inside(full)
        threads_inside(linformer, grad=True)
    assert calls == [1, 2, 2]
    threads_inside(linformer)
    assert calls == [1, 2, 2]  # nothing after the block


@pytest.mark.parametrize("model_class", [LinformerModel, LinformerForMaskedLM])
def test_an_inference_forward_beside_a_busy_process_runs_on_the_free_core_and_restores_torchs_setting(
        model_class, machine):
    model = model_class(tiny_config(local_window=4, global_positions=[0, -1])).eval()
    advance(machine, 1.0, {0: 200, 1: 200, 2: 100}, own_cpu_s=1.0)  # another process kept one core busy
    assert threads_inside(model) == 1  # the task model decides once; its encoder's own call keeps the choice
    assert torch.get_num_threads() == 2
    assert threads_inside(model, grad=True) == 2  # training forwards keep torch's setting (bitwise reproducible)
    threads.set_policy("fixed")
    assert threads_inside(model) == 2
    threads.set_policy("adaptive")
    advance(machine, 1.0, {0: 300, 1: 300, 2: 100}, own_cpu_s=2.0)  # the other process has stopped
    assert threads_inside(model) == 2


def test_full_attention_keeps_torchs_setting(machine):
    """Its fused kernel's long parallel regions gain from a contended second thread: only the Linformer is fitted."""
    advance(machine, 1.0, {0: 200, 1: 200, 2: 100}, own_cpu_s=1.0)
    assert threads_inside(LinformerModel(tiny_config(attention="full")).eval()) == 2
    assert threads_inside(LinformerModel(tiny_config()).eval()) == 1


def test_a_forward_that_fails_still_restores_torchs_setting(machine):
    model = LinformerModel(tiny_config()).eval()
    advance(machine, 1.0, {0: 200, 1: 200, 2: 100}, own_cpu_s=1.0)
    with pytest.raises(IndexError), torch.no_grad():
        model(torch.tensor([[1, 2, 999]]))  # a token id beyond the vocabulary
    assert torch.get_num_threads() == 2
    assert threads_inside(model) == 1  # and the next call decides afresh


def test_outputs_do_not_depend_on_the_thread_count():
    """What makes fitting the threads safe for recorded predictions: the CPU kernels split rows, not reductions."""
    torch.manual_seed(0)
    previous = torch.get_num_threads()
    for config in (tiny_config(attention="full"), tiny_config(local_window=4, global_positions=[0, -1])):
        model = LinformerModel(config).eval()
        ids, mask = torch.randint(4, 64, (3, 16)), torch.ones(3, 16, dtype=torch.long)
        mask[1, 9:] = 0
        outs = []
        for n_threads in (1, 2):
            torch.set_num_threads(n_threads)
            with torch.inference_mode():
                outs.append(model(ids, attention_mask=mask).last_hidden_state)
        torch.set_num_threads(previous)
        torch.testing.assert_close(outs[0], outs[1], rtol=1e-6, atol=1e-6)


def test_without_proc_stat_torchs_setting_stands(tmp_path, monkeypatch):
    monkeypatch.setattr(threads, "PROC_STAT", str(tmp_path / "missing"))
    monkeypatch.setattr(threads, "_state", threads._State())
    threads.set_policy("adaptive")
    previous = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        assert threads_inside(LinformerModel(tiny_config()).eval()) == 2
    finally:
        torch.set_num_threads(previous)


def test_a_policy_that_is_not_one_is_an_error_naming_where_it_came_from(monkeypatch):
    monkeypatch.setattr(threads, "_state", threads._State())
    monkeypatch.setenv(threads.ENV, "sometimes")
    with pytest.raises(ConfigError, match=r"^LINFORMER_CPU_THREADS='sometimes' is not one of adaptive, fixed\.$"):
        LinformerModel(tiny_config()).eval()(torch.tensor([[1, 2, 3]]))
    with pytest.raises(ConfigError, match=r"^cpu_threads='x' is not one of adaptive, fixed\.$"):
        threads.set_policy("x", key="cpu_threads")
    monkeypatch.setenv(threads.ENV, "FIXED")
    assert threads.get_policy() == "fixed"


def test_a_compiled_module_keeps_torchs_setting(machine):
    model = LinformerModel(tiny_config()).eval()
    model._compiled_call_impl = model._call_impl  # what model.compile() sets, without the minutes of a compile
    advance(machine, 1.0, {0: 200, 1: 200, 2: 100}, own_cpu_s=1.0)
    assert threads_inside(model) == 2


def test_torch_compile_traces_an_inference_forward_whole(machine):
    """torch.compile(model) traces the model's __call__: the thread fitting must neither break the graph nor set
    threads inside it."""
    model = LinformerModel(tiny_config(local_window=4, global_positions=[0, -1])).eval()
    advance(machine, 1.0, {0: 200, 1: 200, 2: 100}, own_cpu_s=1.0)
    ids = torch.randint(4, 64, (2, 16))
    compiled = torch.compile(model, backend="eager", fullgraph=True)
    with torch.inference_mode():
        torch.testing.assert_close(compiled(ids).last_hidden_state, model(ids).last_hidden_state)
    assert torch.get_num_threads() == 2


def test_proc_stat_is_read_at_most_once_a_window(machine, monkeypatch):
    """Every eligible forward asks; only one a window pays for reading /proc/stat."""
    reads = []
    real = threads._busy_seconds
    monkeypatch.setattr(threads, "_busy_seconds", lambda *a: reads.append(1) or real(*a))
    advance(machine, 1.0, {0: 200, 1: 200, 2: 100}, own_cpu_s=1.0)
    model = LinformerModel(tiny_config()).eval()
    for _ in range(5):
        assert threads_inside(model) == 1
    assert len(reads) == 1


def test_shared_pieces_run_once_each_with_the_callers_modes_and_raise_a_pieces_error(monkeypatch):
    import threading

    monkeypatch.setattr(threads._state.local, "workers", 2, raising=False)  # as inside a loaded forward
    done = []
    with torch.inference_mode():
        threads.share(10, lambda i: done.append((i, torch.is_inference_mode_enabled(), torch.is_grad_enabled(),
                                                 threading.current_thread().name)))
    assert sorted(i for i, *_ in done) == list(range(10))
    assert all(inference and not grad and name.startswith("linformer-share") for _, inference, grad, name in done)

    def piece(i):
        if i == 3:
            raise ValueError(f"piece {i}")

    with pytest.raises(ValueError, match="piece 3"):
        threads.share(5, piece)
    monkeypatch.setattr(threads._state.local, "workers", 0)
    order = []
    threads.share(4, order.append)  # outside a loaded forward: in order, here
    assert order == [0, 1, 2, 3]


def test_a_loaded_forward_shares_its_linear_rows_and_attention_chunks_with_the_same_outputs(machine, monkeypatch):
    """Beside a busy process the forward's linear layers and blocked-attention chunks go to the workers (pieces of
    rows: bitwise the unshared outputs); idle, with gradients, under the fixed policy or autocast, nothing is shared."""
    import threading

    import linformer.modeling.local_global as lg

    monkeypatch.setattr(threads, "PIECE_ROWS", 16)  # the tiny model's 128 rows: 8 pieces
    monkeypatch.setattr(lg, "CHUNK_ELEMENTS", 1024)  # several chunks of blocks per layer
    torch.manual_seed(0)
    model = LinformerModel(tiny_config(max_seq_len=64, local_window=8, global_positions=[0, -1])).eval()
    ids = torch.randint(4, 64, (2, 64))
    mask = torch.ones_like(ids)
    mask[1, 40:] = 0
    calls = []  # (pieces, the threads that ran them), per share call
    unshared = threads.share

    def spy(count, piece, in_order=False):
        names = set()

        def recorded(i):
            names.add(threading.current_thread().name)
            piece(i)

        unshared(count, recorded, in_order)
        calls.append((count, names))

    monkeypatch.setattr(threads, "share", spy)  # the linear layers' pieces
    monkeypatch.setattr(lg, "share", spy)  # the attention's chunks

    def forward(grad=False):
        calls.clear()
        with torch.set_grad_enabled(grad):
            return model(ids, attention_mask=mask).last_hidden_state

    def shared() -> bool:
        assert calls
        return all(name.startswith("linformer-share") for _, names in calls for name in names)

    alone = forward()
    assert not shared()
    advance(machine, 1.0, {0: 200, 1: 200, 2: 100}, own_cpu_s=1.0)  # another process kept one core busy
    assert torch.equal(forward(), alone) and shared()
    linear_pieces = [count for count, _ in calls if count == 128 // 16]
    assert len(linear_pieces) == 2 * 6  # Q, K, V, the attention's output and the feed-forward's two, per layer
    assert len(calls) > len(linear_pieces)  # and the attention's chunks
    assert torch.equal(forward(grad=True), alone) and not shared()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        forward()
    assert not shared()
    threads.set_policy("fixed")
    forward()
    assert not shared()


def test_nothing_is_shared_when_more_than_one_thread_is_fitted(machine, monkeypatch):
    """On a larger machine with cores to spare, each worker's operations would run on every fitted thread."""
    import linformer.modeling.local_global as lg

    monkeypatch.setattr(lg, "CHUNK_ELEMENTS", 1024)
    workers = []
    unshared = threads.share
    spy = lambda count, piece, in_order=False: (
        workers.append(getattr(threads._state.local, "workers", 0)), unshared(count, piece, in_order))
    monkeypatch.setattr(threads, "share", spy)
    monkeypatch.setattr(lg, "share", spy)
    monkeypatch.setattr(threads, "fitted_threads", lambda requested: 2)
    torch.set_num_threads(4)
    model = LinformerModel(tiny_config(max_seq_len=64, local_window=8, global_positions=[0, -1])).eval()
    assert threads_inside(model) == 2
    assert workers and set(workers) == {0}


def _capturing_under(capture) -> list[bool]:
    """``threads.capturing()`` as seen by a function's body while `capture` records or transforms it."""
    seen = []

    def body(x):
        seen.append(threads.capturing())
        return x * 2

    class Body(torch.nn.Module):
        def forward(self, x):
            return body(x)

    capture(Body(), body, torch.ones(2, 3))
    return seen


@pytest.mark.parametrize("capture", [
    lambda module, f, x: torch.jit.trace(module, (x,), check_trace=False),
    lambda module, f, x: torch.export.export(module, (x,), strict=False),
    lambda module, f, x: torch.compile(f, backend="eager", fullgraph=True)(x),
    lambda module, f, x: torch.fx.experimental.proxy_tensor.make_fx(f)(x),
    lambda module, f, x: torch.fx.symbolic_trace(module),
    lambda module, f, x: torch.vmap(f)(x),
    lambda module, f, x: torch.func.grad(lambda y: f(y).sum())(x),
], ids=["jit.trace", "export", "compile", "make_fx", "fx.symbolic_trace", "vmap", "func.grad"])
def test_capturing_is_true_under_every_graph_capture_and_transform(capture):
    assert not threads.capturing()
    seen = _capturing_under(capture)
    assert seen and all(seen)
    assert not threads.capturing()


def test_the_policy_s_own_row_sharing_is_not_a_capture(machine, monkeypatch):
    """Inside a loaded forward the policy's own mode (_SharedRows) is on the thread: it is not a capture, so the
    forward keeps its eager shortcuts (an unpadded batch's mask dropped, short rows exact); any other mode is."""
    from torch.overrides import TorchFunctionMode

    with threads._SharedRows():
        assert not threads.capturing()
        with TorchFunctionMode():
            assert threads.capturing()
    seen = []
    try:  # torch's default-device mode only places what a factory makes: a process that sets it is not captured
        torch.set_default_device("cpu")
        assert not threads.capturing()
        with torch.device("cpu"), threads._SharedRows():
            assert not threads.capturing()
    finally:
        torch.set_default_device(None)
    monkeypatch.setattr(threads, "PIECE_ROWS", 16)
    advance(machine, 1.0, {0: 200, 1: 200, 2: 100}, own_cpu_s=1.0)  # another process kept one core busy: shared
    model = LinformerModel(tiny_config(max_seq_len=64)).eval()
    monkeypatch.setattr(model.encoder, "forward", lambda hidden, mask, *a: seen.append(
        (torch._C._len_torch_function_stack(), mask)) or (hidden, None, None))
    with torch.no_grad():
        model(torch.randint(4, 64, (2, 64)), attention_mask=torch.ones(2, 64, dtype=torch.long))
    assert seen == [(1, None)]  # run under the policy's mode, and the all-ones mask dropped as eagerly


@pytest.mark.parametrize("grad", [False, True])
def test_a_jit_trace_on_a_loaded_machine_records_the_eager_forward(machine, monkeypatch, grad):
    """The adaptive policy shares a loaded forward's linear rows with worker threads, which a trace does not see
    (it would record torch.empty and nothing else): under any capture the forward runs as it would on an idle
    machine, so the traced graph (with torch's own check between two traces, with gradients) equals eager."""
    monkeypatch.setattr(threads, "PIECE_ROWS", 16)  # the tiny model's rows: several pieces
    advance(machine, 1.0, {0: 200, 1: 200, 2: 100}, own_cpu_s=1.0)  # another process kept one core busy
    torch.manual_seed(0)
    model = LinformerModel(tiny_config(max_seq_len=64)).eval()
    ids = torch.randint(4, 64, (2, 64))
    mask = torch.ones_like(ids)
    with torch.set_grad_enabled(grad):
        traced = torch.jit.trace(model, (ids, mask), strict=False, check_trace=grad)
    with torch.no_grad():
        eager = model(ids, attention_mask=mask).last_hidden_state
        torch.testing.assert_close(traced(ids, mask)["last_hidden_state"], eager, rtol=0, atol=0)
    assert torch.get_num_threads() == 2


def test_a_trace_of_an_unpadded_batch_keeps_the_padding_mask(machine):
    """A captured forward takes the general path where an eager one branches on the batch (no padding, no row
    within k tokens): a graph traced on an unpadded batch still masks a padded one, and still attends a short
    row exactly."""
    torch.manual_seed(0)
    model = LinformerModel(tiny_config(max_seq_len=32, exact_short_inputs=True)).eval()
    with torch.no_grad():
        traced = torch.jit.trace(model, (torch.randint(4, 64, (3, 24)), torch.ones(3, 24, dtype=torch.long)),
                                 check_trace=False, strict=False)
        ids, mask = torch.randint(4, 64, (3, 24)), torch.ones(3, 24, dtype=torch.long)
        mask[1, 3:] = 0  # within k = 4 tokens: attended exactly
        mask[2, 12:] = 0
        torch.testing.assert_close(traced(ids, mask)["last_hidden_state"],
                                   model(ids, attention_mask=mask).last_hidden_state)


@pytest.mark.parametrize("torch_version", ["2.7", "2.4"])
def test_the_saved_code_imports_and_gives_the_same_outputs_on_a_torch_without_its_newer_names(
        tmp_path, monkeypatch, torch_version):
    """torch 2.4-2.7 have no has_static_value (torch 2.8), 2.4-2.6 no torch.compiler.is_exporting (2.7): threads.py
    imported the one at module level and every attention forward called the other, so the package, and the code a
    saved model carries (threads.py among it), failed there. Both names deleted, as on that torch: the saved code
    imports, gives the package's outputs, and refuses at export a length it cannot tell is fixed."""
    import importlib
    import sys

    import torch.fx.experimental.symbolic_shapes as symbolic_shapes

    model = LinformerForMaskedLM(tiny_config(max_seq_len=32, projected_dim=8, local_window=8,
                                             global_positions=[0, -1])).eval()
    model.save_pretrained(tmp_path / "saved")
    package = tmp_path / "old_torch_code"  # the saved code as a package of its own, as trust_remote_code imports it
    package.mkdir()
    (package / "__init__.py").write_text("")
    for source in (tmp_path / "saved").glob("*.py"):
        (package / source.name).write_text(source.read_text())
    ids = torch.randint(4, 64, (2, 32))
    short = ids[:, :6]  # no longer than k: attended exactly, by the path an export does not take
    with torch.no_grad():
        expected = model(ids).logits, model(short).logits

    monkeypatch.delattr(symbolic_shapes, "has_static_value")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        with monkeypatch.context() as old_torch:  # only while the code is imported: torch 2.13 calls it itself
            if torch_version == "2.4":
                old_torch.delattr(torch.compiler, "is_exporting")
            code = importlib.import_module("old_torch_code.task_models")
            old_threads = importlib.import_module("old_torch_code.threads")
        if torch_version == "2.4":
            assert old_threads.is_exporting is torch.compiler.is_compiling
        loaded = code.LinformerForMaskedLM.from_pretrained(tmp_path / "saved").eval()
        with torch.no_grad():
            assert torch.equal(loaded(ids).logits, expected[0])
            assert torch.equal(loaded(short).logits, expected[1])
        monkeypatch.setattr(old_threads, "is_exporting", lambda: True)
        old_threads.static_length_only(32, "this", "that")  # an int is a fixed length
        with pytest.raises(Exception, match="exports at a fixed length only") as raised:
            old_threads.static_length_only(object(), "this", "that")
        assert type(raised.value).__name__ == "ConfigError"
    finally:
        for name in [n for n in sys.modules if n == "old_torch_code" or n.startswith("old_torch_code.")]:
            del sys.modules[name]
