"""What prepare.py does about what is already there: an output folder that overlaps a --src folder
(refused), staging folders a killed prepare.py left (removed), and a prepared folder that may be up
to date (a damaged or truncated one is rebuilt). prepare.py imports it only where there is such a
thing to look at: a --src given, a staging folder, a meta.json.
"""
import glob
import json
import os
import re
import shutil
import sys

import numpy as np

from data import SPLITS


def refuse_overlap(out_dir, srcs):
    """One line before anything is written where the output is, holds or lies inside a --src folder:
    writing replaces out_dir (its sources with it) and a source folder holding it reads its outputs."""
    out = os.path.realpath(out_dir)
    for src in srcs or ():
        real = os.path.realpath(src)
        common = os.path.commonpath([out, real])
        if common in (out, real):
            how = "is" if out == real else "lies inside" if common == real else "holds"
            sys.exit(f"error: the output folder {out_dir} {how} the source {src}: preparing would replace or "
                     "read its own files; pass --out elsewhere")


def remove_stale_staging(out_dir):
    """Remove staging folders (<corpus>.tmp<pid>) that a killed prepare.py left: their process is gone."""
    for path in glob.glob(glob.escape(out_dir) + ".tmp*"):
        pid = re.fullmatch(r"\.tmp(\d+)", path[len(out_dir):])
        if pid and os.path.isdir(path) and not alive(int(pid[1])):
            shutil.rmtree(path, ignore_errors=True)
            print(f"note: removed {path}, left by process {pid[1]} (no longer running)")


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:   # another user's
        pass
    return True


def up_to_date(out_dir, settings):
    """meta.json has these settings and every array the length meta.json counts (a damaged meta.json or
    a truncated array: rebuilt)."""
    meta_path = os.path.join(out_dir, "meta.json")
    if not os.path.exists(meta_path):
        return False
    try:
        with open(meta_path) as f:
            meta = json.load(f)
        if meta.get("settings") != settings or not os.path.exists(os.path.join(out_dir, "tokenizer.json")):
            return False
        return all(arrays_complete(out_dir, s, meta["splits"][s]) for s in SPLITS)
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        print(f"note: {out_dir} is damaged ({type(e).__name__}): rebuilding it")
        return False


def arrays_complete(out_dir, split, counts):
    """Every {split}_*.npy as long as meta.json's counts: records + 1 offsets, a document per record,
    one row per token."""
    want = {"doc_start": counts["records"] + 1, "record_doc": counts["records"]}
    found = {os.path.basename(p)[len(split) + 1:-4]: p
             for p in glob.glob(os.path.join(out_dir, f"{split}_*.npy"))}
    if not {"tokens", "doc_start", "record_doc"} <= set(found):
        return False
    for field, path in found.items():
        a = np.load(path, mmap_mode="r")   # a truncated file: ValueError
        if len(a) != want.get(field, counts["tokens"]):
            return False
    return int(np.load(found["doc_start"], mmap_mode="r")[-1]) == counts["tokens"]
