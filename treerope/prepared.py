"""The prepared-data format: what prepare.py writes and train.py, evaluate.py and analyze.py read.

data/<corpus>/ holds, per split, {split}_{field}.npy (memory-mappable): tokens, doc_start (record
offsets, n_records + 1), record_doc (the document of each record) and the per-token fields of
FIELDS; and meta.json (counts, skips and their reasons, the tokenizer, the corpus's defaults).
Here: that format and its table of fields, and reading a folder back (its arrays, meta.json,
tokenizer.json, the identity a run records). Numpy only: writing it is writer.py, a Doc's per-token
fields fields.py, torch batches batches.py.

    python -m treerope.prepared data/web   # what a prepared folder holds, field by field
"""
import glob
import hashlib
import json
import os
import sys

import numpy as np

from treerope.files import read_json
from trees import LEVELS

SPLITS = ("train", "val", "test")

# Per-token fields beside the token ids, -1 where absent. Structural ones place a token in its document:
# evaluate.py's shuffle and remove move or erase exactly these, and silently leave any other alone.
FIELDS = {   # name: (structural, what it holds)
    "pos": (False, "index in its record: the sequence coordinate t"),
    "path": (True, f"({LEVELS},) sibling ranks from the root down"),
    # depth 0 (no node) is a value, which turns the depth planes by 0; only depth dropout writes -1
    "depth": (True, "levels below the root (children of the root: 1; 0: no node)"),
    "within": (True, "index inside its node"),
    "ref_path": (True, f"({LEVELS},) path of the node a reference names"),
    "symbol": (True, "variable id by order of first mention"),
    "p": (True, "(3,) hRoPE paragraph p1, sentence (code: line) p2, token in its sentence p3"),
    "kind": (False, "trees.KIND_* flags (0: none), evaluate.py's per-kind scores"),
    "label": (True, "the node's type, numbered by first appearance in the document"),
    "grid": (True, "(2,) Python statement grid: statement ordinal, token inside it"),
    "chat": (True, "(3,) chat grid: exchange, speaker, token inside its turn"),
    "source": (False, "web_sheets: 0 a web page, 1 a workbook"),
}
STRUCTURAL = tuple(f for f, (structural, _) in FIELDS.items() if structural)


def prepare_command(data_dir):
    """The prepare.py command that writes data_dir (the --data typed, as --out)."""
    root = os.path.dirname(os.path.normpath(data_dir))
    out = f" --out {root}" if os.path.normpath(root) != "data" else ""
    return f"python prepare.py {os.path.basename(os.path.normpath(data_dir))}{out}"


def rebuild(data_dir):
    """What to do about a damaged or missing file of a prepared folder."""
    return f"prepare it again: `{prepare_command(data_dir)} --force` (with its --src, if it had one)"


def load_split(data_dir, split):
    """{field: memory-mapped array} for one split; a damaged array (truncated, or a length that
    disagrees with its record offsets) is one line naming it."""
    out = {}
    for p in glob.glob(os.path.join(data_dir, f"{split}_*.npy")):
        try:
            out[os.path.basename(p)[len(split) + 1:-4]] = np.load(p, mmap_mode="r")
        except (OSError, ValueError) as e:          # "mmap length is greater than file size", a bad header
            sys.exit(f"error: {p} is damaged ({e}); {rebuild(data_dir)}")
    if not out:
        sys.exit(f"error: no prepared data in {data_dir}; run `python prepare.py <corpus>` first")
    s = out.get("doc_start")
    n = int(s[-1]) if s is not None and len(s) else -1
    for k, v in out.items():
        if s is not None and k not in ("doc_start", "record_doc") and len(v) != n:
            sys.exit(f"error: {os.path.join(data_dir, f'{split}_{k}.npy')} holds {len(v):,} entries where "
                     f"{split}_doc_start.npy ends at {n:,}: the folder is damaged; {rebuild(data_dir)}")
    return out


def identity(data_dir, meta):
    """What a run trained on, beyond the tokeniser: the record cut (max_len), each split's record
    count, and a hash of meta.json's settings and counts (source paths and timings aside).
    train.py records it; evaluate.py, sample.py and a resume refuse data that differs."""
    if not {"splits", "tokenizer"} <= set(meta):
        sys.exit(f"error: {os.path.join(data_dir, 'meta.json')} is damaged (it lacks splits or tokenizer); "
                 f"{rebuild(data_dir)}")
    settings = {k: v for k, v in meta["settings"].items() if k not in ("sources", "defaults")}
    counts = {k: meta.get(k) for k in ("documents", "skipped", "splits", "tokens")}
    blob = json.dumps({"settings": settings, **counts}, sort_keys=True).encode()
    return {"tokenizer": fingerprint(data_dir), "max_len": meta["settings"].get("max_len"),
            "records": {s: meta["splits"].get(s, {}).get("records") for s in SPLITS},
            "meta": hashlib.sha256(blob).hexdigest()[:16]}


def identity_differs(recorded, now):
    """What differs between two identities (a run's record and a folder now), as words."""
    if recorded is None:                    # a run from before the identity was recorded: not checked
        return []
    return [f"{k}: {recorded.get(k)} there, {now[k]} now" for k in now if recorded.get(k) != now[k]]


def check_identity(data_dir, meta, recorded, run_dir):
    """Exit with one line where data_dir is not the data the run at run_dir trained on."""
    differ = identity_differs(recorded, identity(data_dir, meta))
    if differ:
        sys.exit(f"error: {data_dir} is not the data {run_dir} trained on ({'; '.join(differ)}); "
                 "pass --data with the data it trained on, or train it again on this data")


def corpus_stats(data_dir):
    """(meta.json, the corpus figures the hRoPE configurations calibrate on: p_max, p1_density,
    p1_period). meta["settings"]["defaults"]: what the corpus's entry in corpora/ asks of
    evaluate.py (attention shares)."""
    path = os.path.join(data_dir, "meta.json")
    if not os.path.exists(path):
        sys.exit(f"error: {data_dir} is not prepared; run `{prepare_command(data_dir)}` first")
    meta = read_json(path, rebuild(data_dir))
    if not isinstance(meta, dict) or not isinstance(meta.get("settings"), dict):
        sys.exit(f"error: {path} is damaged (it holds no settings); {rebuild(data_dir)}")
    if "defaults" not in meta["settings"]:   # the corpus entry's attention shares
        sys.exit(f"error: {data_dir} was prepared by an older prepare.py (meta.json holds no corpus "
                 f"defaults); rerun `python prepare.py {os.path.basename(data_dir)}`: the arrays come out "
                 "the same")
    return meta, {k: meta[k] for k in ("p_max", "p1_density", "p1_period") if k in meta}


# ------------------------------------------------------------------------- tokenizer.json ----
def read_tokenizer(data_dir):
    """(tokenizer.json's bytes, its {pattern, ranks}); a missing or damaged file is one line. The
    tokeniser itself (training it, encoding with it) is tokenizer.py."""
    path = os.path.join(data_dir, "tokenizer.json")
    fix = f"rerun `python prepare.py {os.path.basename(os.path.normpath(data_dir))} --force` (with its --out)"
    try:
        with open(path, "rb") as f:
            raw = f.read()
        saved = json.loads(raw)
        if isinstance(saved, list):           # written before the pattern was saved with the ranks:
            saved = {"pattern": None, "ranks": saved}   # tokenizer.PAT
        ranks = {bytes(t): i for i, t in enumerate(saved["ranks"])}
        return raw, {"pattern": saved["pattern"], "ranks": ranks}
    except OSError as e:
        sys.exit(f"error: cannot read {path} ({e.strerror}); {fix}")
    except (ValueError, TypeError, KeyError) as e:    # truncated, overwritten, or not a list of byte lists
        sys.exit(f"error: {path} is damaged ({type(e).__name__}: {e}); {fix}")


def fingerprint(data_dir):
    """A short hash of the saved ranks and pattern: train.py writes it into config.json, and
    sample.py and evaluate.py refuse a run whose data folder was since re-prepared with another
    tokeniser (its token ids would decode to other text: fluent garbage, not an error)."""
    return hashlib.sha256(read_tokenizer(data_dir)[0]).hexdigest()[:16]


def check_tokenizer(data_dir, trained_with):
    """Exit with one line if data_dir's tokeniser is not the one the run trained with (None: a run
    written before the fingerprint was kept, not checked)."""
    if trained_with is not None and fingerprint(data_dir) != trained_with:
        sys.exit(f"error: {data_dir} was prepared again after this run trained (its tokeniser differs); "
                 f"evaluate or sample with the data it trained on (--data), or retrain")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m treerope.prepared data/<corpus>")
    meta, _ = corpus_stats(sys.argv[1])
    print(f"{sys.argv[1]}: {meta['tokens']:,} tokens in {meta['documents']:,} documents"
          f"{' (SYNTHETIC)' if meta.get('synthetic') else ''}; "
          + ", ".join(f"{s} {v['records']:,} records" for s, v in meta['splits'].items()))
    a = load_split(sys.argv[1], "train")
    for f, (structural, what) in FIELDS.items():
        if f in a:
            print(f"  {f:9s} {str(a[f].dtype):6s} {'structural' if structural else '          '}  {what}")
