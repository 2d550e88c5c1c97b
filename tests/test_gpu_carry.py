"""scripts/gpu_carry.py (linformer/gpu/carry.py): a target's carry folder holds what the target reads, and unpacks to the same bytes (the model to
the fp16 rounding of its weights, in fp32)."""

import gzip
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from linformer.files.atomic import record_output_files
from linformer.files.outputs import made_by
from linformer.gpu import carry

REPO = Path(__file__).resolve().parents[1]

WIKI = "pretrain/wikipedia/enwiki_extracted.txt.gz"  # configs/data/mirror_slice.yaml's source, under the mirror
WIKI_TEXT = b"\n\nfirst doc para 1\nfirst doc para 2\n\n\nsecond doc\n\nthird doc\nthird again\n\nfourth\n"


def _refused(argv: list[str]) -> int:
    """gpu_carry's exit status for a command it refuses: cli_errors's, after the one `error:` line."""
    with pytest.raises(SystemExit) as stop:
        carry.main(argv)
    return stop.value.code


def _mirror(root: Path) -> Path:
    for rel in ("glue/sst2/train.tsv", "glue/sst2/dev.tsv", "imdb/train.csv", "imdb/test.csv"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(f"rows of {rel}\n".encode() * 100)
    (root / WIKI).parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(root / WIKI, "wb") as f:
        f.write(WIKI_TEXT)
    return root


def _model(root: Path) -> Path:
    root.mkdir(parents=True)
    for name in carry.MODEL_FILES:
        (root / name).write_text(f"{name} contents")
    g = torch.Generator().manual_seed(0)
    save_file({"embeddings.weight": torch.randn(50, 8, generator=g) * 3, "position_ids": torch.arange(16)},
              root / carry.WEIGHTS)
    return root


def test_the_wiki_head_keeps_exactly_the_first_documents(tmp_path):
    source, head = _mirror(tmp_path / "m") / WIKI, tmp_path / "head.txt.gz"
    carry.wiki_head(source, head, 2)
    assert gzip.decompress(head.read_bytes()) == b"\n\nfirst doc para 1\nfirst doc para 2\n\n\nsecond doc\n\n"
    carry.wiki_head(source, head, 10)  # fewer documents than asked: the whole file
    assert gzip.decompress(head.read_bytes()) == WIKI_TEXT
    assert carry.corpus_sources("mirror_slice", tmp_path / "m") == ([WIKI], 300)


def test_pack_then_unpack_gives_back_the_data_and_the_weights_rounded_to_fp16(tmp_path, monkeypatch):
    mirror, model = _mirror(tmp_path / "mirror"), _model(tmp_path / "model")
    sources = carry.corpus_sources
    monkeypatch.setattr(carry, "corpus_sources", lambda name, mirror: (sources(name, mirror)[0], 1))
    dest, checkout = tmp_path / "carry", tmp_path / "checkout"
    carry.pack("table2", dest, mirror, model)
    assert not (dest / "imdb" / "train.csv").exists() and (dest / "imdb" / "train.csv.xz").is_file()
    assert (dest / carry.MODEL_DIR / f"{carry.WEIGHTS}.xz").stat().st_size < (model / carry.WEIGHTS).stat().st_size
    carry.unpack(dest, checkout)
    for rel in ("glue/sst2/train.tsv", "glue/sst2/dev.tsv", "imdb/train.csv", "imdb/test.csv"):
        assert (dest / rel).read_bytes() == (mirror / rel).read_bytes()
    assert list(dest.rglob("*.xz")) == [dest / carry.MODEL_DIR / f"{carry.WEIGHTS}.xz"]  # the rest decompressed
    assert gzip.decompress((dest / WIKI).read_bytes()) == b"\n\nfirst doc para 1\nfirst doc para 2\n\n\n"
    original, restored = load_file(model / carry.WEIGHTS), load_file(checkout / carry.MODEL_DIR / carry.WEIGHTS)
    assert restored["embeddings.weight"].dtype == torch.float32
    assert torch.equal(restored["embeddings.weight"], original["embeddings.weight"].half().float())
    assert not torch.equal(restored["embeddings.weight"], original["embeddings.weight"])  # rounded, as said
    assert torch.equal(restored["position_ids"], original["position_ids"])  # integers untouched
    for name in carry.MODEL_FILES:
        assert (checkout / carry.MODEL_DIR / name).read_text() == f"{name} contents"


def test_xz_compresses_a_chunk_a_call_to_the_bytes_of_one_call(monkeypatch):
    """A stop acts between calls into liblzma: packing a file is many short calls (seconds apart at most under
    load), not one of minutes, and the carry's bytes are those of lzma.compress."""
    import lzma

    calls = []

    class Counted:  # the C type takes no subclass
        def __init__(self, **kwargs):
            self.compressor = Compressor(**kwargs)

        def compress(self, data):
            calls.append(len(data))
            return self.compressor.compress(data)

        def flush(self):
            return self.compressor.flush()

    data = WIKI_TEXT * 500
    whole, Compressor = lzma.compress(data, preset=carry.TEXT_PRESET), lzma.LZMACompressor
    monkeypatch.setattr(lzma, "LZMACompressor", Counted)
    monkeypatch.setattr(carry, "XZ_CHUNK", 1000)
    assert carry.xz(data, preset=carry.TEXT_PRESET) == whole
    assert len(calls) == -(-len(data) // 1000) and max(calls) == 1000


def test_a_missing_mirror_file_is_one_error_naming_it(tmp_path, capsys):
    mirror = _mirror(tmp_path / "m")
    (mirror / "imdb" / "test.csv").unlink()
    assert _refused(["pack", "table2", "--dest", str(tmp_path / "c"), "--mirror", str(mirror)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "imdb/test.csv is missing" in err and err.count("\n") == 1
    assert not (tmp_path / "c").exists()  # nothing half-written


def test_a_model_dir_without_the_model_is_one_error_naming_it_before_anything_is_written(tmp_path, capsys):
    mirror, empty = _mirror(tmp_path / "m"), tmp_path / "empty"
    empty.mkdir()
    args = ["pack", "table2", "--dest", str(tmp_path / "c"), "--mirror", str(mirror)]
    assert _refused([*args, "--model-dir", str(empty)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: --model-dir {empty} has no config.json") and err.count("\n") == 1
    assert not (tmp_path / "c").exists()  # nothing half-written


@pytest.mark.parametrize("cut", ["failure", "SIGTERM"])
def test_a_pack_that_fails_or_is_stopped_part_way_leaves_nothing_and_a_rerun_writes_it(tmp_path, monkeypatch, capsys,
                                                                                       cut):
    """Nothing half-written: the files written before the cut are removed, and no output record names them."""
    import json
    import signal

    from linformer.files.outputs import FILE_RECORDS
    from linformer.signals import Interrupted

    mirror, model = _mirror(tmp_path / "m"), _model(tmp_path / "model")
    args = ["pack", "table2", "--dest", str(tmp_path / "c"), "--mirror", str(mirror), "--model-dir", str(model)]

    def fails(*_):
        raise carry.CarryError("the model could not be written") if cut == "failure" else Interrupted(signal.SIGTERM)

    with monkeypatch.context() as m:
        m.setattr(carry, "pack_model", fails)
        assert _refused(args) == (2 if cut == "failure" else 128 + signal.SIGTERM)
    assert not (tmp_path / "c" / "imdb" / "test.csv.xz").exists()  # written before the cut, and removed with it
    for records in (tmp_path / "c").rglob(FILE_RECORDS):
        assert [name for name in json.loads(records.read_text()) if not (records.parent / name).exists()] == []
    assert "carry: packing imdb/train.csv (0.0 MiB)" in capsys.readouterr().out  # a line as each file starts
    assert carry.main(args) == 0, capsys.readouterr().err  # its own files: replaced without --overwrite


def test_pack_and_unpack_never_replace_files_they_did_not_write(tmp_path, monkeypatch, capsys):
    """A user's minilm/config.json in --dest or in the checkout stays; a second pack replaces only its own files and
    reports only their size."""
    import pytest

    mirror, model = _mirror(tmp_path / "mirror"), _model(tmp_path / "model")
    sources = carry.corpus_sources
    monkeypatch.setattr(carry, "corpus_sources", lambda name, mirror: (sources(name, mirror)[0], 1))
    dest = tmp_path / "dest"
    (dest / carry.MODEL_DIR).mkdir(parents=True)
    (dest / carry.MODEL_DIR / "config.json").write_text("the user's")
    (dest / "notes.txt").write_text("the user's notes, 1 MiB" + " " * 2**20)
    args = ["pack", "table2", "--dest", str(dest), "--mirror", str(mirror), "--model-dir", str(model)]
    with pytest.raises(SystemExit) as stop:
        carry.main(args)
    assert stop.value.code == 2 and "config.json is a file gpu_carry pack did not write" in capsys.readouterr().err
    assert (dest / carry.MODEL_DIR / "config.json").read_text() == "the user's"
    (dest / carry.MODEL_DIR / "config.json").unlink()
    assert carry.main(args) == 0 and carry.main(args) == 0  # its own files: replaced
    assert "MiB" in (out := capsys.readouterr().out) and float(out.split(", ")[-1].split()[0]) < 0.5  # not the notes

    monkeypatch.setattr(carry, "REPO", tmp_path / "checkout")
    (tmp_path / "checkout" / carry.MODEL_DIR).mkdir(parents=True)
    (tmp_path / "checkout" / carry.MODEL_DIR / "config.json").write_text("the user's model")
    with pytest.raises(SystemExit):
        carry.main(["unpack", str(dest)])
    assert (tmp_path / "checkout" / carry.MODEL_DIR / "config.json").read_text() == "the user's model"


def test_a_carry_cut_short_in_transfer_is_one_error_line_naming_the_file(tmp_path, capsys):
    import lzma

    dest = tmp_path / "carry"
    (dest / "imdb").mkdir(parents=True)
    whole = lzma.compress(b"text,label\n" * 1000)
    (dest / "imdb" / "train.csv.xz").write_bytes(whole[: len(whole) // 2])  # a transfer broken off half-way
    record_output_files([dest / "imdb" / "train.csv.xz"], made_by(carry.PACK, {"target": "table2"}))
    assert _refused(["unpack", str(dest)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {dest / 'imdb' / 'train.csv.xz'} is damaged")
    assert err.count("\n") == 1 and not (dest / "imdb" / "train.csv").exists()  # nothing half-written


def test_unpacking_a_missing_or_empty_folder_is_one_error_line_not_zero_files(tmp_path, capsys):
    assert _refused(["unpack", str(tmp_path / "missing")]) == 2
    missing = tmp_path / "missing"
    expected = f"error: {missing} is not a folder: give the carry folder that `pack` wrote (sent with the checkout)\n"
    assert capsys.readouterr().err == expected
    (tmp_path / "mine" / "imdb").mkdir(parents=True)
    (tmp_path / "mine" / "imdb" / "train.csv").write_text("text,label\n")  # a folder gpu_carry did not write
    assert _refused(["unpack", str(tmp_path / "mine")]) == 2
    assert "is not a carry folder" in capsys.readouterr().err


def _packed(tmp_path, monkeypatch, target: str, max_documents: int | None = 1) -> Path:
    """A carry of `target` from a stand-in mirror, its corpus head `max_documents` long (None: the whole file)."""
    mirror = _mirror(tmp_path / "mirror")
    monkeypatch.setattr(carry, "corpus_sources", lambda name, mirror: ([WIKI], max_documents))
    dest = tmp_path / f"carry-{target}"
    carry.pack(target, dest, mirror, _model(tmp_path / "model") if carry.TARGETS[target].get("model") else None)
    return dest


def test_unpacking_a_carry_with_nothing_packed_or_unpacked_already_goes_on(tmp_path, monkeypatch, capsys):
    """figure3's carry holds no .xz, and a rerun of step 3's chain unpacks a carry twice: both exit 0, saying so,
    so that the `&&` chain reaches gpu.py."""
    whole = _packed(tmp_path, monkeypatch, "figure3", None)
    assert not list(whole.rglob("*.xz")) and (whole / WIKI).is_file()
    assert carry.main(["unpack", str(whole)]) == 0
    assert "nothing to unpack" in capsys.readouterr().out
    scratch = _packed(tmp_path, monkeypatch, "scratch")
    assert carry.main(["unpack", str(scratch)]) == 0 and carry.main(["unpack", str(scratch)]) == 0
    assert "unpacked 4 files" in (out := capsys.readouterr().out) and "nothing to unpack" in out
    assert (scratch / "imdb" / "train.csv").is_file()


def test_a_carry_not_unpacked_or_not_what_the_config_reads_is_refused_naming_the_fix(tmp_path, monkeypatch):
    """check_carry (scripts/gpu.py, before a carried target): a carry still packed names unpack, not the hub; the
    wrong target's carry, a head cut at another max_documents, or a changed file names pack."""
    import pytest

    dest = _packed(tmp_path, monkeypatch, "scratch")
    with pytest.raises(carry.CarryError, match=r"train.tsv is still packed .*gpu_carry.py unpack"):
        carry.check_carry("scratch", dest)
    carry.unpack(dest)
    carry.check_carry("scratch", dest)  # what the config reads: no complaint
    assert carry.read_json(dest / carry.MANIFEST)["sources"][WIKI]["documents"] == 1
    with pytest.raises(carry.CarryError, match="the carry of target 'scratch'"):
        carry.check_carry("table2", dest)
    monkeypatch.setattr(carry, "corpus_sources", lambda name, mirror: ([WIKI], 400))  # the config asks for more
    with pytest.raises(carry.CarryError, match="holds the first 1 documents .* reads 400: pack it again"):
        carry.check_carry("scratch", dest)
    monkeypatch.setattr(carry, "corpus_sources", lambda name, mirror: ([WIKI], 1))
    (dest / WIKI).write_bytes(gzip.compress(b"another head\n"))
    with pytest.raises(carry.CarryError, match="not the file gpu_carry pack put in the carry"):
        carry.check_carry("scratch", dest)
    carry.check_carry("scratch", tmp_path / "mirror")  # the data mirror itself: nothing recorded to check


def test_the_upload_size_counts_what_git_does_not_ignore_and_the_carried_paths(tmp_path, monkeypatch, capsys):
    import subprocess

    repo = tmp_path / "repo"
    (repo / "docs" / "results" / "runs").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / ".gitignore").write_text("/outputs/\n/.carry/\n")
    (repo / "docs" / "results" / "runs" / "a.json").write_bytes(b"x" * 3000)
    (repo / "new.txt").write_bytes(b"y" * 500)  # untracked, not ignored: it travels
    (repo / "outputs").mkdir()
    (repo / "outputs" / "model.bin").write_bytes(b"z" * 10_000)  # ignored: it stays
    (repo / ".carry").mkdir()
    (repo / ".carry" / "w.xz").write_bytes(b"c" * 2000)
    subprocess.run(["git", "-C", str(repo), "add", "docs", ".gitignore"], check=True)
    tree, carried, by_folder = carry.upload_size(repo, [repo / ".carry"])
    assert tree == 3000 + 500 + len("/outputs/\n/.carry/\n") and carried == 2000
    assert by_folder["docs/results/runs"] == 3000
    (repo / "docs" / "results" / "runs" / "a.json").unlink()  # left out for the call: still indexed, not sent
    assert carry.upload_size(repo, [])[0] == 500 + len("/outputs/\n/.carry/\n")

    monkeypatch.setattr(carry, "REPO", repo)
    assert _refused(["size", str(repo / ".carry"), "--limit-mib", "0.001"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: the upload is") and "over the limit" in err and len(err.splitlines()) == 1
    assert _refused(["size", str(repo / "gone")]) == 2
    assert "carried path" in capsys.readouterr().err


def test_size_refuses_a_stale_carry_or_another_targets_before_it_is_sent(tmp_path, monkeypatch, capsys):
    """`size`, run here before the call, checks a carried carry folder as gpu.py does on the node (check_carry), still
    packed as it travels: a carry cut at another max_documents, or another target's (--target), is one error line
    here, not after the node's install and unpack; a carry that is what the config reads passes to the size."""
    dest = _packed(tmp_path, monkeypatch, "scratch")
    monkeypatch.setattr(carry, "upload_size", lambda repo, carried: (0, 0, {}))
    assert carry.main(["size", str(dest), "--target", "scratch"]) == 0  # packed, and what the config reads
    assert "upload:" in capsys.readouterr().out
    assert _refused(["size", str(dest), "--target", "table2"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "is the carry of target 'scratch'" in err and err.count("\n") == 1
    monkeypatch.setattr(carry, "corpus_sources", lambda name, mirror: ([WIKI], 400))  # the config reads more now
    assert _refused(["size", str(dest)]) == 2  # against the target it was packed for
    err = capsys.readouterr().err
    assert "holds the first 1 documents" in err and "pack it again" in err and err.count("\n") == 1


def test_the_upload_size_reads_its_paths_as_every_command_does(tmp_path, monkeypatch, capsys):
    """`gpu_carry size <files>` read relative paths from the working folder, and an empty one ("$WHL" unset) as the
    folder itself: a relative one is the repository's, "~" expanded, an empty one refused."""
    from linformer.files.locations import repo_root

    monkeypatch.setattr(carry, "upload_size", lambda repo, carried: (0, sum(p.stat().st_size for p in carried), {}))
    monkeypatch.chdir(tmp_path)  # no pyproject.toml here: the repository's is counted
    assert carry.main(["size", "pyproject.toml"]) == 0
    size = (repo_root() / "pyproject.toml").stat().st_size
    assert f"carried {size / 2**20:.1f} MiB" in capsys.readouterr().out
    with pytest.raises(SystemExit) as stop:
        carry.main(["size", ""])
    assert stop.value.code == 2
    assert "argument carried: an empty path: give a path (an unset variable?)" in capsys.readouterr().err


def test_unpack_touches_nothing_pack_did_not_write(tmp_path, capsys):
    """A folder pack never wrote (the user's notes.txt beside a notes.txt.xz of theirs, a backup .tar.xz): refused
    naming the file, every file as it was. A file of the user's where pack's .xz would decompress: refused too."""
    import lzma

    folder = tmp_path / "mine"
    (folder / "sub").mkdir(parents=True)
    files = {"notes.txt": b"mine", "notes.txt.xz": lzma.compress(b"older notes"),
             "sub/backup.tar.xz": lzma.compress(b"a tarball")}
    for rel, data in files.items():
        (folder / rel).write_bytes(data)
    assert _refused(["unpack", str(folder)]) == 2
    assert "was not written by gpu_carry pack" in capsys.readouterr().err
    assert {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()} == files

    packed = tmp_path / "carry" / "imdb"
    packed.mkdir(parents=True)
    (packed / "train.csv.xz").write_bytes(lzma.compress(b"text,label\n"))
    record_output_files([packed / "train.csv.xz"], made_by(carry.PACK, {"target": "table2"}))
    (packed / "train.csv").write_text("the user's")
    assert _refused(["unpack", str(tmp_path / "carry")]) == 2
    assert "exists and unpack did not write it" in capsys.readouterr().err
    assert (packed / "train.csv").read_text() == "the user's" and (packed / "train.csv.xz").is_file()


def test_a_node_without_the_wheels_gets_one_error_line_naming_the_missing_module(tmp_path):
    """The lent image has no omegaconf/hydra until the carried wheels are installed: the GPU scripts say so in one
    line (exit 2), not with an import traceback, and at once: before the package is imported (transformers, seconds),
    which the finder here reports on a line of its own."""
    import os
    import subprocess
    import sys

    (tmp_path / "sitecustomize.py").write_text(
        "import sys\nclass Hide:\n    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('omegaconf', 'hydra'):\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
        "        if name == 'linformer':\n"
        "            print(f'{name} imported', file=sys.stderr)\n"
        "sys.meta_path.insert(0, Hide())\n")
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{REPO}"}
    procs = [subprocess.Popen([sys.executable, script, "unpack", ".carry"], cwd=REPO, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
             for script in ("scripts/gpu_carry.py", "scripts/gpu.py")]  # started together: each spends seconds starting
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 2 and err.count("\n") == 1, err
        assert err.startswith("error: omegaconf is missing here: install the wheels first")


def test_the_modules_a_gpu_script_looks_for_first_are_ones_the_package_imports():
    """wheelhouse.package_main refuses a node lacking any of NEEDED_MODULES before importing the package: a name the
    package does not import (a dependency dropped, a misspelling) would refuse a node that runs the scripts."""
    import sys

    from linformer.configs import compose
    from linformer.gpu import targets  # noqa: F401

    from .test_wheelhouse import wh

    compose("pretrain", [])
    assert [name for name in wh.NEEDED_MODULES if name not in sys.modules] == []


def test_the_mirror_help_says_what_configs_paths_says(monkeypatch, capsys):
    """The default mirror was spelt in three help texts beside configs/paths/default.yaml: they read it from there."""
    from omegaconf import OmegaConf

    from linformer.data import io

    assert io.data_mirror_words() == ("paths.data_mirror, i.e. $LINFORMER_DATA_MIRROR, else ../shared/data "
                                      "(relative to the repository)")
    monkeypatch.setattr(io, "_paths_config", lambda: OmegaConf.create({"data_mirror": "${oc.env:MIRROR,/srv/m}"}))
    with pytest.raises(SystemExit):
        carry.main(["pack", "--help"])
    assert "$MIRROR, else /srv/m" in " ".join(capsys.readouterr().out.split())


def test_a_data_mirror_missing_or_without_the_targets_files_is_refused_naming_it(tmp_path, monkeypatch):
    """With no carry.json the mirror is taken as the data mirror itself: one that does not exist (a misspelt
    LINFORMER_DATA_MIRROR) or lacks a file the target reads is refused before the target starts, naming it."""
    monkeypatch.setattr(carry, "corpus_sources", lambda name, mirror: ([WIKI], 1))
    with pytest.raises(carry.CarryError, match=r"the data mirror .*/nowhere does not exist: LINFORMER_DATA_MIRROR"):
        carry.check_carry("scratch", tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(carry.CarryError, match=r"empty/glue/sst2/train.tsv is missing, and .* holds no carry.json"):
        carry.check_carry("scratch", tmp_path / "empty")
    mirror = _mirror(tmp_path / "mirror")
    carry.check_carry("scratch", mirror)  # a data mirror holding what the target reads
    (mirror / WIKI).unlink()
    with pytest.raises(carry.CarryError, match="enwiki_extracted.txt.gz is missing"):
        carry.check_carry("scratch", mirror)


def test_mfu_refuses_a_checkout_without_its_prepared_tokenizer_and_corpus_naming_both(tmp_path):
    """mfu reads a tokenizer and a corpus prepared here (carry.PREPARED), which the node cannot prepare (no source):
    check_carry names both folders before the target starts, and passes once both are complete."""
    with pytest.raises(carry.CarryError, match=r"mfu reads data/tokenizers/wiki and data/processed/wiki_mfu, prepared "
                                               r"here, and .*tokenizers/wiki/tokenizer.json is not there: .*gpu_carry.py pack "
                                               r"mfu --dest .carry"):
        carry.check_carry("mfu", tmp_path / "mirror", checkout=tmp_path)
    (tmp_path / "data/tokenizers/wiki").mkdir(parents=True)
    (tmp_path / "data/tokenizers/wiki/tokenizer.json").write_text("{}")
    with pytest.raises(carry.CarryError, match=r"processed/wiki_mfu/manifest.json is not there"):
        carry.check_carry("mfu", tmp_path / "mirror", checkout=tmp_path)
    (tmp_path / "data/processed/wiki_mfu").mkdir(parents=True)
    (tmp_path / "data/processed/wiki_mfu/manifest.json").write_text("{}")
    carry.check_carry("mfu", tmp_path / "mirror", checkout=tmp_path)


def test_pack_mfu_carries_its_prepared_tokenizer_and_corpus_and_unpack_puts_them_in_the_checkout(tmp_path,
                                                                                                  monkeypatch, capsys):
    """mfu's data is prepared here (carry.PREPARED): pack takes its folders from the checkout, unpack copies them to
    the node's checkout (a carry sent again: left as they are; other files there: refused but with --overwrite),
    and check_carry then passes."""
    import pytest

    here, node, dest = tmp_path / "here", tmp_path / "node", tmp_path / ".carry"
    files = {"data/tokenizers/wiki/tokenizer.json": "{}", "data/processed/wiki_mfu/manifest.json": '{"complete": true}',
             "data/processed/wiki_mfu/train/data-00000.arrow": "ids"}
    monkeypatch.setattr(carry, "REPO", here)
    with pytest.raises(SystemExit) as stop:  # nothing prepared here: refused, naming both folders
        carry.main(["pack", "mfu", "--dest", str(dest)])
    assert stop.value.code == 2 and "data/processed/wiki_mfu" in capsys.readouterr().err and not dest.exists()
    for rel, text in files.items():
        (here / rel).parent.mkdir(parents=True, exist_ok=True)
        (here / rel).write_text(text)
    assert carry.main(["pack", "mfu", "--dest", str(dest)]) == 0
    assert "carry: 4 files for target mfu" in capsys.readouterr().out

    monkeypatch.setattr(carry, "REPO", node)
    node.mkdir()
    assert carry.main(["unpack", str(dest)]) == 0
    assert {str(f.relative_to(node)): f.read_text() for f in node.rglob("*") if f.is_file()} == files
    carry.check_carry("mfu", dest, checkout=node)
    capsys.readouterr()
    assert carry.main(["unpack", str(dest)]) == 0  # sent again to a warm machine: the same files, left
    assert "nothing to unpack" in capsys.readouterr().out
    (node / "data/processed/wiki_mfu/manifest.json").write_text('{"other": true}')
    with pytest.raises(SystemExit) as stop:
        carry.main(["unpack", str(dest)])
    assert stop.value.code == 2 and "wiki_mfu exists and holds other files" in capsys.readouterr().err
    assert carry.main(["unpack", str(dest), "--overwrite"]) == 0
    assert (node / "data/processed/wiki_mfu/manifest.json").read_text() == '{"complete": true}'
