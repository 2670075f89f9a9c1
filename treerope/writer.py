"""Writing a prepared folder (prepared.py's format): each split's records appended a chunk at a time
(SplitWriter), what is already there (an output overlapping a --src, staging folders a killed run
left, a folder that is up to date) and the figures meta.json adds for what web pages never hold:
nodes wider than the web limit, notes, explicit reference targets, the tokens reference rotation moves
(appendix §4: 20.6% on Python) and a corpus's record statistics (paper 004: p1). Numpy only.
"""
import glob
import json
import os
import re
import shutil
import sys
from collections import defaultdict

import numpy as np

import trees
from treerope.files import alive
from treerope.prepared import SPLITS, load_split


class SplitWriter:
    """One split's records, appended a chunk at a time (add) to scratch files and written as .npy
    files at close: the arrays grow on disk, memory holds one chunk. A field takes the dtype of the
    first record that has it (-1 where a record lacks it: web pages beside workbooks); path and
    ref_path are int16 unless a value needs int32 (wide sheets), tokens uint16 unless an id needs uint32."""
    WIDE = {"path": (np.int32, np.int16), "ref_path": (np.int32, np.int16), "tokens": (np.uint32, np.uint16)}

    def __init__(self, out_dir, split):
        self.out_dir, self.split = out_dir, split
        self.lens, self.docs, self.n = [], [], 0
        self.fields, self.top = {}, {}   # field -> (scratch file, its dtype as read, as stored, row shape)

    def add(self, recs):
        for r in recs:
            for k, v in r.items():
                if k not in self.fields and k not in ("node", "doc"):
                    self._open(k, v)
        if not recs:
            return
        for k, (f, dtype, stored, shape) in self.fields.items():
            a = np.concatenate([r[k] if k in r else np.full((len(r["pos"]),) + shape, -1, dtype)
                                for r in recs])
            if a.dtype != dtype:   # records disagree: an np.concatenate of the whole split would promote
                raise TypeError(f"{self.split}_{k}: records of dtypes {dtype} and {a.dtype}")
            if k in self.WIDE:
                self.top[k] = max(self.top.get(k, 0), int(a.max(initial=0)))
                if self.top[k] > np.iinfo(stored).max:
                    raise OverflowError(f"{self.split}_{k}: a value over {np.iinfo(stored).max}")
            f.write(a.astype(stored).tobytes())
        self.lens.append(np.array([len(r["pos"]) for r in recs], np.int64))
        self.docs.append(np.array([r["doc"] for r in recs], np.int64))
        self.n += int(self.lens[-1].sum())

    def _open(self, k, like):
        stored = self.WIDE[k][0] if k in self.WIDE else like.dtype
        f = open(os.path.join(self.out_dir, f"{self.split}_{k}.part"), "w+b")
        self.fields[k] = (f, like.dtype, np.dtype(stored), like.shape[1:])
        for at in range(0, self.n, 1 << 20):      # the records before the first that has it: -1
            f.write(np.full((min(1 << 20, self.n - at),) + like.shape[1:], -1, stored).tobytes())

    def close(self):
        """Write the .npy files, remove the scratch files: (records, tokens)."""
        lens = np.concatenate(self.lens) if self.lens else np.zeros(0, np.int64)
        self._save("doc_start", np.r_[0, np.cumsum(lens)].astype(np.int64))
        self._save("record_doc", np.concatenate(self.docs) if self.docs else np.array([], np.int64))
        if not self.fields:   # an empty split stays loadable
            self._save("tokens", np.zeros(0, np.uint16))
            self._save("pos", np.zeros(0, np.int64))
        for k, (f, dtype, stored, shape) in self.fields.items():
            final = dtype
            if k in self.WIDE:
                final = self.WIDE[k][1] if self.top.get(k, 0) <= np.iinfo(self.WIDE[k][1]).max else stored
            self._copy(f, stored, np.dtype(final), k, shape)
        return len(lens), self.n

    def _save(self, k, a):
        np.save(os.path.join(self.out_dir, f"{self.split}_{k}.npy"), a)

    def _copy(self, f, stored, final, k, shape):
        """A scratch file into {split}_{k}.npy, converted to `final` a block at a time."""
        f.flush()
        f.seek(0)
        row = int(np.prod(shape, dtype=np.int64)) * stored.itemsize
        with open(os.path.join(self.out_dir, f"{self.split}_{k}.npy"), "wb") as out:
            np.lib.format.write_array_header_1_0(out, {"descr": np.lib.format.dtype_to_descr(final),
                                                       "fortran_order": False, "shape": (self.n, *shape)})
            while block := f.read(max(row, 1) * (1 << 18)):
                out.write(np.frombuffer(block, stored).astype(final).tobytes())
        f.close()
        os.remove(f.name)


# ---------------------------------------------------------------- what is already there ----
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


# ------------------------------------------------------------------ meta.json's figures ----
def reference_counts(path, ref_path, starts):
    """Reference counts over per-token fields (appendix §5): path and ref_path (tokens, 22), -1 absent,
    and the indices where records start. A reference is a run of tokens of one node (one path, one
    target) inside a record; a token is affected where reference rotation changes a level (one both
    have that differs: rotary._refpath); whole-path overwrite gives a use its target's path length."""
    path, ref = np.asarray(path), np.asarray(ref_path)
    is_ref = (ref >= 0).any(1)
    new = np.ones(len(path), bool)
    new[1:] = (path[1:] != path[:-1]).any(1) | (ref[1:] != ref[:-1]).any(1)
    new[starts] = True
    first = np.flatnonzero(new & is_ref)
    P, R = path[first], ref[first]
    lost = (P >= 0).sum(1) - (R >= 0).sum(1)
    return {"tokens": len(path), "reference_tokens": int(is_ref.sum()),
            "affected": int(((ref >= 0) & (path >= 0) & (ref != path)).any(1).sum()),
            "references": len(first), "other_level1": int(((R[:, 0] >= 0) & (R[:, 0] != P[:, 0])).sum()),
            "shorter": int((lost > 0).sum()), "lost_shorter": int(lost[lost > 0].sum()),
            "lost": int(lost.sum())}


def reference_stats(data_dir, chunk=4096):
    """reference_counts summed over a prepared corpus's splits, `chunk` records at a time."""
    total = defaultdict(int)
    for split in SPLITS:
        if not os.path.exists(os.path.join(data_dir, f"{split}_ref_path.npy")):
            continue
        a = load_split(data_dir, split)
        starts, n = a["doc_start"], len(a["doc_start"]) - 1      # record k: starts[k]:starts[k + 1]
        for lo in range(0, n, chunk):
            hi = min(lo + chunk, n)
            s, e = starts[lo], starts[hi]
            for k, v in reference_counts(a["path"][s:e], a["ref_path"][s:e], starts[lo:hi] - s).items():
                total[k] += v
    if not total:
        raise SystemExit(f"error: {data_dir} holds no reference targets (prepare.py python or sheets)")
    return total


def reference_tally(held):
    """Tokens that reference rotation moves (appendix §4: 20.6% on Python): reference_counts."""
    path, ref = (np.concatenate([r[k] for r in held]) for k in ("path", "ref_path"))
    c = reference_counts(path, ref, np.cumsum([0] + [len(r["path"]) for r in held[:-1]]))
    return {"held": 1, "affected": c["affected"], "reference_tokens": c["tokens"]}


def meta_beyond_web(t, entry):
    """meta.json's entries for the figures above that the merged tally t holds, in meta.json's order."""
    meta = {}
    if "wide" in t:   # web pages this wide are skipped: kept here, and said (the paper drops none on Python)
        meta["wider_than_web_limit"] = {"documents": t["wide"],
                                        "widest": {"file": t["widest_max"][1], "rank": t["widest_max"][0]}}
    if t["notes"]:
        meta["notes"] = dict(t["notes"])
    if "references" in t:   # explicit reference targets (workbooks)
        meta["references"] = t["references"]
    if "held" in t:
        meta["reference_token_share"] = t["affected"] / max(t["reference_tokens"], 1)
    if entry.record_stats and "record_tally" in t:
        meta.update(entry.record_stats(t["record_tally"]), p1_cap=t["p1_cap"])
    return meta


def wide_note(w):
    """prepare.py's line on meta.json's wider_than_web_limit."""
    return (f"note: {w['documents']} document(s) have nodes with more than {trees.MAX_WIDTH} siblings "
            f"(kept; web pages that wide are skipped): the widest {w['widest']['file']}, "
            f"rank {w['widest']['rank']:,}")
