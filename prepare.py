"""Corpora -> tokens + per-token coordinates on disk.

    python prepare.py python            # CPython standard library (real code)
    python prepare.py web               # real HTML documentation found on this machine
    python prepare.py chat              # real conversations (the chitchat_dataset package)
    python prepare.py python --src DIR  # any folder(s) of .py files
    python prepare.py --setting web_pages   # a paper's setting by name: its corpus and flags

Writes data/<corpus>/{train,val,test}_<field>.npy (memory-mappable) and meta.json in the format
treerope/prepared.py holds: token ids, record offsets (doc_start), each record's document (record_doc)
and the per-token fields of prepared.FIELDS (pos, path, depth, within, ref_path, symbol, kind, p, ...).
Nothing is downloaded: the tokeniser (treerope/tokenizer.py) is a byte-level BPE that rustbpe trains
here on the training split and tiktoken runs.
"""
import argparse
import collections
import contextlib
import errno
import functools
import glob
import hashlib
import importlib
import json
import os
import resource
import shutil
import sys
import time

import numpy as np
from tqdm import tqdm

import trees
from treerope import tokenizer
from treerope.corpora import worker_pool
from treerope.fields import restart, token_coords
from treerope.files import owned
from treerope.prepared import SPLITS
from treerope.settings import CORPORA, PREPARE, SETTINGS, Parser, preparation
from treerope.writer import (
    SplitWriter,
    meta_beyond_web,
    reference_tally,
    refuse_overlap,
    remove_stale_staging,
    up_to_date,
    wide_note,
)


# ------------------------------------------------------------------ token coords -> records ----
def records(coords, max_len, long_docs, boundary, p1_cap=None, restart_level1=False):
    """Cut one document's token coordinates into training records of at most max_len tokens.
    long_docs: 'crop' keeps the first max_len tokens, 'drop' drops the document, 'split' cuts
    at allowed boundaries (Python: a top-level statement; prose/code: a paragraph or block;
    web: a text block; sheets: a row), cutting at max_len where no boundary falls inside.
    pos restarts at 0 in every record, and with restart_level1 (Python `--units record`) so do
    the level-1 sibling ranks: the record's first top-level statement has rank 0, and a reference
    whose target lies before the record loses its level-1 target. hRoPE's p1 stays counted in the
    document, clipped at p1_cap (App. C.1 caps blocks per file, a frame records never reach)."""
    n = len(coords["pos"])
    if n <= max_len:
        cuts = [(0, n)]
    elif long_docs == "drop":
        return []
    elif long_docs == "crop":
        cuts = [(0, max_len)]
    else:
        cuts, s = [], 0
        allowed = np.flatnonzero(boundary)
        while s < n:
            e = min(n, s + max_len)
            inside = allowed[(allowed > s) & (allowed < e)] if e < n else []
            if len(inside):
                e = int(inside[-1])
            cuts.append((s, e))
            s = e
    out = []
    for s, e in cuts:
        r = {k: v[s:e] for k, v in coords.items()}
        r["pos"] = np.arange(e - s, dtype=np.int32)
        level1 = restart_level1 and e > s
        if level1 or "p" in r:   # Python --units record, hRoPE's p: restarted in each record
            restart(r, level1, p1_cap)
        out.append(r)
    return out


def record_rank_stats(recs):
    """Sibling ranks as the model sees them: each node of each record once, its rank at its own
    level (record rebasing included). {p99, max}, for comparison with the paper's 7 / 151."""
    return rank_summary(record_rank_counts(recs))


def record_rank_counts(recs):
    """record_rank_stats' ranks counted by value: chunks' counts add."""
    c = collections.Counter()
    for r in recs:
        node, first = np.unique(r["node"], return_index=True)
        first = first[node >= 0]
        c.update(value_counts(r["path"][first, np.minimum(r["depth"][first], trees.LEVELS) - 1]))
    return c


def value_counts(a):
    v, n = np.unique(a, return_counts=True)
    return collections.Counter(dict(zip(v.tolist(), n.tolist())))


def rank_summary(counts):
    """{p99, max} of counted ranks (none counted: 0)."""
    counts = counts or {0: 1}
    return {"p99": percentile_of_counts(counts, 99), "max": int(max(counts))}


def percentile_of_counts(counts, q):
    """np.percentile(values, q) (its linear method, float for float) from {value: count}: the rank
    statistics of a corpus without every rank in memory."""
    values = sorted(counts)
    ends = np.cumsum([counts[v] for v in values])
    n = int(ends[-1])
    virtual = (n - 1) * (np.float64(q) / 100)           # numpy's virtual index for "linear"
    def at(i):
        return values[int(np.searchsorted(ends, i, side="right"))]
    if virtual >= n - 1:
        return float(at(n - 1))
    lo = int(np.floor(virtual))
    a, b, t = at(lo), at(lo + 1), virtual - lo
    return float(b - (b - a) * (1 - t) if t >= 0.5 else a + (b - a) * t)   # numpy's _lerp


# ------------------------------------------------------------------------------ splits ----
def corpus(name):
    """The entry of corpus `name`, from the one module of treerope/corpora/ that holds it."""
    return importlib.import_module(CORPORA[name], "treerope.corpora").CORPORA[name]


def split_of(name):
    """Deterministic split by document name: 90% train, 5% val, 5% test."""
    name = name.split("::")[0]                     # a small program goes where its module goes
    h = int(hashlib.sha1(name.encode("utf-8", "surrogatepass")).hexdigest(), 16) % 100
    return "train" if h < 90 else "val" if h < 95 else "test"


def package(name):
    """The package a document comes from: its first folder (below the source's index, for programs)."""
    parts = name.split("::")[0].split("/")
    return "/".join(parts[:2 if parts[0].isdigit() else 1]) if len(parts) > 1 else name


def contiguous_split(names):
    """`prepare.py --split contiguous` (the python setting). Appendix §2 on Python: "The splits are
    contiguous record ranges over an unshuffled corpus":
    the first 90% train, then 5% val, 5% test (the proportions are ours). Our reading of the order:
    round-robin over packages, each in its sources' order, so no split is one package."""
    by = collections.defaultdict(list)
    for name in names:
        by[package(name)].append(name)
    queues = list(by.values())
    order = [q[i] for i in range(max(map(len, queues), default=0)) for q in queues if i < len(q)]
    n = len(order)
    return {name: "train" if i < 0.9 * n else "val" if i < 0.95 * n else "test"
            for i, name in enumerate(order)}


def split_packages(split):
    """meta.json's split_packages: how many packages each split holds."""
    return {s: len({package(n) for n, v in split.items() if v == s}) for s in SPLITS}


def _digest(src):
    """A source's content for the settings hash: an edit that keeps a file's size still rebuilds."""
    h = hashlib.sha1()
    if not isinstance(src, str):
        h.update(src if isinstance(src, bytes) else repr(src).encode("utf-8", "surrogatepass"))
        return h.hexdigest()
    try:
        with open(src, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
    except OSError:
        return "unreadable"   # counted as a skip when built
    return h.hexdigest()


# ------------------------------------------------------------------------------- driver ----
def main(argv=None):
    """Resolve the flags, build the documents, train the BPE, cut the records, write them."""
    args, setting = parse(argv)
    out_dir = os.path.join(args.out, args.corpus)
    if args.src:   # an output folder that is, holds or lies in a source is refused
        refuse_overlap(out_dir, args.src)
    entry = corpus(args.corpus)
    items, dirs = entry.sources(args)
    settings = data_settings(args, entry, items, dirs, setting)
    try:
        with owned(out_dir, "the prepared data"):
            staging = glob.glob(glob.escape(out_dir) + ".tmp*")
            if staging or os.path.exists(os.path.join(out_dir, "meta.json")):   # an earlier run's folders
                remove_stale_staging(out_dir)
                if not args.force and up_to_date(out_dir, settings):
                    print(f"{out_dir} is up to date (use --force to rebuild)")
                    return out_dir
            meta = prepared(args, entry, items, dirs, settings, out_dir)
    except OSError as e:   # a read-only folder, a full disk, a file size limit: one line
        full = e.errno in (errno.ENOSPC, errno.EFBIG, errno.EDQUOT, None)   # None: numpy's short write
        todo = "free space or raise the file size limit" if full else "pass a writable --out"
        sys.exit(f"error: cannot write {e.filename or out_dir}: {e.strerror or e}; {todo} "
                 "(the prepared folder is as it was)")
    report(meta)
    return out_dir


def prepared(args, entry, items, dirs, settings, out_dir):
    """Build the documents, train the BPE, encode, cut the records and write them a chunk at a time
    into a staging folder, renamed over out_dir at the end: meta."""
    seconds, t0 = {}, time.time()
    tmp = out_dir + f".tmp{os.getpid()}"   # private to this process; a killed run's goes next time
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    try:
        texts, ids = Spool(os.path.join(tmp, "texts.part")), Spool(os.path.join(tmp, "ids.part"))
        with timed(seconds, "trees"):
            docs, skipped = documents(args, entry, items, dirs, texts)
        if args.split == "contiguous":   # appendix §2 on Python: ranges in source order
            split = contiguous_split([d.name for d in docs])
        else:
            split = {d.name: split_of(d.name) for d in docs}
        with timed(seconds, "bpe_train"):
            train = (texts.text(d.text) for d in docs if split[d.name] == "train")
            ranks = tokenizer.train(train, args.vocab, args.bpe_bytes, entry.pattern)
            enc = tokenizer.encoding(ranks, entry.pattern)
        if enc.n_vocab < args.vocab:   # too little training text for the entries asked
            print(f"note: the BPE stopped at {enc.n_vocab:,} entries of the {args.vocab:,} asked (--vocab): "
                  "the training split has too little text; meta.json records both")
        with timed(seconds, "tiktoken_encode"):
            docs = encode(args, entry, enc, docs, texts, ids, skipped, dirs)
        split = {d.name: split[d.name] for d in docs}
        with timed(seconds, "coordinates"):
            tally = cut(args, entry, items, docs, ids, split, tokenizer.token_lengths(enc), tmp)
        texts.close()
        ids.close()
        meta = describe(args, settings, docs, skipped, tally, enc, split, seconds, t0)
        tokenizer.save(ranks, os.path.join(tmp, "tokenizer.json"), entry.pattern)
        with open(os.path.join(tmp, "meta.json"), "w") as f:
            json.dump(meta, f, indent=1)
        shutil.rmtree(out_dir, ignore_errors=True)
        os.replace(tmp, out_dir)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return meta


# prepare.py's flags for every corpus; any other is a corpus's own (Corpus.options, Corpus.reads)
COMMON = ("corpus", "setting", "src", "out", "vocab", "max_len", "long", "split", "bpe_bytes", "workers",
          "chunk_tokens", "force")


def parse(argv):
    """(flags, the setting recorded in meta.json or None): a setting's flags fill those not given."""
    ap = Parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("corpus", nargs="?", choices=sorted(CORPORA), help="implied by --setting")
    ap.add_argument("--setting", help="a paper's setting (treerope/settings.py): its corpus and the flags "
                    "below; flags given override them (meta.json then records no setting)")
    ap.add_argument("--src", action="append", help="source folder or file (repeatable)")
    ap.add_argument("--out", default="data", help="the data root: <out>/<corpus>/ (default: data)")
    # the flags that shape the data default to None here: settings.PREPARE, or the setting's, fill them
    ap.add_argument("--vocab", type=int, help=f"BPE entries (paper: 32,768; default {PREPARE['vocab']:,})")
    ap.add_argument("--max_len", type=int, help=f"longest record in tokens (default {PREPARE['max_len']}, "
                    "the default context)")
    ap.add_argument("--long", choices=("split", "crop", "drop"),
                    help="longer documents: split at statement/block boundaries (default), crop, or drop")
    ap.add_argument("--split", choices=("hash", "contiguous"),
                    help="90/5/5 by a hash of the name (default) or in source order (the paper's Python)")
    ap.add_argument("--bpe_bytes", type=int, default=30_000_000, help="training text the BPE sees (default: "
                    "30,000,000 bytes)")
    ap.add_argument("--workers", type=int, default=os.cpu_count(), help="processes building trees (default: "
                    "every core)")
    ap.add_argument("--chunk_tokens", type=int, default=1 << 20, help="tokens built, cut and written at a "
                    "time: memory holds about one chunk's records (the arrays are the same for any value)")
    ap.add_argument("--force", action="store_true", help="rebuild even if the data is up to date")
    ap.add_argument("--render", choices=("values", "addressed"),
                    help="sheets: write each cell's content, or 'G4:=E4+F4'")
    ap.add_argument("--blocks", choices=("space", "newline"),
                    help="web: blocks joined by a space (default: structure in the rotation only) or newline")
    ap.add_argument("--workbooks", type=int, help="sheets without --src: synthetic workbooks (default 600)")
    ap.add_argument("--conversations", type=int, help="chat: only the first N conversations (default: all)")
    ap.add_argument("--stream", choices=("compact", "old"),
                    help="programs: the compact stream (default; REFERENCE.md) or RESULTS.md's older one")
    ap.add_argument("--max_programs", type=int, help="programs: a fixed sample of this many (default "
                    f"{PREPARE['max_programs']:,}), 0 every program found (the python setting)")
    ap.add_argument("--units", choices=("module", "record"),
                    help="python: level-1 sibling ranks count over the module (default) or per record")
    args = ap.parse_args(argv)
    setting, own = args.setting, {}
    if setting:   # a paper's setting (settings.SETTINGS)
        own = SETTINGS.get(setting) or ap.error(f"unknown --setting {setting}; known: {', '.join(SETTINGS)}")
        if args.corpus not in (None, own["corpus"]):
            ap.error(f"--setting {setting} prepares the {own['corpus']} corpus, not {args.corpus}")
    args.corpus = args.corpus or own.get("corpus") or ap.error("name a corpus or a --setting")
    given = {k: getattr(args, k) for k in PREPARE if getattr(args, k) is not None}
    unused(ap, args)
    shape = preparation(setting) if setting else PREPARE
    departs = [f"--{k} {v}" for k, v in given.items() if v != shape[k]]
    for k, v in {**shape, **given}.items():
        setattr(args, k, v)
    if setting:   # recorded only when the data is exactly the setting's
        shown = ("vocab", "max_len", "long", "split", *corpus(args.corpus).options)
        print(f"setting {setting}: {args.corpus}, " + " ".join(f"--{k} {getattr(args, k)}" for k in shown)
              + (f"; {', '.join(departs)} given, so meta.json records no setting" if departs else ""))
        setting = None if departs else setting
    # max_len: a record needs a next token; vocab: the 256 byte tokens come first
    for flag, low in (("max_len", 2), ("vocab", 256), ("bpe_bytes", 1), ("workers", 1), ("workbooks", 1),
                      ("conversations", 1), ("chunk_tokens", 1), ("max_programs", 0)):
        if getattr(args, flag) is not None and getattr(args, flag) < low:
            ap.error(f"--{flag} must be at least {low} (got {getattr(args, flag)})")
    if args.vocab > 65536 * 4:
        ap.error(f"--vocab {args.vocab} is larger than this tokeniser supports (262,144)")
    return args, setting


def unused(ap, args):
    """One rule for every flag: one that is not for every corpus (COMMON) and not the corpus's own
    (Corpus.options, Corpus.reads) is refused where given, never accepted and ignored."""
    entry = corpus(args.corpus)
    applies = {*entry.options, *(k for k, with_src in entry.reads if with_src or not args.src)}
    for k in sorted(set(vars(args)) - set(COMMON) - applies):
        if getattr(args, k) is not None:
            where = " with --src" * (k in dict(entry.reads))   # read without --src alone (workbooks)
            ap.error(f"--{k} does not apply to the {args.corpus} corpus{where} "
                     f"(its own: {', '.join(sorted(applies)) or 'none'})")


def data_settings(args, entry, items, dirs, setting):
    """What the data is made from and with: meta.json's "settings", compared to rebuild or not."""
    # a name os.walk read with a non-UTF-8 byte holds a surrogate: hashed as split_of hashes it
    files = "\n".join(f"{n}:{_digest(p)}" for n, p in items).encode("utf-8", "surrogatepass")
    return {"format": trees.FORMAT, "corpus": args.corpus, "sources": [os.path.abspath(d) for d in dirs],
            "vocab": args.vocab, "max_len": args.max_len, "long": args.long, "bpe_bytes": args.bpe_bytes,
            **{k: getattr(args, k) for k in entry.options},
            **({"split": args.split} if args.split != PREPARE["split"] else {}),   # older data: hash
            **({"setting": setting} if setting else {}),
            "defaults": entry.defaults(),
            "files": hashlib.sha1(files).hexdigest()}


@contextlib.contextmanager
def timed(seconds, name):
    t0 = time.time()
    yield
    seconds[name] = round(time.time() - t0, 1)


class Spool:
    """Byte strings appended to one scratch file and read back by number: the corpus's texts and
    token ids wait on disk between the passes, not in memory."""

    def __init__(self, path):
        self.f, self.at = open(path, "w+b"), [0]

    def add(self, b):
        self.f.write(b)
        self.at.append(self.at[-1] + len(b))
        return len(self.at) - 2

    def __getitem__(self, i):
        self.f.flush()
        return os.pread(self.f.fileno(), self.at[i + 1] - self.at[i], self.at[i])

    def text(self, i):
        return self[i].decode("utf-8", "surrogatepass")

    def close(self):
        self.f.close()
        os.remove(self.f.name)


# A document between the passes: its source (items[item]), its text's and ids' numbers in the spools
Found = collections.namedtuple("Found", "name item text chars blocks ids tokens", defaults=(None, 0))


def documents(args, entry, items, dirs, texts):
    """Pass 1, one worker process per core: each source built for what needs the whole corpus: its
    name, text (spooled), length and paragraph blocks. [Found] in source order after the corpus-wide
    filter, and the skipped files' reasons counted."""
    summary = functools.partial(_summary, build=builder(args, entry))
    docs, skipped = [], collections.Counter()
    with worker_pool(args.workers) as pool:
        built = tqdm(pool.imap(summary, items, chunksize=8), total=len(items), desc=f"trees ({args.corpus})",
                     unit="doc")
        for i, (name, text, blocks, reason) in enumerate(built):
            if text is None:
                skipped[reason] += 1
            else:
                at = texts.add(text.encode("utf-8", "surrogatepass"))
                docs.append(Found(name, i, at, len(text), blocks))
    if entry.filter_docs:
        removed, reasons = entry.filter_docs(texts.text(d.text) for d in docs)
        docs = [d for k, d in enumerate(docs) if k not in removed]
        skipped.update(reasons)
    if not docs:
        sys.exit(f"error: no usable documents in {dirs} (skipped: {dict(skipped)})")
    return docs, skipped


def builder(args, entry):
    """The corpus's builder with its flags: (name, source) -> (name, Doc or None, skip reason)."""
    return functools.partial(entry.build, **{k: getattr(args, k) for k in entry.options
                                             if k in ("render", "blocks", "stream")})


def _summary(item, build):
    """Pass 1 in a worker: (name, text, paragraph blocks, None), or (name, None, None, skip reason)."""
    name, doc, reason = build(item)
    if doc is None:
        return name, None, None, reason
    return name, doc.text, int(doc.char_p[:, 0].max(initial=-1)) + 1 if doc.char_p is not None else 0, None


def encode(args, entry, enc, docs, texts, ids, skipped, dirs):
    """Token ids per document, spooled, a batch of texts at a time over --workers threads. Known only
    once encoded: a document over the token cap (the BPE has seen it; no record will hold it) or
    under the corpus's minimum is a counted skip. The documents kept, with their ids and lengths."""
    def too_few_or_many(x):
        if len(x) > trees.MAX_DOC_TOKENS:
            return trees.too_large("a document", trees.MAX_DOC_TOKENS, "tokens").reason
        return f"shorter than {entry.min_tokens} tokens" if len(x) < entry.min_tokens else None
    kept = []
    for run in chunks(docs, [d.chars for d in docs], 4 * args.chunk_tokens):   # ~4 characters a token
        batch = enc.encode_ordinary_batch([texts.text(d.text) for d in run], num_threads=args.workers)
        for d, x in zip(run, batch):
            if why := too_few_or_many(x):
                skipped[why] += 1
            else:
                kept.append(d._replace(ids=ids.add(np.asarray(x, np.uint32).tobytes()), tokens=len(x)))
    if not kept:
        sys.exit(f"error: no usable documents in {dirs} (skipped: {dict(skipped)})")
    return kept


def chunks(docs, sizes, limit):
    """Consecutive runs of docs, each closed once its sizes reach limit."""
    run, total = [], 0
    for d, n in zip(docs, sizes):
        run.append(d)
        total += n
        if total >= limit:
            yield run
            run, total = [], 0
    if run:
        yield run


def cut(args, entry, items, docs, ids, split, tok_len, tmp):
    """Pass 2, one worker process per core, a chunk of documents (--chunk_tokens) at a time: each
    rebuilt, its token coordinates cut into records and appended to its split's arrays on disk, one
    record_doc numbering over all. The statistics merged over documents, the chunks counted."""
    p1_cap = entry.p1_cap([d.blocks for d in docs]) if entry.p1_cap else None
    writers = {s: SplitWriter(tmp, s) for s in SPLITS}
    tally, di = {"p1_cap": p1_cap, "chunks": 0}, 0
    shape = dict(max_len=args.max_len, long_docs=args.long, p1_cap=p1_cap,
                 restart_level1=args.units == "record")
    init = (args.corpus, builder(args, entry), tok_len, shape)
    bar = tqdm(total=len(docs), desc="coordinates", unit="doc")
    with worker_pool(args.workers, _coordinates_start, init) as pool:
        for run in chunks(docs, [d.tokens for d in docs], args.chunk_tokens):
            tasks = [(items[d.item], np.frombuffer(ids[d.ids], np.uint32), split[d.name] == "train")
                     for d in run]
            recs = {s: [] for s in SPLITS}
            for d, (rs, stats) in zip(run, pool.imap(_coordinates, tasks, chunksize=4)):
                if rs is None:
                    sys.exit(f"error: {d.name} changed while prepare.py read it ({stats}); run it again")
                for r in rs:
                    r["doc"] = di
                di += 1
                recs[split[d.name]].extend(rs)
                merge(tally, stats)
                bar.update()
            for s in SPLITS:
                writers[s].add(recs[s])
                held = [r for r in recs[s] if "ref_path" in r]
                if held:   # appendix §4: the tokens reference rotation moves
                    merge(tally, reference_tally(held))
            tally["chunks"] += 1
    bar.close()
    tally["splits"] = {s: writers[s].close() for s in SPLITS}
    return tally


_WORKER = {}   # a pass-2 worker's fixed inputs, set once per process


def _coordinates_start(corpus_name, build, tok_len, shape):
    _WORKER.update(entry=corpus(corpus_name), build=build, tok_len=tok_len, shape=shape)


def _coordinates(task):
    """Pass 2 in a worker: one document rebuilt, its token coordinates cut into records, and its
    statistics (those of training records apart); the records lose the node ids only these read, and
    path, ref_path and tokens travel at the width SplitWriter stores (the bytes written are the same)."""
    item, ids, train = task
    entry = _WORKER["entry"]
    name, doc, reason = _WORKER["build"](item)
    if doc is None:
        return None, reason
    ids = np.asarray(ids, np.int64)
    depth_n, path_n = doc.node_coords()
    c = token_coords(doc, ids, _WORKER["tok_len"], (depth_n, path_n))
    c["tokens"] = ids
    rs = records(c, boundary=entry.starts(c, doc), **_WORKER["shape"])
    ranked = doc.rank if entry.root_ranks else doc.rank[doc.parent >= 0]   # what sibling_rank_* count
    widest = int(ranked.max(initial=0))
    stats = {"nodes": len(doc.parent), "nodes_owning_tokens": len(np.unique(c["node"][c["node"] >= 0])),
             "tokens": len(ids), "deeper_than_levels": int((depth_n > trees.LEVELS).sum()),
             "records_dropped_long": int(not rs), "documents_split": int(len(rs) > 1),
             "depths": value_counts(depth_n), "notes": doc.notes or {},
             "ranks": value_counts(ranked),
             "synthetic": int(doc.synthetic),
             "kind_tokens": {n: sum(int(((r["kind"] & flag) > 0).sum()) for r in rs)
                             for flag, n in trees.KIND_NAMES.items()},
             **({"wide": 1, "widest_max": (widest, name)} if widest >= trees.MAX_WIDTH else {}),
             **({"references": len(doc.ref_path)} if doc.ref_path is not None else {})}
    if train and rs:
        stats["record_ranks"] = record_rank_counts(rs)
        if entry.record_tally:
            stats["record_tally"] = entry.record_tally(rs)
    for r in rs:   # on their way to the main process in the width SplitWriter keeps them at most
        del r["node"]
        r.update({k: r[k].astype(SplitWriter.WIDE[k][0]) for k in SplitWriter.WIDE if k in r})
    return rs, stats


def merge(into, stats):
    """Add stats into `into`: numbers and counts add, keys ending in "max" keep the largest."""
    for k, v in stats.items():
        if k not in into:
            into[k] = v
        elif isinstance(v, dict):
            merge(into[k], v)
        elif isinstance(k, str) and k.endswith("max"):
            into[k] = np.maximum(into[k], v) if isinstance(v, np.ndarray) else max(into[k], v)
        else:
            into[k] += v


def describe(args, settings, docs, skipped, t, enc, split, seconds, t0):
    """meta.json: what was read and skipped, the splits, the tree statistics, the tokeniser, the run."""
    counts = {s: {"records": t["splits"][s][0], "tokens": t["splits"][s][1],
                  "documents": sum(v == s for v in split.values())} for s in SPLITS}
    entry, packages = corpus(args.corpus), {}
    if args.split == "contiguous":   # how many packages each split holds
        packages = {"split_packages": split_packages(split)}
    meta = {
        "settings": settings, "synthetic": bool(t["synthetic"]),
        "documents": len(docs), "skipped": dict(skipped), "skipped_total": sum(skipped.values()),
        "splits": counts,
        **packages, "tokens": t["tokens"], "nodes": t["nodes"],
        "nodes_per_token": t["nodes"] / max(t["tokens"], 1),
        # a node owns a token when that token's first byte with a node is the node's (fields.token_coords);
        # a node whose text lies inside another's token owns none. The paper's 0.86 may count every node.
        "nodes_owning_tokens": t["nodes_owning_tokens"],
        "nodes_owning_tokens_per_token": t["nodes_owning_tokens"] / max(t["tokens"], 1),
        "sibling_rank_p99": rank_summary(t["ranks"])["p99"],
        "sibling_rank_max": rank_summary(t["ranks"])["max"],
        "record_sibling_rank": rank_summary(t.get("record_ranks")),
        "depth_histogram": {int(k): v for k, v in sorted(t["depths"].items())},
        "nodes_deeper_than_22_levels": t["deeper_than_levels"],
        "records_dropped_long": t["records_dropped_long"],
        # --long split: documents cut into several records, which can train in different steps (a
        # departure from appendix §4's "No document is split across steps"; crop and drop keep none)
        "documents_split": t["documents_split"],
        "tokenizer": {"kind": "byte-level BPE (rustbpe, trained here)", "vocab": enc.n_vocab,
                      "vocab_asked": args.vocab, "pattern": entry.pattern,
                      "trained_on_bytes": min(args.bpe_bytes,
                                              sum(d.chars for d in docs if split[d.name] == "train"))},
        "seconds": seconds, "kinds": trees.KIND_NAMES,
        "kind_tokens": {name: t["kind_tokens"][name] for name in trees.KIND_NAMES.values()},
        # what preparing took: issue 50 sizes the GPU machine's calls by it
        "run": {"wall_seconds": round(time.time() - t0, 1), "workers": args.workers, "chunks": t["chunks"],
                "chunk_tokens": args.chunk_tokens, "peak_rss_mb": peak_rss_mb()},
    }
    if t["notes"] or {"wide", "references", "held", "record_tally"} & set(t):   # beyond web pages
        meta.update(meta_beyond_web(t, entry))
    return meta


def peak_rss_mb():
    """The largest resident memory of this process and of its finished workers, in MB."""
    kb = [resource.getrusage(w).ru_maxrss for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    return {"main": round(kb[0] / 1024), "largest_worker": round(kb[1] / 1024)}


def report(meta):
    if meta["synthetic"]:
        print("NOTE: this corpus is SYNTHETIC (generated workbooks), as meta.json records")
    for s in SPLITS:
        if not meta["splits"][s]["records"]:
            print(f"WARNING: the {s} split is empty ({meta['documents']} documents, split 90/5/5 by name); "
                  f"train.py refuses a corpus without {s} records: add documents"
                  + ("" if meta["settings"].get("split") == "contiguous" else
                     ", or pass --split contiguous (90/5/5 ranges in source order)"))
    if "wider_than_web_limit" in meta:
        print(wide_note(meta["wider_than_web_limit"]))
    held = sum(meta["splits"][s]["tokens"] for s in SPLITS)
    if held < meta["tokens"]:
        print(f"note: the splits' records hold {held:,} of the documents' {meta['tokens']:,} tokens "
              f"(--long {meta['settings']['long']}: {meta['records_dropped_long']} long documents dropped, "
              "or each cropped to its first --max_len tokens)")
    if meta.get("documents_split"):
        print(f"note: {meta['documents_split']:,} of the {meta['documents']:,} documents are longer than "
              f"--max_len {meta['settings']['max_len']}, each cut into records that can train in different "
              "steps (appendix §4: \"No document is split across steps\"; --long crop|drop keeps none cut)")
    print(json.dumps({k: meta[k] for k in ("synthetic", "documents", "skipped", "tokens", "nodes_per_token",
                                           "sibling_rank_p99", "sibling_rank_max", "record_sibling_rank",
                                           "seconds")}, indent=1))


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit("\ninterrupted: the prepared folder is as it was before this run")
