"""The data layer: what prepare.py writes and train.py, evaluate.py and analyze.py read.

data/<corpus>/ holds, per split, {split}_{field}.npy (memory-mappable): tokens, doc_start (record
offsets, n_records + 1), record_doc (the document of each record) and the per-token fields of
FIELDS; and meta.json (counts, skips and their reasons, the tokenizer, the corpus's defaults).
Here: that format and its table of fields, the Doc -> per-token fields step (the fields web pages
never have: token_fields.py), atomic writes, checkpoints, Split and packing into micro-batches,
and the coordinate matrix a position configuration reads (rotary.COORDINATES).

    python data.py data/web             # what a prepared folder holds, field by field
"""
import contextlib
import glob
import hashlib
import json
import os
import sys

import numpy as np

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


# ------------------------------------------------------------------------- atomic files ----
@contextlib.contextmanager
def replacing(path):
    """Yield a temporary name beside `path`, then rename it over `path`: a kill never leaves a
    half-written file, and readers see either the old file or the new one."""
    root, ext = os.path.splitext(path)
    tmp = f"{root}.tmp{os.getpid()}{ext}"        # keeps the extension: np.savez appends .npz
    try:
        yield tmp
        os.replace(tmp, path)
    except OSError as e:                         # a full disk (or `ulimit -f`), a folder made read-only
        sys.exit(f"error: cannot write {path} ({e.strerror or e}); free space or choose a folder you can "
                 "write (the file is as it was)")
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def write_json(obj, path):
    with replacing(path) as tmp, open(tmp, "w") as f:
        json.dump(obj, f, indent=1)


def read_json(path, fix):
    """A JSON file's contents, or one line naming the file and what to do about it (`fix`)."""
    try:
        with open(path) as f:
            return json.load(f)
    except OSError as e:
        sys.exit(f"error: cannot read {path} ({e.strerror}); {fix}")
    except ValueError as e:                     # not JSON (truncated, overwritten) or not UTF-8
        sys.exit(f"error: {path} is damaged (not JSON: {e}); {fix}")


def writable(folder, fix):
    """Make `folder` and check that a file can be written in it, before any work is done there."""
    try:
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, f".write_test{os.getpid()}"), "w") as f:
            f.write("ok")
        os.remove(f.name)
    except OSError as e:
        sys.exit(f"error: cannot write in {folder} ({e.strerror}); {fix}")


def _digest(obj, h):
    """Feed every tensor's bytes and every other value's repr, in order, to the hash h."""
    import torch
    if torch.is_tensor(obj):
        h.update(f"{obj.dtype}{tuple(obj.shape)}".encode())
        h.update(obj.detach().reshape(-1).contiguous().view(torch.uint8).cpu().numpy().tobytes())
    elif isinstance(obj, dict):
        for k, v in obj.items():
            h.update(repr(k).encode())
            _digest(v, h)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            _digest(v, h)
    else:
        h.update(repr(obj).encode())


def checksum(state):
    """SHA-256 of a checkpoint's contents (weights, optimizer, step, log, settings)."""
    h = hashlib.sha256()
    _digest({k: v for k, v in state.items() if k != "checksum"}, h)
    return h.hexdigest()


def save_checkpoint(state, path):
    """ckpt.pt, replaced atomically, carrying the checksum load_checkpoint verifies."""
    # torch only where a tensor is made: prepare.py reads this file without it
    import torch
    with replacing(path) as tmp:
        try:
            torch.save({**state, "checksum": checksum(state)}, tmp)
        except RuntimeError:                     # torch reports a failed write (a full disk) as this
            raise OSError("the write failed: is the disk full, or a file size limit set?") from None


def load_checkpoint(path, device):
    """A checkpoint, verified against its checksum: a damaged file is one line, never weights."""
    import pickle
    import zipfile

    import torch
    fix = "it is damaged: train the run again (train.py ... --resume=0), or restore the file"
    if not os.path.exists(path):
        sys.exit(f"error: no checkpoint at {path}; train it first (python train.py ...)")
    try:
        ck = torch.load(path, map_location=device, weights_only=False)
    except (RuntimeError, EOFError, OSError, ValueError, KeyError, pickle.UnpicklingError,
            zipfile.BadZipFile) as e:
        sys.exit(f"error: cannot load {path} ({type(e).__name__}); {fix}")
    if not isinstance(ck, dict) or not {"model", "run", "config"} <= set(ck):
        sys.exit(f"error: {path} is not a train.py checkpoint; {fix}")
    if "checksum" in ck and checksum(ck) != ck["checksum"]:   # none: written before checksums were kept
        sys.exit(f"error: {path} does not match its checksum; {fix}")
    return ck


@contextlib.contextmanager
def owned(path, what):
    """Hold `path` + ".lock" (holding our pid) while `what` is written: a second writer is refused in
    one line; a lock left by a dead process is taken over."""
    lock = path.rstrip("/") + ".lock"
    writable(os.path.dirname(lock) or ".", "choose a folder you can write")   # a file in the way, read-only
    for _ in range(2):
        try:
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            break
        except FileExistsError:   # another writer's, or a dead one's (locks.py)
            from locks import refuse_or_take_over
            refuse_or_take_over(lock, what, path)
    else:
        sys.exit(f"error: could not take the lock {lock}")
    os.write(fd, str(os.getpid()).encode())
    os.close(fd)
    try:
        yield
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.remove(lock)


# ---------------------------------------------------------------------- doc -> token fields ----
# Doc fields web pages never have: token_fields.py makes their per-token fields
BEYOND_WEB = ("copied_from", "ref", "ref_path", "symbol", "stmt", "char_p", "char_chat")


def token_coords(doc, ids, tok_len, node_coords=None):
    """Per-token coordinates of one Doc (`node_coords`: doc.node_coords() where the caller has it).
    A token belongs to the node of its first byte that has a node (for web text: its first non-space
    byte; sheets: separators belong to no node)."""
    node, char, byte_char, end = _token_nodes(doc, ids, tok_len)
    n = len(ids)
    depth_n, path_n = node_coords or doc.node_coords()
    out = {"pos": np.arange(n, dtype=np.int32)}
    out["path"] = np.where(node[:, None] >= 0, path_n[node], -1)
    out["depth"] = np.where(node >= 0, depth_n[node], 0).astype(np.int32)
    # within-node index: how many earlier tokens the same node has (node -1: absent)
    out["within"] = np.where(node >= 0, index_in_group(node), -1).astype(np.int32)
    out["kind"] = doc.char_kind[char] if doc.char_kind is not None else np.zeros(n, np.uint8)
    if doc.label is not None:
        out["label"] = np.where(node >= 0, doc.label[node], -1).astype(np.int32)
    if doc.source >= 0 or any(getattr(doc, f) is not None for f in BEYOND_WEB):
        from token_fields import beyond_web  # sheets, Python, the paragraph corpora, chat
        out.update(beyond_web(doc, out["kind"], node, char, byte_char, end, path_n))
    out["node"] = node
    return out


def _token_nodes(doc, ids, tok_len):
    """(node, char, byte_char, end): per token its node (-1: none), the character that decides
    it and the byte after it; byte_char: the character of each byte of the text."""
    b = doc.text.encode("utf-8")
    if len(b) == len(doc.text):
        byte_char = np.arange(len(b))
    else:                                          # map bytes to characters
        byte_char = np.cumsum((np.frombuffer(b, np.uint8) & 0xC0) != 0x80) - 1
    byte_node = doc.char_node[byte_char]
    lens = tok_len[ids]
    end = np.cumsum(lens)
    start = end - lens
    idx = np.where(byte_node >= 0, np.arange(len(b)), len(b))
    nxt = np.minimum.accumulate(idx[::-1])[::-1]
    first = nxt[start]
    has = first < end
    at = np.minimum(np.where(has, first, start), len(b) - 1)
    return np.where(has, byte_node[at], -1), byte_char[at], byte_char, end


def index_in_group(keys):
    """Per entry of keys (n,), how many earlier entries have the same key."""
    n = len(keys)
    order = np.argsort(keys, kind="stable")
    sk = keys[order]
    starts = np.r_[0, np.flatnonzero(sk[1:] != sk[:-1]) + 1]
    out = np.empty(n, np.int64)
    out[order] = np.arange(n) - np.repeat(starts, np.diff(np.r_[starts, n]))
    return out


# ------------------------------------------------------------------------------- on disk ----
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
    import tokenizer
    if not {"splits", "tokenizer"} <= set(meta):
        sys.exit(f"error: {os.path.join(data_dir, 'meta.json')} is damaged (it lacks splits or tokenizer); "
                 f"{rebuild(data_dir)}")
    settings = {k: v for k, v in meta["settings"].items() if k not in ("sources", "defaults")}
    counts = {k: meta.get(k) for k in ("documents", "skipped", "splits", "tokens")}
    blob = json.dumps({"settings": settings, **counts}, sort_keys=True).encode()
    return {"tokenizer": tokenizer.fingerprint(data_dir), "max_len": meta["settings"].get("max_len"),
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
    train.py (preset on CUDA, recipe) and evaluate.py (attention shares)."""
    path = os.path.join(data_dir, "meta.json")
    if not os.path.exists(path):
        sys.exit(f"error: {data_dir} is not prepared; run `{prepare_command(data_dir)}` first")
    meta = read_json(path, rebuild(data_dir))
    if not isinstance(meta, dict) or not isinstance(meta.get("settings"), dict):
        sys.exit(f"error: {path} is damaged (it holds no settings); {rebuild(data_dir)}")
    if "defaults" not in meta["settings"]:   # the corpus entry's preset, recipe, attention shares
        sys.exit(f"error: {data_dir} was prepared by an older prepare.py (meta.json holds no run defaults); "
                 f"rerun `python prepare.py {os.path.basename(data_dir)}`: the arrays come out the same")
    return meta, {k: meta[k] for k in ("p_max", "p1_density", "p1_period") if k in meta}


# ------------------------------------------------------------------------------- batches ----
class Split:
    """Records of one split, memory-mapped; hands out padded micro-batches as tensors."""

    def __init__(self, data_dir, split, max_len, vocab=None):
        self.a = load_split(data_dir, split)
        for k in ("doc_start", "tokens"):
            if k not in self.a:
                sys.exit(f"error: {os.path.join(data_dir, f'{split}_{k}.npy')} is missing; "
                         f"{rebuild(data_dir)}")
        top = int(np.max(self.a["tokens"], initial=0)) if vocab is not None else -1
        if top >= (vocab or 0):                                # the embedding would fail mid-run
            sys.exit(f"error: {data_dir}/{split}_tokens.npy holds token id {top:,}, past the model's "
                     f"{vocab:,} entries: the data is damaged or not this run's; {rebuild(data_dir)}")
        s = self.a["doc_start"]
        self.start = np.asarray(s[:-1])
        self.len = np.minimum(np.diff(s), max_len)
        keep = self.len >= 2                               # a record needs a next token
        self.start, self.len = self.start[keep], self.len[keep]

    def __len__(self):
        return len(self.len)

    def batch(self, rows, device, T=None):
        """Tensors for one micro-batch: a row per entry of `rows`, each a record or a list of records
        packed into one row (train.py --pack), padded to T (default: the longest row). Targets are
        next tokens inside each record (padding and a record's last token carry none); a packed batch
        adds `segment`, the record a token is in (-1: padding), from which the model confines
        attention to each record. The rows are gathered on the device, the split moved there once."""
        rows = [np.atleast_1d(np.asarray(r, np.int64)) for r in rows]
        at, seg = self.positions(rows, T or max(int(self.len[r].sum()) for r in rows))
        import torch
        b = self.gather(torch.from_numpy(at).to(device), torch.from_numpy(seg).to(device))
        segment = b.pop("seg")
        if any(len(r) > 1 for r in rows):
            b["segment"] = segment
        return b

    def positions(self, rows, T):
        """(R, T) flat positions of each row's records laid end to end (-1: padding), and (R, T) the
        index of a token's record in its row (-1: padding)."""
        at, seg = np.full((len(rows), T), -1, np.int64), np.full((len(rows), T), -1, np.int64)
        recs = [np.atleast_1d(row).astype(np.int64) for row in rows]   # index arithmetic, no loop per token
        counts = np.array([len(r) for r in recs], np.int64)
        ids = np.concatenate(recs or [np.zeros(0, np.int64)])
        row = np.repeat(np.arange(len(rows)), counts)             # each record's row
        k = np.arange(len(ids)) - np.repeat(np.cumsum(counts) - counts, counts)   # its index in the row
        n = self.len[ids].astype(np.int64)
        before = np.cumsum(n) - n                                 # tokens before it, all rows end to end
        row_tokens = np.bincount(row, weights=n, minlength=len(rows)).astype(np.int64)
        offset = before - (np.cumsum(row_tokens) - row_tokens)[row]   # where it starts in its row
        within = np.arange(n.sum()) - np.repeat(before, n)        # a token's place in its record
        r, col = np.repeat(row, n), np.repeat(offset, n) + within
        at[r, col], seg[r, col] = np.repeat(self.start[ids], n) + within, np.repeat(k, n)
        return at, seg

    def gather(self, at, seg):
        """The batch at positions `at` (..., T) on the device (`seg` as positions gives it), every
        field as on disk (-1, kind 0, where padding); `seg` stays in the dict for the caller."""
        import torch
        if getattr(self, "device", None) != at.device:   # the split moves to the device once
            self.device = at.device
            self.flat = {f: torch.from_numpy(np.array(self.a[f], np.int32 if f == "tokens" else None))
                         .to(at.device) for f in ("tokens", *FIELDS) if f in self.a}
        valid = at >= 0
        has_next = valid & (torch.cat([seg[..., 1:], torch.full_like(seg[..., :1], -1)], -1) == seg)
        p = at.clamp(min=0)
        tokens = self.flat["tokens"]
        b = {"tokens": torch.where(valid, tokens[p].long(), 0),
             "targets": torch.where(has_next, tokens[(p + 1).clamp(max=len(tokens) - 1)].long(), -1),
             "seg": seg}
        for f in FIELDS:
            if f in self.flat:
                v = self.flat[f][p].long()
                b[f] = torch.where(valid.view(valid.shape + (1,) * (v.dim() - valid.dim())), v,
                                   0 if f == "kind" else -1)
        return b


def context_note(whole, context, what, verb, corpus):
    """The note where records (their whole lengths) are longer than the model's context: only
    their first `context` tokens are read (None where none is)."""
    long = whole > context
    if not long.any():
        return None
    unseen = 1 - np.minimum(whole, context).sum() / whole.sum()
    return (f"note: {long.mean():.0%} of the {what} records are longer than the context ({context:,}): "
            f"only their first {context:,} tokens {verb}, {unseen:.0%} of the split's tokens never "
            f"(prepare.py {corpus} --max_len {context})")


def record_docs(split, ids):
    """The document each record came from (records of one document share it); the record
    itself where the data predates that field."""
    if "record_doc" in split.a:
        kept = np.diff(np.asarray(split.a["doc_start"])) >= 2            # as Split keeps them
        return np.asarray(split.a["record_doc"])[kept][ids]
    return np.asarray(ids)


def pack(lengths, budget):
    """Group records (sorted by length) into micro-batches of at most `budget` padded tokens.
    Returns lists of positions into `lengths`; no record is split."""
    order = np.argsort(lengths, kind="stable")
    groups, cur, longest = [], [], 0
    for i in order:
        L = int(lengths[i])
        if cur and max(longest, L) * (len(cur) + 1) > budget:
            groups.append(cur)
            cur, longest = [], 0
        cur.append(int(i))
        longest = max(longest, L)
    if cur:
        groups.append(cur)
    return groups


# computed from batch["depth"]: what depth dropout hides
DEPTH_READERS = {"depth", "rank", "owndepth", "shared1", "depth_label"}


def coords_for(model, b, corpus, generator=None, depth_dropout=0.0):
    """The coordinate matrix for a micro-batch, with the hRoPE control inputs and depth dropout."""
    if "p1_density" in corpus:
        b["p1_density"] = corpus["p1_density"]
        b["p1_period"] = corpus["p1_period"]
    # depth withheld on a random fraction of rows (records; with --pack, blocks); a configuration
    # that reads no depth draws nothing
    if depth_dropout > 0 and "depth" in b and DEPTH_READERS & set(model.rotary.names):
        import torch
        drop = torch.rand(b["depth"].shape[0], generator=generator, device=b["depth"].device) < depth_dropout
        b["depth"] = torch.where(drop[:, None], torch.full_like(b["depth"], -1), b["depth"])
    return model.rotary.coords(b, generator)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python data.py data/<corpus>")
    meta, _ = corpus_stats(sys.argv[1])
    print(f"{sys.argv[1]}: {meta['tokens']:,} tokens in {meta['documents']:,} documents"
          f"{' (SYNTHETIC)' if meta.get('synthetic') else ''}; "
          + ", ".join(f"{s} {v['records']:,} records" for s, v in meta['splits'].items()))
    a = load_split(sys.argv[1], "train")
    for f, (structural, what) in FIELDS.items():
        if f in a:
            print(f"  {f:9s} {str(a[f].dtype):6s} {'structural' if structural else '          '}  {what}")
