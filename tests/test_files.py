"""The output rule (atomic.atomic_dir, check_output_dir, output_files): what an output path may replace, and what is
left behind. The rule as a user meets it through each script is tested beside that script (tests/modeling/
test_convert.py, tests/data/test_corpus.py)."""

import contextlib
import hashlib
import json
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from linformer.errors import DataError, OutputPathError, PartialOutput, Preempted
from linformer.files.atomic import atomic_dir, output_files
from linformer.files.mappings import read_json
from linformer.files.outputs import FILE_RECORDS, MANIFEST, check_output_files, made_by

A = made_by("convert", {"model": {"projected_dim": 8, "sharing": "kv"}})


def _build(path, record=A, overwrite=False, text="new"):
    with atomic_dir(path, record, overwrite) as tmp:
        (tmp / "weights.bin").write_text(text)


def _hidden(folder):
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


def test_an_earlier_output_with_the_same_settings_is_rebuilt_and_its_record_kept(tmp_path):
    _build(tmp_path / "out", text="old")
    _build(tmp_path / "out")
    assert (tmp_path / "out" / "weights.bin").read_text() == "new"
    assert read_json(tmp_path / "out" / MANIFEST) == {**A, "entries": ["weights.bin"]}
    assert _hidden(tmp_path) == []


def test_a_rebuild_refuses_what_another_command_or_the_user_put_beside_its_output(tmp_path):
    """A rebuild with the same settings replaced the whole folder, taking with it a report another command wrote
    into it (fidelity --out into a converted model's folder) or a user's notes; the output rule promises no
    command deletes a file it did not write."""
    _build(tmp_path / "out", text="old")
    (tmp_path / "out" / "notes.txt").write_text("the user's")
    for overwrite in (False, True):  # the flag replaced the folder whole, the user's notes with it
        with pytest.raises(OutputPathError, match=r"out holds notes.txt beside convert's own output, which it did not "
                                                  r"write: move it elsewhere, or choose another output path "
                                                  r"\(overwrite=true replaces only what its manifest.json names"):
            _build(tmp_path / "out", overwrite=overwrite)
    assert (tmp_path / "out" / "notes.txt").read_text() == "the user's"
    assert (tmp_path / "out" / "weights.bin").read_text() == "old" and _hidden(tmp_path) == []
    (tmp_path / "out" / ".tmp-weights.bin-0a1b2c3d-12345").write_text("an interrupted write's")
    (tmp_path / "out" / "notes.txt").unlink()
    _build(tmp_path / "out")  # its own entries, and a temporary of its own interrupted write, are its to replace
    assert (tmp_path / "out" / "weights.bin").read_text() == "new"
    _build(tmp_path / "out", made_by("transfer", {}), overwrite=True)  # another command's output: replaced whole
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [MANIFEST, "weights.bin"]
    for name in ("notes.txt", "plots", "a.md", "b.md", "c.md"):
        (tmp_path / "out" / name).mkdir() if name == "plots" else (tmp_path / "out" / name).write_text("the user's")
    with pytest.raises(OutputPathError, match=r"out holds 5 files and folders beside transfer's own output, which it "
                                              r"did not write \(a.md, b.md, c.md, notes.txt and 1 more\): move them"):
        _build(tmp_path / "out", overwrite=True)
    assert len(list((tmp_path / "out").iterdir())) == 7 and _hidden(tmp_path) == []


@pytest.mark.parametrize("record, why", [
    (made_by("convert", {"model": {"projected_dim": 16, "sharing": "kv"}}),
     r"holds an earlier convert output with other settings \(model.projected_dim: 8 -> 16\)"),
    (made_by("train_tokenizer", {"vocab_size": 300}), "holds the output of convert"),
], ids=["other-settings", "other-command"])
def test_an_output_with_other_settings_or_of_another_command_is_refused_unless_overwrite(tmp_path, record, why):
    _build(tmp_path / "out", text="old")
    with pytest.raises(OutputPathError, match=why + ": choose another output path, or pass overwrite=true"):
        _build(tmp_path / "out", record)
    assert (tmp_path / "out" / "weights.bin").read_text() == "old" and _hidden(tmp_path) == []
    _build(tmp_path / "out", record, overwrite=True)
    assert read_json(tmp_path / "out" / MANIFEST)["command"] == record["command"]


def test_overwrite_replaces_only_an_output_of_this_package_or_an_empty_folder(tmp_path, monkeypatch):
    """overwrite=true deleted whatever folder it was given: out_dir=. (the repository), ~, /, a folder of runs. Now
    each of those, a git checkout and any folder without this package's manifest is refused with the flag too, in a
    line that does not offer the flag; an earlier output of another command, and an empty folder, are replaced."""
    from linformer.files.locations import repo_root
    from linformer.files.outputs import check_output_dir

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "home" / "thesis").mkdir(parents=True)
    (tmp_path / "checkout" / ".git").mkdir(parents=True)
    (tmp_path / "runs" / "some-run").mkdir(parents=True)
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / MANIFEST).write_text('{"name": "a web app", "icons": []}')
    (tmp_path / "cwd" / "deep").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "cwd" / "deep")
    refused = {Path("/"): "is the root of a file system", tmp_path / "home": "is your home folder",
               repo_root(): "is, or holds, the current directory|is, or holds, this repository",
               repo_root().parent: "is, or holds, this repository", tmp_path / "cwd": "holds, the current directory",
               tmp_path / "checkout": r"is a git checkout \(it holds .git\)",
               tmp_path / "runs": r"is a directory with other content \(some-run\), no output of this package's",
               tmp_path / "app": "is a directory with other content"}
    for path, why in refused.items():
        for overwrite in (True, False):
            with pytest.raises(OutputPathError, match=why) as err:
                check_output_dir(path, A, overwrite=overwrite, key="out_dir=")
            assert "pass overwrite" not in str(err.value) and "choose another out_dir=" in str(err.value)
    with pytest.raises(OutputPathError):
        _build(tmp_path / "checkout", overwrite=True)
    assert (tmp_path / "checkout" / ".git").is_dir() and (tmp_path / "home" / "thesis").is_dir()

    _build(tmp_path / "out", made_by("train_tokenizer", {}), text="old")
    _build(tmp_path / "out", overwrite=True)  # another command's output: the flag replaces it
    (tmp_path / "empty").mkdir()
    _build(tmp_path / "empty")
    assert (tmp_path / "out" / "weights.bin").read_text() == "new" == (tmp_path / "empty" / "weights.bin").read_text()


def test_overwrite_replaces_a_regular_file_and_leaves_no_copy_aside(tmp_path):
    (tmp_path / "out").write_text("the user's file")
    with pytest.raises(OutputPathError, match="is a regular file"):
        _build(tmp_path / "out")
    assert (tmp_path / "out").read_text() == "the user's file"
    _build(tmp_path / "out", overwrite=True)
    assert (tmp_path / "out" / "weights.bin").read_text() == "new" and _hidden(tmp_path) == []


def test_a_directory_appearing_during_the_build_is_not_replaced(tmp_path):
    refused = pytest.raises(OutputPathError, match=r"is a directory with other content \(notes.txt\)")
    with refused, atomic_dir(tmp_path / "out", A) as tmp:
        (tmp / "weights.bin").write_text("new")
        (tmp_path / "out").mkdir()
        (tmp_path / "out" / "notes.txt").write_text("mine")
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["notes.txt"] and _hidden(tmp_path) == []


def test_temporaries_of_dead_processes_are_removed_and_a_live_ones_and_another_place_s_kept(tmp_path):
    """Another container of the host (its own PID namespace) or another host cannot be checked: a build there
    whose pid is not alive here was deleted under it."""
    from linformer.files.processes import process_place

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid, live_pid, here = int(dead.stdout), os.getppid(), process_place()
    kept = [f".tmp-out-{live_pid}", f".tmp-out-{here}-{live_pid}", f".tmp-out-0badc0de-{dead_pid}"]
    for name in (f".tmp-out-{dead_pid}", f".old-out-{dead_pid}", f".tmp-out-{here}-{dead_pid}", *kept):
        (tmp_path / name).mkdir()
    _build(tmp_path / "out")
    assert _hidden(tmp_path) == sorted(kept)


def test_a_file_s_temporary_left_by_a_killed_process_is_removed_by_the_next_write(tmp_path):
    """A SIGKILL while run.json was written left its temporary in the run directory for good; atomic_write's
    temporaries are named and swept as atomic_dir's are."""
    from linformer.files.atomic import atomic_write
    from linformer.files.processes import process_place

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    here = process_place()
    left, live = tmp_path / f".tmp-run.json-{here}-{int(dead.stdout)}", tmp_path / f".tmp-run.json-{here}-{os.getppid()}"
    left.write_text('{"status": "runn')
    live.write_text("{")
    atomic_write(tmp_path / "run.json", "{}")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([live.name, "run.json"])


def test_temporaries_named_as_earlier_versions_named_them_are_swept_too(tmp_path):
    """An earlier version's atomic_write named its temporary .<name>.tmp-<pid>: one a killed run left beside run.json
    stayed in the run directory for good, the next runs sweeping only this version's names. Every name temporary_of
    knows is swept; another file's temporaries and a live process's are kept."""
    from linformer.files.atomic import atomic_write
    from linformer.files.temporaries import temporary_of

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid, live_pid = int(dead.stdout), os.getppid()
    gone = [f".run.json.tmp-{dead_pid}", f".tmp-run.json-{dead_pid}", f".old-run.json-{dead_pid}"]
    kept = [f".run.json.tmp-{live_pid}", f".config.yaml.tmp-{dead_pid}", f".tmp-run.json.bak-{dead_pid}"]
    for name in (*gone, *kept):
        (tmp_path / name).write_text("{")
    assert {temporary_of(name) for name in gone} == {"run.json"}
    atomic_write(tmp_path / "run.json", "{}")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([*kept, "run.json"])


@pytest.mark.skipif(signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL, reason="a SIGTERM handler is installed")
def test_sigterm_during_the_build_removes_the_temporary(tmp_path):
    _build(tmp_path / "out", text="old")
    with pytest.raises(Preempted, match="while writing"), atomic_dir(tmp_path / "out", A) as tmp:
        (tmp / "weights.bin").write_text("half")
        os.kill(os.getpid(), signal.SIGTERM)
    assert (tmp_path / "out" / "weights.bin").read_text() == "old" and _hidden(tmp_path) == []
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def test_a_second_signal_while_a_stop_unwinds_ends_the_process_at_once(tmp_path):
    """A command's unwinding that cannot finish (a pool whose workers a stop killed holding its lock) ends on the next
    signal, with the stop's exit status; the temporary it leaves is removed by the next run."""
    from .conftest import as_a_script

    script = f"""
import os, signal, time
from linformer import cli
from linformer.cli import cli_errors
from linformer.files.atomic import atomic_dir
from linformer.files.outputs import made_by
cli.models_registered = lambda: None  # a command that loads no model: torch's import (seconds) left out
with cli_errors(), atomic_dir({str(tmp_path / "out")!r}, made_by("convert", {{}})):
    try:
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(30)
    finally:  # an unwinding that hangs
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(30)
"""
    result = subprocess.run(as_a_script(script, tmp_path / "command"), capture_output=True, text=True, timeout=60)
    assert result.returncode == 128 + signal.SIGTERM, result.stderr[-2000:]
    assert result.stderr.strip().splitlines()[-1] == ("stopped: SIGTERM again while stopping: exiting now; the next "
                                                      "run removes what this one left.")
    assert len(_hidden(tmp_path)) == 1 and not (tmp_path / "out").exists()  # the temporary, left
    _build(tmp_path / "out")  # the next run
    assert _hidden(tmp_path) == []


def test_a_second_signal_while_a_stop_unwinds_outside_a_command_is_a_keyboard_interrupt(tmp_path, monkeypatch):
    """The package called from a notebook: two interrupts close together (a stop, then one while it unwinds) ended
    the kernel with os._exit, losing all it held. Outside a command the second is a KeyboardInterrupt; the
    temporary goes as on any error."""
    monkeypatch.setattr(os, "_exit", lambda code: pytest.fail(f"the caller's process was ended ({code})"))
    with pytest.raises(KeyboardInterrupt, match="again while stopping"), atomic_dir(tmp_path / "out", A):
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)
        finally:  # an unwinding that hangs
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)
    assert _hidden(tmp_path) == [] and not (tmp_path / "out").exists()
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def test_files_get_the_umask_permissions_whatever_mode_they_were_written_with(tmp_path):
    mask = os.umask(0o002)
    try:
        with atomic_dir(tmp_path / "out", A) as tmp:
            fd = os.open(tmp / "model.safetensors", os.O_CREAT | os.O_WRONLY, 0o600)  # as transformers writes it
            os.close(fd)
            (tmp / "sub").mkdir(mode=0o700)
    finally:
        os.umask(mask)
    modes = {p.name: p.stat().st_mode & 0o777 for p in [tmp_path / "out", *(tmp_path / "out").iterdir()]}
    assert modes == {"out": 0o775, "model.safetensors": 0o664, "sub": 0o775, MANIFEST: 0o664}


def test_output_files_rewrite_only_their_own_command_s_files(tmp_path):
    report = made_by("table2", {"layout": "paper"})
    paths = [tmp_path / "t.md", tmp_path / "t.json"]
    with output_files(paths, report):
        for p in paths:
            p.write_text("1")
    with output_files(paths, report):  # the same command again: rewritten
        paths[0].write_text("2")
    assert read_json(tmp_path / FILE_RECORDS)["t.md"] == report
    (tmp_path / "notes.md").write_text("mine")
    with pytest.raises(OutputPathError, match=r"notes.md is a file table2 did not write: .* --overwrite"):
        check_output_files([tmp_path / "notes.md"], report)
    with pytest.raises(OutputPathError, match=r"t.md is an earlier table2 output with other settings \(layout: "
                                              r"'paper' -> 'pretrained'\)"):
        check_output_files(paths, made_by("table2", {"layout": "pretrained"}))
    (tmp_path / "d").mkdir()
    with pytest.raises(OutputPathError, match="d is a directory"):  # never replaced by a file, overwrite or not
        check_output_files([tmp_path / "d"], report, overwrite=True)


def test_two_commands_recording_into_one_folder_at_once_lose_no_entry(tmp_path, monkeypatch):
    """Two commands recording their files into one folder (the shared reports folder) each read the folder's
    FILE_RECORDS, merged their own entries and wrote it back: one wrote over the other's entries, whose command was
    then refused as "a file ... did not write" when run again. Forced interleaving: the first recorder, having read
    the record, waits for the second to read it too (which it cannot while the first holds the lock: it gives up
    waiting after 0.5 s). Two threads hold separate descriptors, so the flock keeps them apart as it does two
    processes. Nothing but the record is left in the folder."""
    import threading

    from linformer.files import atomic as files

    read_records, first_read, second_read = files._file_records, threading.Event(), threading.Event()

    def racing_read(folder):
        records = read_records(folder)
        if threading.current_thread().name == "first":
            first_read.set()
            second_read.wait(0.5)
        else:
            second_read.set()
        return records

    monkeypatch.setattr(files, "_file_records", racing_read)
    a, b = made_by("table2", {"layout": "paper"}), made_by("benchmark", {"name": "t3"})

    def record(name, report):
        files.record_output_files([tmp_path / f"{name}.md"], report)

    first = threading.Thread(target=record, args=("a", a), name="first")
    first.start()
    assert first_read.wait(10)
    second = threading.Thread(target=record, args=("b", b), name="second")
    second.start()
    first.join(10), second.join(10)
    assert read_json(tmp_path / FILE_RECORDS) == {"a.md": a, "b.md": b}
    assert sorted(p.name for p in tmp_path.iterdir()) == [FILE_RECORDS]


def test_a_planted_record_never_deletes_or_checks_outside_its_folder(tmp_path):
    """A folder's FILE_RECORDS or a checksum listing may come from anyone (a shared folder, a tarball, a commit):
    a name in it that is no plain name of the folder (``../x``, an absolute path) is never deleted as a stale output
    (it is dropped from the record, with a warning), and a listing naming one is damage, not a file to hash. A link
    in the folder is removed, never what it points to."""
    import json

    from linformer.files.hashing import checksum_problems
    from linformer.files.outputs import output_damage

    report = made_by("compare_runs", {})
    out, victim, elsewhere = tmp_path / "reports", tmp_path / "victim.txt", tmp_path / "elsewhere.txt"
    out.mkdir()
    for f in (victim, elsewhere, out / "old.png"):
        f.write_text("precious")
    (out / "linked.png").symlink_to(elsewhere)
    planted = {name: report for name in ("../victim.txt", str(victim), "old.png", "linked.png", "", "..")}
    (out / FILE_RECORDS).write_text(json.dumps(planted))
    with output_files([out / "runs.md"], report, replaces_earlier=True):
        (out / "runs.md").write_text("table")
    assert victim.read_text() == "precious" and elsewhere.read_text() == "precious"
    assert sorted(p.name for p in out.iterdir()) == [FILE_RECORDS, "linked.png", "runs.md"]  # old.png was stale
    assert sorted(read_json(out / FILE_RECORDS)) == ["runs.md"]

    listing = {"../victim.txt": {"bytes": 8, "sha256": hashlib.sha256(b"precious").hexdigest()}}
    assert [p.split(":")[0] for p in checksum_problems(out, listing)] == ["'../victim.txt'"]
    assert len(checksum_problems(out, {str(victim): listing["../victim.txt"]})) == 1
    (out / MANIFEST).write_text(json.dumps({"command": "convert", "files": listing}))
    assert "not a file of this folder" in output_damage(out)[0]


def test_a_checksum_listing_follows_a_hub_snapshot_s_links_and_no_link_planted_out_of_its_folder(tmp_path,
                                                                                                  monkeypatch):
    """A hub snapshot's files are links into its cache's blobs/: checked as the loaders read them. Any other link out
    of the folder (a tarball's, a shared folder's) is damage, and what it points to is never read: its size and
    digest were said against the listing, for any file of the machine."""
    import json

    from linformer.files import hashing
    from linformer.files.hashing import checksum_problems
    from linformer.files.outputs import output_damage

    cache = tmp_path / "hub" / "models--org--m"
    snapshot, blobs = cache / "snapshots" / "0123abcd", cache / "blobs"
    (snapshot / "sub").mkdir(parents=True)
    blobs.mkdir()
    listing = {}
    for name, text in (("model.safetensors", b"weights"), ("sub/config.json", b"{}")):
        blob = blobs / hashlib.sha256(text).hexdigest()
        blob.write_bytes(text)
        (snapshot / name).symlink_to(os.path.relpath(blob, (snapshot / name).parent))
        listing[name] = {"bytes": len(text), "sha256": hashlib.sha256(text).hexdigest()}
    (snapshot / MANIFEST).write_text(json.dumps({"command": "convert", "files": listing}))
    assert output_damage(snapshot) == []

    out, secret = tmp_path / "out", tmp_path / "secret.txt"
    (out / "inner").mkdir(parents=True)
    secret.write_text("not the folder's")
    (out / "weights.bin").write_bytes(b"weights")
    (out / "planted.bin").symlink_to(secret)
    (out / "through").symlink_to(tmp_path)  # a folder link out: sub-paths through it too
    (out / "same.bin").symlink_to(out / "weights.bin")  # a link within the folder is the folder's
    want = {"bytes": 7, "sha256": hashlib.sha256(b"weights").hexdigest()}
    read = []
    monkeypatch.setattr(hashing._DIGESTS, "read", lambda path, chunk: read.append(Path(path).name) or want["sha256"])
    problems = checksum_problems(out, {"planted.bin": want, "through/secret.txt": want, "same.bin": want,
                                       "weights.bin": want})
    assert [p.split(":")[0] for p in problems] == ["planted.bin", "through/secret.txt"]
    assert f"outside this folder ({secret})" in problems[0] and "16 bytes" not in " ".join(problems)
    assert "secret.txt" not in read
    linked = tmp_path / "linked"  # the folder itself a link (moved to another disk): its files are its own
    linked.symlink_to(out)
    assert checksum_problems(linked, {"weights.bin": want, "same.bin": want}) == []


@pytest.mark.parametrize("err", [
    OSError(28, "No space left on device"),
    RuntimeError("[enforce fail at inline_container.cc:858] . PytorchStreamWriter failed writing file data/3: "
                 "file write failed"),
    RuntimeError("[enforce fail at inline_container.cc:664] . unexpected pos 1024 vs 896"),
    type("SafetensorError", (Exception,), {})(
        'Error while serializing: IoError(Os { code: 28, kind: StorageFull, message: "No space left on device" })'),
], ids=["ENOSPC", "torch write failed", "torch unexpected pos", "safetensors"])
def test_a_full_disk_is_recognised_whoever_writes(tmp_path, err):
    """Each writer's own words for a full disk become one DiskFullError naming the directory."""
    from linformer.errors import DiskFullError
    from linformer.files.storage import disk_full_names

    with pytest.raises(DiskFullError, match=f"while writing {tmp_path}"), disk_full_names(tmp_path):
        raise err
    with pytest.raises(RuntimeError, match="size mismatch"), disk_full_names(tmp_path):  # anything else passes
        raise RuntimeError("size mismatch for E.weight")


def test_compact_json_is_one_line_and_reads_back_the_same(tmp_path):
    from linformer.files.atomic import write_json
    from linformer.files.mappings import read_json

    data = {"step": 3, "labels": [0, 1] * 50, "predictions": [1, 1] * 50}
    write_json(tmp_path / "a.json", data, indent=None)
    write_json(tmp_path / "b.json", data)
    compact, pretty = (tmp_path / "a.json").read_text(), (tmp_path / "b.json").read_text()
    assert compact.count("\n") == 1 and " " not in compact and len(compact) < len(pretty) / 2
    assert read_json(tmp_path / "a.json") == read_json(tmp_path / "b.json") == data


def test_swap_in_replaces_a_directory_whole_and_puts_the_earlier_back_on_failure(tmp_path, monkeypatch):
    import os

    from linformer.files.atomic import swap_in

    final, tmp = tmp_path / "out", tmp_path / ".tmp-out"
    final.mkdir()
    (final / "a").write_text("old")
    tmp.mkdir()
    (tmp / "b").write_text("new")
    swap_in(tmp, final)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"] and (final / "b").read_text() == "new"
    tmp.mkdir()
    (tmp / "c").write_text("newer")
    real = os.replace

    def fail_second(src, dst):
        if str(src) == str(tmp):
            raise OSError("disk gone")
        return real(src, dst)

    monkeypatch.setattr(os, "replace", fail_second)
    import pytest

    with pytest.raises(OSError, match="disk gone"):
        swap_in(tmp, final)
    assert (final / "b").read_text() == "new"  # the earlier output, back in place


def test_an_output_path_that_cannot_be_written_is_refused_before_the_work(tmp_path, monkeypatch):
    """A file on the way, or a folder that cannot be written (read-only, no permission: as root, only os.access
    tells), is an OutputPathError naming that folder, from the checks every command makes before its work."""
    from linformer.files.outputs import check_output_dir, check_output_files

    (tmp_path / "afile").write_text("x")
    with pytest.raises(OutputPathError, match=rf"^{tmp_path / 'afile'} is a file, not a folder"):
        check_output_dir(tmp_path / "afile" / "sub" / "run", A)
    locked = tmp_path / "locked"
    locked.mkdir()
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode: real(p, mode) and Path(p) != locked)
    for check in (lambda: check_output_dir(locked / "new" / "run", A),
                  lambda: check_output_files([locked / "table.md"], A)):
        with pytest.raises(OutputPathError, match=rf"^{locked} cannot be written \(a read-only file system"):
            check()
    check_output_files([tmp_path / "out" / "table.md"], A)  # a writable folder on the way: fine


def test_a_folder_written_into_is_checked_itself_not_its_parent(tmp_path, monkeypatch):
    """A run directory that exists is written into: a parent that cannot be written does not matter to it."""
    from linformer.files.outputs import check_writable

    run = tmp_path / "runs" / "r"
    run.mkdir(parents=True)
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode: real(p, mode) and Path(p) != run.parent)
    check_writable(run, inside=True)
    with pytest.raises(OutputPathError, match=rf"^{run.parent} cannot be written"):
        check_writable(run)  # made beside: its parent must be written


@contextlib.contextmanager
def _file_size_limit(size: int):
    """This process's soft file-size limit (ulimit -f) at `size` bytes while the block runs, then as it was. Python
    ignores SIGXFSZ, so a write past it fails with EFBIG instead of ending the process."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (size, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))


def test_a_file_size_limit_is_one_line_like_a_full_disk(tmp_path):
    """A file-size limit (ulimit -f, a FAT32 disk's 4 GiB) refused a write with EFBIG: a traceback where a full disk
    gave one line. The write runs under a 1 MiB limit."""
    from linformer.errors import DiskFullError
    from linformer.files.atomic import atomic_write
    from linformer.files.storage import disk_full_names

    with pytest.raises(DiskFullError) as err, _file_size_limit(2**20):
        atomic_write(tmp_path / "big.bin", b"x" * 2**21)
    assert "file-size limit (ulimit -f)" in str(err.value) and str(tmp_path) in str(err.value)
    assert not list(tmp_path.iterdir())  # nothing half-written left
    with pytest.raises(DiskFullError, match="disk quota exceeded"), disk_full_names(tmp_path):
        raise RuntimeError("Error while serializing: I/O error: Disk quota exceeded (os error 122)")


def test_a_refusal_names_a_block_of_settings_one_side_lacks_as_one_item_and_counts_the_rest():
    """A benchmark rerun with throughput.enabled=false was refused with some 40 'throughput.<key>: <value> -> None'
    items, about 3,000 characters; the block is one item now, and a long list ends with a count."""
    from linformer.files.outputs import settings_changes

    earlier = {f"throughput.{i}": i for i in range(40)} | {"name": "table3", "k": 1}
    assert settings_changes(earlier, {"name": "table3", "k": 2}) == "k: 1 -> 2; throughput: 40 settings -> none"
    assert settings_changes({"t.a": 1, "t.b": 2}, {"t.a": 1, "t.b": 3}) == "t.b: 2 -> 3"  # a block both sides have
    many = settings_changes({c: 1 for c in "abcdefgh"}, {c: 2 for c in "abcdefgh"})
    assert many.startswith("a: 1 -> 2; b: 1 -> 2") and many.endswith("f: 1 -> 2; and 2 more")


def test_a_refusal_writes_null_true_and_false_as_the_configs_do_not_as_python_does():
    """The output rule's refusal printed `(data.max_documents: None -> 40)` where every other message says null."""
    from linformer.files.outputs import settings_changes

    assert settings_changes({"data.max_documents": None, "data.skip_bad_rows": False, "name": "a"},
                            {"data.max_documents": 40, "data.skip_bad_rows": True, "name": "b"}) == \
        "data.max_documents: null -> 40; data.skip_bad_rows: false -> true; name: 'a' -> 'b'"


def test_a_record_names_a_path_under_the_repository_relative_to_it_and_reads_it_back(tmp_path):
    from linformer.files.locations import repo_relative, repo_root, resolve_path

    inside = repo_root() / "docs" / "results" / "figure3_gpu_runs" / "fig3-full"
    assert repo_relative(inside) == "docs/results/figure3_gpu_runs/fig3-full"
    assert resolve_path(repo_relative(inside)) == str(inside)
    # a path outside the checkout has no shorter name that every checkout shares
    assert repo_relative(tmp_path / "run") == str((tmp_path / "run").resolve())
    assert repo_relative(repo_root() / "outputs" / ".." / "docs") == "docs"


def test_torch_s_refusal_without_a_cause_is_not_called_a_full_disk_with_space_free(tmp_path):
    """torch's serializer says "file write failed" whatever refused the write: under a file-size limit (ulimit -f, a
    FAT32 disk's 4 GiB) the message said "no space left on device ... Free some space" with GBs free. The save runs
    under a 1 MiB limit."""
    import torch

    from linformer.errors import DiskFullError
    from linformer.files.storage import disk_full_names

    with pytest.raises(DiskFullError) as err, _file_size_limit(2**20), disk_full_names(tmp_path):
        torch.save(torch.zeros(2**20), tmp_path / "optimizer.bin")
    message = str(err.value)
    assert message.startswith("the storage refused a write with space free: a disk quota, or a file larger than "
                              "the file system (FAT32 takes 4 GiB at most) or the file-size limit (ulimit -f, 1 "
                              f"MiB here) allows while writing {tmp_path}"), message
    assert "no space left" not in message


def test_a_refusal_without_a_cause_is_a_full_disk_where_no_space_is_left(tmp_path, monkeypatch):
    """The same words with (almost) nothing free: the disk is full, and the message says so."""
    import shutil
    from collections import namedtuple

    from linformer.errors import DiskFullError
    from linformer.files.storage import disk_full_names

    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda _: usage(2**40, 2**40 - 2**20, 2**20))
    with pytest.raises(DiskFullError, match=rf"^no space left on device while writing {tmp_path} \(1 MiB free\)"), \
            disk_full_names(tmp_path):
        raise RuntimeError("PytorchStreamWriter failed writing file data/3: file write failed")


def test_an_output_directory_written_with_checksums_tells_a_file_changed_since(tmp_path):
    """atomic_dir(checksums=True) records every file's size and sha256 in the MANIFEST; output_damage reads them
    back: None without them, [] while intact, the file and why once one changed (a byte, the same size)."""
    from linformer.files.atomic import atomic_dir
    from linformer.files.outputs import output_damage

    with atomic_dir(tmp_path / "plain") as tmp:
        (tmp / "w.bin").write_bytes(b"abc")
    assert output_damage(tmp_path / "plain") is None
    with atomic_dir(tmp_path / "out", A, checksums=True) as tmp:
        (tmp / "sub").mkdir()
        (tmp / "sub" / "w.bin").write_bytes(b"abc")
    assert output_damage(tmp_path / "out") == []
    (tmp_path / "out" / "sub" / "w.bin").write_bytes(b"abd")
    assert output_damage(tmp_path / "out") == ["sub/w.bin: content differs from what was written (sha256)"]
    with atomic_dir(tmp_path / "own", A, checksums=True) as tmp:  # a block that lists its files itself keeps its list
        (tmp / "w.bin").write_bytes(b"abc")
        (tmp / "manifest.json").write_text('{"files": {}}')
    assert output_damage(tmp_path / "own") == []


def test_a_markdown_table_escapes_a_bar_in_a_cell_and_nothing_else():
    from linformer.files.tables import table_lines

    assert table_lines(["run", "acc"], [("a|b", 1.5), ("plain", ""), ("a\nb\tc", "ünï")]) == [
        "| run | acc |", "|---|---|", "| a\\|b | 1.5 |", "| plain |  |", "| a\\nb\\tc | ünï |"]


@pytest.mark.parametrize("name", ["a\nb", "a\rb", "tab\there", "esc\x1b[31m", "del\x7f"])
def test_a_folder_name_with_a_control_character_is_refused_in_one_line(name):
    """run_name="a<newline>b" made a run folder whose name broke compare_runs' table and every line naming it."""
    from linformer.errors import ConfigError
    from linformer.files.names import folder_name

    with pytest.raises(ConfigError, match=r"^run_name='.*' must name a run directory without control characters") \
            as err:
        folder_name(name, "run_name", "a run directory", "outputs/pretrain/")
    assert "\n" not in str(err.value)
    assert folder_name("ünïcode name|x", "run_name", "a run directory", "outputs/pretrain/") == "ünïcode name|x"



def test_read_once_reads_a_file_again_only_once_it_is_rewritten(tmp_path):
    """The one cache of what a file gives while it is unchanged (sha256_file's digests inside hashed_once, a table's
    model sizes): an untouched file is read once, one the atomic writer rewrote (a new inode, even of the same size)
    is read again; a path that is no file is the reader's each time; the least recently used state goes first."""
    from linformer.files import atomic, hashing

    reads = []
    cache = hashing.ReadOnce(lambda p: reads.append(str(p)) or Path(p).read_text(), keep=2)
    one, two = tmp_path / "one.txt", tmp_path / "two.txt"
    atomic.atomic_write(one, "a")
    atomic.atomic_write(two, "b")
    assert [cache(one), cache(str(one)), cache(two), cache(one)] == ["a", "a", "b", "a"] and len(reads) == 2
    state = hashing.file_state(one)
    atomic.atomic_write(one, "c")
    assert hashing.file_state(one) != state and cache(one) == "c" and reads == [str(one), str(two), str(one)]
    assert cache(one) == "c" and len(reads) == 3
    assert cache(two) == "b" and len(reads) == 4  # two's state was the least recently used of three: dropped
    assert hashing.file_state(tmp_path) is None and hashing.file_state(tmp_path / "none") is None
    with pytest.raises(FileNotFoundError):
        cache(tmp_path / "none")
    switched = hashing.ReadOnce(lambda p: reads.append(str(p)), switched=True)
    switched(one)
    with switched.switched_on():
        switched(one)
        switched(one)
    switched(one)
    assert reads[5:] == [str(one)] * 3  # after the missing path's read


def test_hashed_once_reads_a_file_once_until_it_is_rewritten(tmp_path, monkeypatch):
    """Inside ``hashed_once`` a file's digest is taken once while the file keeps its state; a file rewritten (by the
    atomic writer, or in place to another size) is read again, and outside it every call reads."""
    from linformer.files import atomic, hashing

    path = tmp_path / "text.txt"
    path.write_text("one")
    reads = []
    real = hashing._read_sha256
    monkeypatch.setattr(hashing._DIGESTS, "read", lambda p, chunk: reads.append(p) or real(p, chunk))
    with hashing.hashed_once():
        first = hashing.sha256_file(path)
        assert hashing.sha256_file(str(path)) == first and len(reads) == 1
        atomic.atomic_write(path, "two")
        assert hashing.sha256_file(path) != first and len(reads) == 2
        with path.open("a") as f:
            f.write("three")
        assert hashing.sha256_file(path) == hashlib.sha256(b"twothree").hexdigest() and len(reads) == 3
    hashing.sha256_file(path)
    hashing.sha256_file(path)
    assert len(reads) == 5


def test_an_output_that_is_a_symlink_is_written_where_it_points_and_the_link_kept(tmp_path):
    from linformer.files.atomic import atomic_write, swap_in

    (tmp_path / "disk").mkdir()
    (tmp_path / "disk" / "model").mkdir()
    link = tmp_path / "model"
    link.symlink_to(tmp_path / "disk" / "model")
    _build(link, text="old")
    _build(link)  # a rebuild replaces what the link points to, not the link
    assert link.is_symlink() and (tmp_path / "disk" / "model" / "weights.bin").read_text() == "new"
    assert _hidden(tmp_path) == [] and _hidden(tmp_path / "disk") == []

    (tmp_path / "disk" / "notes.md").write_text("old")
    (tmp_path / "notes.md").symlink_to(tmp_path / "disk" / "notes.md")
    atomic_write(tmp_path / "notes.md", "new")
    assert (tmp_path / "notes.md").is_symlink() and (tmp_path / "disk" / "notes.md").read_text() == "new"

    built = tmp_path / "disk" / ".built"
    built.mkdir()
    (built / "weights.bin").write_text("swapped")
    swap_in(built, link)
    assert link.is_symlink() and (tmp_path / "disk" / "model" / "weights.bin").read_text() == "swapped"


def test_output_files_that_fail_midway_leave_the_earlier_set_whole(tmp_path, monkeypatch):
    import errno

    from linformer.errors import DiskFullError
    from linformer.files.atomic import atomic_write

    report = made_by("compare_runs", {})
    paths = [tmp_path / "runs.md", tmp_path / "val_ppl.png", tmp_path / "val_loss.png"]
    with output_files(paths, report):
        for p in paths:
            atomic_write(p, "old")
    real, calls = os.fsync, []

    def full_at_the_second_file(fd):
        calls.append(fd)
        if len(calls) == 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        real(fd)

    monkeypatch.setattr(os, "fsync", full_at_the_second_file)
    with pytest.raises(DiskFullError, match="earlier files are intact"), \
            output_files(paths, report, replaces_earlier=True):
        for p in paths:
            atomic_write(p, "new")
    assert [p.read_text() for p in paths] == ["old"] * 3  # not a new table beside the old plots
    assert _hidden(tmp_path) == [FILE_RECORDS]

    monkeypatch.setattr(os, "fsync", real)
    with output_files(paths, report):  # a set written again in part: the earlier file it did not write stays
        atomic_write(paths[0], "new")
    assert [p.read_text() for p in paths] == ["new", "old", "old"] and _hidden(tmp_path) == [FILE_RECORDS]
    with output_files(paths, report, replaces_earlier=True):  # unless the set is the command's whole output
        atomic_write(paths[0], "newer")
    assert [p.name for p in paths if p.exists()] == ["runs.md"]


@pytest.mark.parametrize("cause", [DataError("the second run broke"), Preempted("stopped by SIGTERM", signal.SIGTERM)])
def test_a_partial_output_is_kept_and_recorded_and_its_cause_still_raised(tmp_path, cause):
    """A writer that wrote the rows measured before an error or a stop raises PartialOutput: its files are kept and
    recorded as the command's output (the same command again replaces them), and the error itself reaches the user."""
    from linformer.files.atomic import atomic_write
    from linformer.files.outputs import file_record

    report = made_by("cls_probe", {})
    paths = [tmp_path / "probe.md", tmp_path / "probe.csv"]
    with output_files(paths, report):
        for p in paths:
            atomic_write(p, "old")
    with pytest.raises(type(cause)) as raised, output_files(paths, report):
        atomic_write(paths[0], "partial")
        raise PartialOutput(cause)
    assert raised.value is cause
    assert [p.read_text() for p in paths] == ["partial", "old"] and file_record(paths[0]) == report
    assert _hidden(tmp_path) == [FILE_RECORDS]  # no earlier file kept aside is left


@pytest.mark.parametrize("cause", [lambda: DataError("the second run broke"),
                                   lambda: Preempted("stopped by SIGTERM", signal.SIGTERM)])
def test_a_partial_output_that_cannot_be_recorded_is_not_kept_and_its_cause_still_comes_first(tmp_path, monkeypatch,
                                                                                               cause):
    """A full disk while recording a partial output: the earlier files are put back, and the error or stop that cut
    it short is still what is raised, the full disk a note after it (the DiskFullError alone hid the cause)."""
    import errno

    from linformer.files import atomic, storage
    from linformer.files.atomic import atomic_write
    from linformer.files.storage import disk_full_names

    report = made_by("cls_probe", {})
    paths = [tmp_path / "probe.md", tmp_path / "probe.csv"]
    with output_files(paths, report):
        for p in paths:
            atomic_write(p, "old")

    def full(path, data, indent=2):
        with disk_full_names(path):
            raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(atomic, "write_json", full)
    cause = cause()
    with pytest.raises(type(cause)) as raised, output_files(paths, report):
        atomic_write(paths[0], "partial")
        raise PartialOutput(cause)
    assert raised.value is cause
    free = storage.free_bytes(tmp_path) / 2**20
    assert raised.value.__notes__ == [(f"also: the partial output was not kept (the earlier files are as they were), "
                                       f"since recording it failed: no space left on device while writing "
                                       f"{tmp_path / FILE_RECORDS} ({free:.0f} MiB free); earlier files are intact. "
                                       "Free some space and run the same command again.")]
    assert [p.read_text() for p in paths] == ["old", "old"] and _hidden(tmp_path) == [FILE_RECORDS]


@pytest.mark.parametrize("error", [DataError("broke"), Preempted("stopped by SIGTERM", signal.SIGTERM),
                                   KeyboardInterrupt()])
def test_any_other_exception_puts_the_earlier_output_back(tmp_path, error):
    from linformer.files.atomic import atomic_write

    paths = [tmp_path / "probe.md", tmp_path / "new.md"]
    with output_files(paths[:1], made_by("cls_probe", {})):
        atomic_write(paths[0], "old")
    with pytest.raises(type(error)), output_files(paths, made_by("cls_probe", {})):
        for p in paths:
            atomic_write(p, "partial")
        raise error
    assert paths[0].read_text() == "old" and not paths[1].exists() and _hidden(tmp_path) == [FILE_RECORDS]


def test_a_partial_output_after_a_real_signal_passes_the_stop_handler_and_is_kept(tmp_path):
    """signals_stop reports anything raised while unwinding from a signal as its Preempted: a PartialOutput, which
    carries that Preempted, goes through it to output_files, so the tables measured before the stop are kept."""
    from linformer.files.atomic import atomic_write
    from linformer.signals import signals_stop

    out = tmp_path / "t.md"
    with pytest.raises(Preempted, match="^stopped by SIGTERM$"), output_files([out], made_by("benchmark", {})), \
            signals_stop("stopped by {signal}"):
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)  # the handler raises here
        except Preempted as stop:
            atomic_write(out, "Partial: 1 of 3 cells")
            raise PartialOutput(stop) from None
    assert out.read_text() == "Partial: 1 of 3 cells"


def test_a_long_name_the_file_system_takes_is_written_and_a_longer_one_refused_naming_it(tmp_path):
    import errno

    from linformer.files.atomic import atomic_write
    from linformer.files.outputs import check_output_dir

    name = "y" * 250  # legal: the temporary beside it adds ~20 bytes, which must not push it past 255
    atomic_write(tmp_path / f"{name}.md"[:255], "text")
    _build(tmp_path / name)
    _build(tmp_path / name)  # a rebuild swaps the earlier one out under a temporary name too
    assert (tmp_path / name / "weights.bin").read_text() == "new" and _hidden(tmp_path) == []
    too_long = tmp_path / ("z" * 256)
    with pytest.raises(OSError) as err:
        atomic_write(too_long, "text")
    assert err.value.errno == errno.ENAMETOOLONG and err.value.filename == str(too_long)  # not a temporary's name
    with pytest.raises(OutputPathError, match=r"256 bytes, longer than the file system allows \(255\)"):
        check_output_dir(too_long, A)
    assert _hidden(tmp_path) == []


def test_a_path_python_decoded_with_surrogates_is_written_as_its_bytes(tmp_path):
    """Under an ASCII locale (LC_ALL=C PYTHONUTF8=0) Python decodes a non-ASCII path on the command line with
    surrogates for its bytes ('dir-\\udcc3\\udcbc' for dir-ü): the output check's str.encode() raised
    UnicodeEncodeError at a run's final save, and a temporary's cut name at once. Such a str is the same under any
    locale: a UTF-8 one decodes bytes that are no UTF-8 the same way."""
    from linformer.files.atomic import atomic_dir, atomic_write
    from linformer.files.hashing import short_digest
    from linformer.files.outputs import check_writable

    folder = tmp_path / os.fsdecode(b"dir-\xc3\xbc\xff")  # \xff: no UTF-8, so a surrogate under any locale
    check_writable(folder / "model", key="paths.output_dir")
    atomic_write(folder / "run.json", "{}")
    long = folder / os.fsdecode(b"\xff" * 250)  # its temporaries' names are cut, in bytes
    atomic_write(long, "text")
    with atomic_dir(folder / "model", A) as tmp:
        (tmp / "weights.bin").write_bytes(b"w")
    assert sorted(os.listdir(os.fsencode(folder))) == sorted([b"run.json", b"\xff" * 250, b"model"])
    assert short_digest(str(folder)) == short_digest(os.fsencode(folder))  # a run's W&B id is one of its folder


def test_a_full_disk_names_the_output_not_the_folder_it_goes_into(tmp_path, monkeypatch):
    import errno

    from linformer.errors import DiskFullError
    from linformer.files.atomic import atomic_write

    def full(*_):
        raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(DiskFullError, match=f"while writing {tmp_path / 'p2' / 'model'} "), \
            atomic_dir(tmp_path / "p2" / "model", A):
        full()
    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(DiskFullError, match=f"while writing {tmp_path / 'runs.md'} "):
        atomic_write(tmp_path / "runs.md", "text")


def test_commands_and_jobs_name_the_scripts_beside_the_one_started(tmp_path, monkeypatch):
    """Over a wheel, a clone's scripts run from a folder of the user's own (repo_root is the working directory
    there): the demo's jobs ran `python scripts/train_tokenizer.py` there and failed, and every printed next line
    named scripts/ of the working directory. The scripts are those beside the one started, relative where the
    working directory (or a job's, the repository) holds them."""
    from linformer.experiments import Places, demo
    from linformer.files.locations import repo_root, script, scripts_dir
    from linformer.shell import scripts_named_here
    from linformer.train.summary import finetune_next

    clone, user = tmp_path / "clone" / "scripts", tmp_path / "user"
    clone.mkdir(parents=True)
    user.mkdir()
    for name in ("pretrain", "train_tokenizer", "prepare_corpus", "finetune"):  # the clone's scripts are there
        (clone / f"{name}.py").write_text('"""Finetuning: python scripts/finetune.py task=sst2"""\n')
    from tests.conftest import as_command
    as_command(monkeypatch, [str(clone / "pretrain.py")])
    monkeypatch.chdir(user)
    assert scripts_dir() == clone and script("finetune") == str(clone / "finetune.py")
    assert finetune_next("m").startswith(f"python {clone / 'finetune.py'} task=sst2")
    assert scripts_named_here("Finetuning: python scripts/finetune.py task=sst2") == \
        f"Finetuning: python {clone / 'finetune.py'} task=sst2"
    jobs = demo.plan([], Places.of(tmp_path / "under"))
    assert {job.argv[1] for job in jobs} == {str(clone / f"{name}.py") for name in
                                             ("train_tokenizer", "prepare_corpus", "pretrain", "finetune")}
    monkeypatch.chdir(clone.parent)  # in the clone: as the commands are written in the docs
    assert script("finetune") == "scripts/finetune.py"
    monkeypatch.setattr(sys, "argv", ["-c"])  # Python calling the package: the clone's scripts/ beside it
    assert scripts_dir() == repo_root() / "scripts"


def test_a_command_s_script_copied_to_a_folder_of_its_own_names_the_clone_s_scripts_or_else_the_python_call(
        tmp_path, monkeypatch):
    """A command's script copied into a folder of the user's keeps its mark (__linformer_command__), so the folder it
    was started from is the copy's: its next: lines named <that folder>/finetune.py, which does not exist. A script
    that folder lacks is named in the clone's scripts/ (its help read there too); over a wheel, with no clone and no
    scripts/ in the working directory, the next: lines are the Python API's calls; the copy's own name is itself."""
    from linformer.files import locations
    from linformer.script_help import script_purpose
    from linformer.shell import script_command
    from linformer.train.summary import export_next, finetune_next
    from tests.conftest import as_command

    copy, run = tmp_path / "exp" / "mypretrain.py", tmp_path / "run"
    copy.parent.mkdir()
    run.mkdir()
    copy.write_text(f"{locations.COMMAND_MARK} = True\n")
    as_command(monkeypatch, [copy])
    monkeypatch.chdir(tmp_path)
    clone = (locations.repo_root() / "scripts").resolve()
    assert script_command("finetune", "task=sst2") == f"python {clone / 'finetune.py'} task=sst2"
    assert finetune_next("m").startswith(f"python {clone / 'finetune.py'} task=sst2")
    assert export_next(run, "why").startswith(f"python {clone / 'export.py'} {run}")
    assert f"python {clone / 'finetune.py'} task=sst2" in script_purpose("finetune")  # the clone's finetune.py's
    assert script_command("mypretrain") == f"python {copy.resolve()}"
    monkeypatch.setattr(locations, "repo_root", lambda: tmp_path)  # a wheel: the working directory, no scripts/
    assert finetune_next("m").startswith("finetune(FinetuneSpec.read(compose(")
    assert export_next(run, "why").startswith("export_run(")


def test_a_wheel_s_runs_in_a_git_project_of_the_user_s_own_get_no_warning_of_the_clone(tmp_path, monkeypatch):
    """Over a wheel, the working directory is where paths start (repo_root), and seen_by_git took it for the
    package's clone: every run in a git project of the user's own was said to lie "inside the clone where git does
    not ignore it", with advice (outputs/ is ignored) that holds in the clone only. Only the package's own clone is
    meant; a wheel has none."""
    from linformer.files import locations

    project = tmp_path / "project"
    project.mkdir()
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    monkeypatch.chdir(project)
    monkeypatch.setattr(locations, "__file__", str(tmp_path / "venv" / "site-packages" / "linformer" / "files" / "locations.py"))
    assert locations.repo_root() == project  # a wheel: paths from the working directory
    assert not locations.seen_by_git(project / "outputs" / "pretrain" / "run")


def test_the_short_digest_of_a_content_is_pinned_wherever_it_is_taken():
    """"sha256, first 16 hex digits" was written four times (the cache key, a tokenizer's identity and its parts'
    digests, the W&B run id): one short_digest now. The digests are pinned: a change of canonical form would rename
    every prepared cache and every tokenizer its corpora and runs record."""
    from pathlib import Path

    from linformer.data.tokenizer import _digest, _identity
    from linformer.files.hashing import cache_key, short_digest

    assert short_digest({"b": [1, "é"], "a": None}) == short_digest({"a": None, "b": [1, "é"]}) == "47acac9da933d9fb"
    assert short_digest("é") == short_digest("é".encode()) == hashlib.sha256("é".encode()).hexdigest()[:16]
    assert cache_key({"b": [1, "é"], "a": None, "p": Path("/x")}) == "807128e84bd05035"  # non-ASCII escaped
    assert _identity({"model": {"vocab": {"é": 0, "a": 1}}, "truncation": 1}) == "a1e86912fff0766c"
    assert _digest({"é": 0, "a": 1}) == "2 entries, sha256 a0909b39d63e38a5"


@pytest.mark.parametrize("code", ["EROFS", "EACCES"])
def test_a_dead_build_s_leftovers_that_cannot_be_removed_are_left_and_not_listed(tmp_path, monkeypatch, code):
    """remove_dead_builds (run by prepare_corpus and train_tokenizer before they look for an output to reuse) raised
    where a killed build's lock or temporary could not be removed (a read-only mount, another user's folder), so
    every command there failed. Those are left and not said removed; the removable ones still go."""
    import errno
    import json
    import socket

    from linformer.files.locks import remove_dead_builds
    from linformer.files.processes import process_place

    here, gone = process_place(), 999999999  # above any pid_max: no process
    record = json.dumps({"pid": gone, "host": socket.gethostname(), "place": here, "since": "then"})
    stuck = [tmp_path / ".building-a", tmp_path / f".tmp-a-{here}-{gone}"]
    going = [tmp_path / ".building-b", tmp_path / f".tmp-b-{here}-{gone}"]
    for lock, temp in (stuck, going):
        lock.write_text(record)
        temp.write_bytes(b"x")
    unlink = Path.unlink

    def refused(self, missing_ok=False):
        if self in stuck:
            raise OSError(getattr(errno, code), os.strerror(getattr(errno, code)), str(self))
        unlink(self, missing_ok=missing_ok)

    monkeypatch.setattr(Path, "unlink", refused)
    assert sorted(remove_dead_builds(tmp_path)) == sorted(going)
    assert all(p.exists() for p in stuck) and not any(p.exists() for p in going)


def test_a_rewritten_file_gets_the_earlier_permission_bits_only_and_is_written_where_chmod_fails(tmp_path,
                                                                                                 monkeypatch):
    """atomic_stream gave the new file the whole mode of the file it replaced, a setuid or setgid bit included, and
    failed the write on a file system without chmod (some FUSE and CIFS mounts)."""
    import errno

    from linformer.files.atomic import atomic_write

    path = tmp_path / "out.txt"
    path.write_text("old", encoding="utf-8")
    path.chmod(0o6750)
    atomic_write(path, "new")
    assert path.stat().st_mode & 0o7777 == 0o750 and path.read_text(encoding="utf-8") == "new"

    def no_chmod(fd, mode):
        raise OSError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(os, "fchmod", no_chmod)
    atomic_write(path, "newer")
    assert path.read_text(encoding="utf-8") == "newer"


def test_a_build_refused_while_its_holder_writes_its_record_still_names_that_holder(tmp_path, monkeypatch):
    """A second build that met the flock taken but its holder's record not yet written (the instant between the two)
    was refused without naming the process that builds; it reads the record again, as a run's start does."""
    import fcntl
    import json
    import re

    from linformer.files import locks

    out = tmp_path / "tok"
    lock = tmp_path / ".building-tok"
    fd = os.open(lock, os.O_CREAT | os.O_RDWR, 0o644)  # the holder: flock taken, record not yet written
    fcntl.flock(fd, fcntl.LOCK_EX)
    monkeypatch.setattr(locks.time, "sleep", lambda s: lock.write_text(json.dumps(
        {"pid": 4242, "host": "elsewhere", "since": "then"})))  # the holder writes its record meanwhile
    refused = rf"^{re.escape(str(out))} is being built by another process now \(process 4242 on elsewhere, since then\): "
    try:
        with pytest.raises(OutputPathError, match=refused), locks.building_alone(out):
            pytest.fail("built beside the holder")
    finally:
        os.close(fd)


@pytest.mark.parametrize("how", ["in_scripts", "dot_slash", "symlink", "from_root", "repl", "pytest"])
def test_a_script_is_told_from_python_code_however_it_was_started(tmp_path, monkeypatch, how):
    """`cd scripts && python pretrain.py` was taken for Python code calling the package (argv[0] 'pretrain.py' has no
    folder): run.json without its command, a `next:` line of Python, the wrong resume advice."""
    from linformer.files.locations import started_script

    script = Path(__file__).resolve().parents[1] / "scripts" / "pretrain.py"
    (tmp_path / "pretrain").symlink_to(script)
    argv0, cwd = {"in_scripts": ("pretrain.py", script.parent), "dot_slash": ("./pretrain.py", script.parent),
                  "symlink": (str(tmp_path / "pretrain"), tmp_path), "from_root": ("scripts/pretrain.py", script.parents[1]),
                  "repl": ("", tmp_path), "pytest": (pytest.__file__, tmp_path)}[how]
    monkeypatch.chdir(cwd)
    if how in ("repl", "pytest"):
        monkeypatch.setattr(sys, "argv", [argv0])
    else:  # the script marks itself before its imports, as each of scripts/*.py does
        from .conftest import as_command

        as_command(monkeypatch, [argv0])
    assert started_script() == (None if how in ("repl", "pytest") else script)


@pytest.mark.parametrize("folder", ["scripts", "tools"])
def test_a_user_s_own_script_in_a_folder_named_scripts_is_python_code_calling_the_package(tmp_path, monkeypatch,
                                                                                          folder):
    """Any *.py in a folder named scripts/ was taken for one of the package's commands: a research project's
    scripts/analyze.py that imported linformer had Ctrl-C, SIGTERM and SIGHUP taken over by the package's start-up
    stop (its own `except KeyboardInterrupt` never ran), no Auto classes registered, and next: lines and errors
    worded for a command line it never typed. Only a script that says it is a command is one, wherever it lies."""
    from linformer.cli import run_from_a_script
    from linformer.files.locations import repo_root, scripts_dir, started_script
    from linformer.train.summary import finetune_next

    own = tmp_path / "project" / folder / "analyze.py"
    own.parent.mkdir(parents=True)
    own.write_text("import linformer\n")
    monkeypatch.setattr(sys, "argv", [str(own)])
    assert started_script() is None and not run_from_a_script()
    assert scripts_dir() == repo_root() / "scripts"
    assert finetune_next("m").startswith("finetune(FinetuneSpec.read(compose(")  # the Python call, not a command line


def test_every_script_of_the_package_says_it_is_a_command_before_it_imports_the_package():
    """A script without the mark would run as Python code calling the package: torch imported before its --help, no
    `stopped:` line for a Ctrl-C at start-up, next: lines worded as Python calls."""
    import ast

    from linformer.files.locations import COMMAND_MARK

    for script in sorted((Path(__file__).resolve().parents[1] / "scripts").glob("*.py")):
        body = ast.parse(script.read_text(encoding="utf-8")).body
        first = next((i for i, node in enumerate(body) if isinstance(node, (ast.Import, ast.ImportFrom)) and any(
            (getattr(node, "module", None) or alias.name).startswith("linformer") for alias in node.names)), None)
        if first is None:
            continue  # wheelhouse.py and what runs over it: no package
        marks = [node for node in body[:first] if isinstance(node, ast.Assign) and
                 [getattr(t, "id", None) for t in node.targets] == [COMMAND_MARK] and
                 isinstance(node.value, ast.Constant) and node.value.value is True]
        assert marks, f"{script.name} imports linformer without {COMMAND_MARK} = True first"


@pytest.mark.slow  # a fresh interpreter's import of torch and transformers (10-20 s under load)
def test_importing_the_package_from_a_user_s_scripts_folder_leaves_ctrl_c_to_the_user(tmp_path):
    """What only a process shows: the package's import installed no handler in a user's scripts/<name>.py, whose
    Ctrl-C reaches its own `except KeyboardInterrupt` (it ended with a `stopped:` line and 130), and registered the
    Auto classes, as a model card's `import linformer` promises."""
    own = tmp_path / "project" / "scripts" / "loop.py"
    own.parent.mkdir(parents=True)
    own.write_text("""\
import os, signal, sys, time
before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
import linformer
from transformers import CONFIG_MAPPING
changed = [s.name for s, h in before.items() if signal.getsignal(s) is not h]
print("changed", changed, "registered", "linformer" in CONFIG_MAPPING, flush=True)
try:
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(30)
except KeyboardInterrupt:
    print("the user's handler ran", flush=True)
""")
    done = subprocess.run([sys.executable, str(own)], capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines() == ["changed [] registered True", "the user's handler ran"], done.stderr[-2000:]


def test_a_rewritten_file_keeps_its_permissions_and_a_new_one_gets_the_umask_s(tmp_path):
    """atomic_stream swapped in a temporary with the umask's mode: a run.json the user chmod'ed 600 became 664 at
    the run's next write, readable by the group and everyone again."""
    from linformer.files.atomic import atomic_write, write_json

    mask = os.umask(0o002)
    try:
        record = tmp_path / "run.json"
        write_json(record, {"status": "running"})
        assert record.stat().st_mode & 0o777 == 0o664
        record.chmod(0o600)
        write_json(record, {"status": "finished"})
        assert record.stat().st_mode & 0o777 == 0o600 and read_json(record) == {"status": "finished"}
        log = tmp_path / "notes.md"
        log.write_text("x", encoding="utf-8")
        log.chmod(0o640)
        (tmp_path / "link.md").symlink_to(log)
        atomic_write(tmp_path / "link.md", "y")  # written through the link: the target's mode
        assert log.stat().st_mode & 0o777 == 0o640 and log.read_text(encoding="utf-8") == "y"
    finally:
        os.umask(mask)


def test_a_run_over_a_wheel_records_its_paths_whole_so_they_read_from_any_folder(tmp_path, monkeypatch):
    """Over a wheel the root is the working directory: a path typed absolute was recorded relative to it
    (demo/data/tokenizers/...), and an export started from another folder found nothing there."""
    from linformer.data.io import local_path, record_path
    from linformer.files import locations

    site = tmp_path / "venv" / "lib" / "python3.11" / "site-packages"
    monkeypatch.setattr(locations, "__file__", str(site / "linformer" / "files" / "locations.py"))
    (tmp_path / "work" / "data" / "tok").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "work")
    monkeypatch.setenv("LINFORMER_DATA_MIRROR", str(tmp_path / "mirror"))
    tok = tmp_path / "work" / "data" / "tok"
    assert record_path(str(tok)) == str(tok) and record_path("data/tok") == str(tok)
    assert locations.repo_relative(tok) == str(tok)
    assert record_path("bert-base-uncased") == "bert-base-uncased"  # a hub name, no folder of that name here
    monkeypatch.chdir(tmp_path)
    assert local_path(record_path(str(tok))) == str(tok)


def test_a_wheel_installed_into_a_venv_inside_a_clone_is_not_that_clone(tmp_path, monkeypatch):
    """`cd clone && python -m venv .venv && .venv/bin/pip install .`: clone_root walked up from site-packages, found
    the clone's pyproject.toml and linformer/, and relative paths resolved against the clone instead of the working
    directory, as the README says a non-editable install's do. The clone is only the one whose linformer/ the
    package is."""
    from linformer.files import locations

    clone, user = tmp_path / "clone", tmp_path / "user"
    (clone / "linformer" / "files").mkdir(parents=True)
    (clone / "pyproject.toml").write_text("[project]\nname = 'linformer'\n")
    user.mkdir()
    monkeypatch.chdir(user)
    site = clone / ".venv" / "lib" / "python3.11" / "site-packages"
    monkeypatch.setattr(locations, "__file__", str(site / "linformer" / "files" / "locations.py"))
    assert locations.clone_root() is None
    assert locations.resolve_path("outputs/pretrain/pt") == str(user / "outputs" / "pretrain" / "pt")
    monkeypatch.setattr(locations, "__file__", str(clone / "linformer" / "files" / "locations.py"))  # editable
    assert locations.clone_root() == clone
    assert locations.resolve_path("outputs/pretrain/pt") == str(clone / "outputs" / "pretrain" / "pt")


@pytest.mark.parametrize("name", ["model", "best"])
def test_a_runs_model_is_never_a_conversion_output_even_with_overwrite(tmp_path, name):
    """convert out_dir=<run>/model overwrite=true replaced a run's model with a converted one, after which the run
    said it was complete and a finetuning from it trained the other model: refused in one line, overwrite or not."""
    from linformer.files.outputs import check_output_dir

    model = tmp_path / "runs" / "p1" / name
    model.mkdir(parents=True)
    (model.parent / "config.yaml").write_text("seed: 0\n")
    (model / MANIFEST).write_text(json.dumps({**made_by("export", {"run": str(model.parent), "step": 4}),
                                              "entries": ["config.json"], "model_format": 2}))
    (model / "config.json").write_text("{}")
    with pytest.raises(OutputPathError, match=rf"^{model} is the {name}/ of the run {model.parent}, which that run's "
                                              r"records describe: choose another out_dir= \(overwrite=true never"):
        check_output_dir(model, made_by("convert", {"model_path": "x"}), overwrite=True, key="out_dir=")


@pytest.mark.parametrize("where", ["gone", "inside"])
def test_another_runs_model_is_refused_where_it_is_not_there_yet_and_below_it(tmp_path, where):
    """The refusal held only where the run's model/ existed: an export into the model/ of a run that has none (a
    finetuning keeps best/) wrote it, and the run then served those weights as its own; a folder inside another
    run's model/ was written too (and that run's next export of its own model deleted it)."""
    from linformer.files.outputs import check_output_dir

    run = tmp_path / "runs" / "r"
    run.mkdir(parents=True)
    (run / "config.yaml").write_text("seed: 0\n")
    if where == "inside":
        (run / "model").mkdir()
    out = run / "model" / ("sub" if where == "inside" else "")
    export = made_by("export", {"run": str(tmp_path / "runs" / "r2"), "step": 4})
    with pytest.raises(OutputPathError, match=r"(is|is inside) the model/ of the run .*records describe"):
        check_output_dir(out, export, overwrite=True, key="--out")
    check_output_dir(run / "model", made_by("export", {"run": str(run), "step": 4}), overwrite=True)  # its own


def test_what_was_put_into_a_model_a_run_saved_is_never_deleted_by_its_export_overwrite(tmp_path):
    """export <run> --out <run>/model --overwrite replaced the model the run's trainer saved (a manifest naming its
    files, no command) whole, deleting the notes and folders the user had put beside them, without a word."""
    from linformer.files.outputs import check_output_dir

    model = tmp_path / "run" / "model"
    model.mkdir(parents=True)
    (model.parent / "config.yaml").write_text("seed: 0\n")
    (model / MANIFEST).write_text(json.dumps({"entries": ["config.json"], "model_format": 2}))
    (model / "config.json").write_text("{}")
    own = made_by("export", {"run": str(model.parent), "step": 4})
    check_output_dir(model, own, overwrite=True)  # the model alone: its own export replaces it
    (model / "NOTES.md").write_text("mine")
    with pytest.raises(OutputPathError, match=r"holds NOTES.md beside the run's own output"):
        check_output_dir(model, own, overwrite=True)
