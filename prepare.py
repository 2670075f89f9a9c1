"""Corpora -> tokens + per-token coordinates on disk.

    python prepare.py python            # CPython standard library (real code)
    python prepare.py web               # real HTML documentation found on this machine
    python prepare.py chat              # real conversations (the chitchat_dataset package)
    python prepare.py python --src DIR  # any folder(s) of .py files
    python prepare.py --setting web_pages   # a paper's setting by name (settings.py): its corpus and flags

Writes data/<corpus>/{train,val,test}_<field>.npy (memory-mappable) and meta.json in the format
data.py holds: token ids, record offsets (doc_start), each record's document (record_doc) and the
per-token fields of data.FIELDS (pos, path, depth, within, ref_path, symbol, kind, p, ...).
Nothing is downloaded: the tokeniser (tokenizer.py) is a byte-level BPE that rustbpe trains
here on the training split and tiktoken runs.
"""
import argparse
import collections
import functools
import glob
import hashlib
import json
import multiprocessing
import os
import random
import shutil
import sys
import sysconfig
import time
import zlib
from dataclasses import dataclass
from typing import Callable

import numpy as np
from openpyxl.workbook.defined_name import DefinedName
from tqdm import tqdm

import chat
import formats
import paragraphs
import sheets
import tokenizer
import trees
from data import SPLITS, token_coords, write_split
from settings import PREPARE, SETTINGS


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
        if restart_level1 and e > s:
            first = r["path"][0, 0]
            r["path"] = r["path"].copy()
            r["path"][:, 0] = np.where(r["path"][:, 0] >= 0, r["path"][:, 0] - first, -1)
            if "ref_path" in r:
                r["ref_path"] = r["ref_path"].copy()
                r["ref_path"][:, 0] = np.where(r["ref_path"][:, 0] >= first, r["ref_path"][:, 0] - first, -1)
        if "p" in r:   # a record starts a paragraph: p2/p3 of its first stretch from 0
            p = r["p"] = r["p"].copy()
            first_para, first_sent = p[:, 0] == p[0, 0], (p[:, :2] == p[0, :2]).all(1)
            p[first_sent, 2] -= p[0, 2]
            p[first_para, 1] -= p[0, 1]
            if p1_cap is not None:      # App. C.1 truncation, where the model sees p1
                np.minimum(p[:, 0], p1_cap, out=p[:, 0])
        out.append(r)
    return out


def record_rank_stats(recs):
    """Sibling ranks as the model sees them: each node of each record once, its rank at its own
    level (record rebasing included). {p99, max}, for comparison with the paper's 7 / 151."""
    ranks = []
    for r in recs:
        node, first = np.unique(r["node"], return_index=True)
        first = first[node >= 0]
        level = np.minimum(r["depth"][first], trees.LEVELS) - 1
        ranks.append(r["path"][first, level])
    ranks = np.concatenate(ranks) if ranks else np.zeros(1)
    return {"p99": float(np.percentile(ranks, 99)), "max": int(ranks.max())}


def paragraph_stats(recs):
    """What hRoPE's base calibration and controls need (paper 004 App. C): the largest p1, p2,
    p3 (M_g; p1 in its document, clipped: the per-file distribution C.1 calibrates on), the
    paragraph-boundary density per token (rand_axial) and the mean paragraph length in tokens L
    (period_axial: p1 = floor(t / L)). Density and L count the true paragraphs, clipped or not."""
    p_max = np.max([r["p"].max(0) for r in recs], 0)
    # a paragraph starts where p2 and p3 are both 0: every record start, and inside a record
    # wherever p1 moves on or would move on above the cap
    n_paragraphs = sum(int(((r["p"][:, 1] == 0) & (r["p"][:, 2] == 0)).sum()) for r in recs)
    starts = n_paragraphs - len(recs)
    tokens = sum(len(r["p"]) for r in recs)
    return {"p_max": [int(v) for v in p_max], "p1_density": starts / max(tokens - len(recs), 1),
            "p1_period": max(1, round(tokens / n_paragraphs)), "paragraphs": n_paragraphs}


# ----------------------------------------------------------------------------- sources ----
def split_of(name):
    """Deterministic split by document name: 90% train, 5% val, 5% test."""
    name = name.split("::")[0]                     # a small program goes where its module goes
    h = int(hashlib.sha1(name.encode("utf-8", "surrogatepass")).hexdigest(), 16) % 100
    return "train" if h < 90 else "val" if h < 95 else "test"


def contiguous_split(names):
    """Appendix §2 on Python: "The splits are contiguous record ranges over an unshuffled corpus":
    the documents in the order their sources list them, the first 90% train, then 5% val, 5% test
    (the paper gives no proportions; ours)."""
    n = len(names)
    return {name: "train" if i < 0.9 * n else "val" if i < 0.95 * n else "test" for i, name in enumerate(names)}


def find_files(dirs, exts):
    out = []
    for d in dirs:
        if os.path.isfile(d):
            out.append((d, d))
            continue
        if not os.path.isdir(d):
            sys.exit(f"error: source {d!r} does not exist")
        for root, subdirs, files in os.walk(d):
            subdirs[:] = sorted(s for s in subdirs if s not in ("site-packages", "__pycache__"))
            for f in sorted(files):
                if f.lower().endswith(exts):
                    p = os.path.join(root, f)
                    out.append((os.path.relpath(p, d), p))
    return out


def python_sources(args):
    dirs = args.src or [sysconfig.get_paths()["stdlib"]]
    files = find_files(dirs, (".py",))
    if not files:
        sys.exit(f"error: no .py files under {dirs}; pass --src DIR")
    return files, dirs


def first_place(patterns, exts):
    """[the first folder matching one of `patterns` (in order) that holds such files], or None."""
    for pattern in patterns:
        hits = sorted({os.path.realpath(p) for p in glob.glob(pattern) if os.path.isdir(p)})
        if hits and find_files(hits[:1], exts):
            return hits[:1]
    return None


# Where `prepare.py web` looks for real HTML when no --src is given (first hit wins).
WEB_PLACES = ["/usr/share/doc/python3/html", "/usr/share/doc/python3.*/html", "/usr/share/doc/python3-doc/html",
              "/usr/share/doc/*/html"]


def web_sources(args):
    dirs = args.src or first_place(WEB_PLACES, (".html", ".htm"))
    if not dirs:
        sys.exit("error: no HTML pages found on this machine (looked in " + ", ".join(WEB_PLACES) + ").\n"
                 "On Debian/Ubuntu: sudo apt-get install python3-doc  (about 530 real pages),\n"
                 "or pass your own pages: python prepare.py web --src DIR  (.html/.htm/.warc/.warc.gz)")
    items = []
    for name, path in find_files(dirs, (".html", ".htm", ".warc", ".warc.gz")):
        if path.endswith((".warc", ".warc.gz")):
            cut = []
            found = [(f"{name}#{i}:{uri}", payload) for i, (uri, payload) in enumerate(trees.warc_records(path, cut))]
            if cut:   # counted like a skipped document: the records after the cut are lost
                found.append((f"{name}#cut", trees.Skip(cut[0])))
            items += found or [(name, trees.Skip("warc without html responses"))]
        else:
            items.append((name, path))
    if not items:
        sys.exit(f"error: no .html/.htm/.warc files under {dirs}")
    return items, dirs


# `prepare.py webtext` without --src: every HTML page under /usr/share/doc (symlinks followed, each
# file once) except python3-doc's, whose documents `prose` already reads from their .rst sources,
# and Node.js's all.html: the chapter pages installed beside it, on one page (2 MB of text; a
# page that contains others is no near-duplicate of any one of them by C.1's similarity).
WEBTEXT_ROOT = "/usr/share/doc"
WEBTEXT_SKIP = {"nodejs/api/all.html"}


def webtext_sources(args):
    """OpenWebText's stand-in (paper 004 App. C.1): real pages reachable offline, or --src."""
    if args.src:
        return web_sources(args)
    python_doc = {os.path.realpath(p) for pattern in WEB_PLACES[:3] for p in glob.glob(pattern)}
    seen, items = set(), []
    for root, subdirs, files in os.walk(WEBTEXT_ROOT, followlinks=True):
        real = os.path.realpath(root)
        if real in seen or any(real == p or real.startswith(p + os.sep) for p in python_doc):
            subdirs[:] = []                  # a folder reached twice, or python3-doc's pages
            continue
        seen.add(real)
        subdirs.sort()
        for f in sorted(files):
            path = os.path.join(root, f)
            name = os.path.relpath(path, WEBTEXT_ROOT)
            if f.lower().endswith((".html", ".htm")) and os.path.realpath(path) not in seen and name not in WEBTEXT_SKIP:
                seen.add(os.path.realpath(path))
                items.append((name, path))
    if not items:
        sys.exit(f"error: no HTML pages under {WEBTEXT_ROOT} besides python3-doc's; pass --src DIR (.html/.htm/.warc)")
    return items, [WEBTEXT_ROOT]


def minhash(text, perms=256, n=5, seed=0):
    """MinHash signature (perms,) of a text's word 5-grams (lowercased): the fraction of equal
    entries of two signatures estimates the Jaccard similarity of their 5-gram sets."""
    words = text.lower().split()
    grams = {" ".join(words[i:i + n]) for i in range(max(len(words) - n + 1, 1))}
    x = np.array([zlib.crc32(g.encode("utf-8", "surrogatepass")) for g in grams], np.uint64)
    prime = np.uint64(4294967291)                                  # (a*x + b) mod p: no uint64 overflow
    a, b = (np.random.default_rng(seed).integers(1, int(prime), (2, perms)).astype(np.uint64))
    return ((a[:, None] * x[None, :] + b[:, None]) % prime).min(1)


def near_duplicates(texts, threshold=0.5, bands=64):
    """Indices of texts that duplicate an earlier one (App. C.1: 5-gram LSH, similarity > 0.5):
    LSH on MinHash bands proposes pairs (64 bands of 4 rows: a pair at Jaccard 0.5 shares a band
    with probability 0.98, at 0.1 with 0.006), the MinHash estimate above `threshold` confirms it."""
    sigs = [minhash(t) for t in texts]
    buckets, dropped = collections.defaultdict(list), set()
    for i, sig in enumerate(sigs):
        keys = {(k, band.tobytes()) for k, band in enumerate(np.split(sig, bands))}
        if any(np.mean(sigs[j] == sig) > threshold for j in {j for key in keys for j in buckets[key]}):
            dropped.add(i)
            continue                         # kept texts only: a duplicate of a duplicate is compared to its source
        for key in keys:
            buckets[key].append(i)
    return dropped


# Where `prepare.py prose` looks for real prose when no --src is given: the reStructuredText
# sources python3-doc installs (first hit wins).
PROSE_PLACES = ["/usr/share/doc/python3/html/_sources", "/usr/share/doc/python3.*/html/_sources",
                "/usr/share/doc/python3-doc/html/_sources"]
PROSE_EXTS = (".rst.txt", ".rst", ".txt", ".tokens", ".raw", ".md")


def prose_sources(args):
    dirs = args.src or first_place(PROSE_PLACES, PROSE_EXTS)
    if not dirs:
        sys.exit("error: no prose found on this machine (looked in " + ", ".join(PROSE_PLACES) + ").\n"
                 "On Debian/Ubuntu: sudo apt-get install python3-doc  (its .rst sources, ~40k paragraphs),\n"
                 "or pass text files: python prepare.py prose --src DIR  (.txt/.rst/.md; WikiText .tokens/.raw)")
    items = []
    for name, path in find_files(dirs, PROSE_EXTS):
        fmt = "rst" if name.endswith((".rst", ".rst.txt")) else "text"
        if os.path.getsize(path) > trees.MAX_FILE_BYTES and not name.endswith((".tokens", ".raw")):
            items.append((name, trees.too_large("a file", trees.MAX_FILE_BYTES, "bytes")))   # WikiText's files
            continue                                                    # hold many articles, each capped
        with open(path, "rb") as f:
            raw = f.read()
        text = raw.decode("utf-8", "replace")
        if fmt == "text" and any(paragraphs.WIKI_TITLE.match(l) for l in text.split("\n")):
            # WikiText: one file holds many articles; each `= Title =` starts a document
            for k, (title, paras) in enumerate(paragraphs.wikitext_documents(text)):
                items.append((f"{name}#{k}:{title}", ("paragraphs", paras)))
        else:
            items.append((name, (fmt, raw)))
    if not items:
        sys.exit(f"error: no {'/'.join(PROSE_EXTS)} files under {dirs}")
    return items, dirs


# --------------------------------------------------------------- spreadsheets (synthetic) ----
# No real spreadsheet corpus is reachable offline, so `prepare.py sheets` without --src writes
# SYNTHETIC workbooks: realistic shapes (timesheets, budgets, invoices, grade books,
# inventories; several sheets, cross-sheet formulas, SUM/AVERAGE/IF/VLOOKUP/COUNTIF, a defined
# name, blank rows and columns), saved as real .xlsx and read back through the same openpyxl
# path as user files. Every file is signed sheets.SYNTHETIC_CREATOR; meta.json says synthetic.
NAMES = ["Ann", "Bob", "Carla", "Dev", "Elif", "Femi", "Gus", "Hana", "Ivo", "Jun", "Kai", "Lena", "Mo", "Nia",
         "Omar", "Pia", "Quinn", "Rosa", "Sam", "Tara", "Uma", "Vic", "Wen", "Xavi", "Yara", "Zed"]
GOODS = ["bolts", "nuts", "washers", "hinges", "screws", "brackets", "rivets", "springs", "clamps", "pins",
         "gears", "valves", "seals", "pipes", "fuses", "cables"]


def _timesheet(wb, rng):
    ws = wb.active
    ws.title = "Hours"
    days = ["Mon", "Tue", "Wed", "Thu", "Fri"]
    ws.append(["Name"] + days + ["Total"])
    n = rng.randint(6, 40)
    for r in range(2, n + 2):
        ws.append([rng.choice(NAMES) + f" {r}"] + [8 if rng.random() < 0.7 else rng.choice([0, 4, 6, 9, 10])
                                                   for _ in days] + [f"=SUM(B{r}:F{r})"])
    ws.append([])                                           # a blank row before the totals
    ws.append(["Total"] + [f"=SUM({c}2:{c}{n + 1})" for c in "BCDEFG"])
    s = wb.create_sheet("Summary")
    s.append(["Total hours", f"=Hours!G{n + 3}"])
    s.append(["Average per person", f"=AVERAGE(Hours!G2:G{n + 1})"])
    s.append(["People over 40h", f'=COUNTIF(Hours!G2:G{n + 1},">40")'])
    s.append(["Overtime rate", 1.5])
    s.append(["Overtime cost", "=IF(B3>0,B3*B4*Rate,0)"])
    wb.defined_names["Rate"] = DefinedName("Rate", attr_text=f"Summary!$B${rng.choice([4, 4, 2])}")


def _budget(wb, rng):
    ws = wb.active
    ws.title = "Budget"
    ws.append(["Category", "Planned", "Actual", "Difference", "Status"])
    cats = rng.sample(["Rent", "Salaries", "Travel", "Software", "Hardware", "Marketing", "Training", "Utilities",
                       "Insurance", "Legal", "Catering", "Office"], rng.randint(5, 12))
    for r, c in enumerate(cats, 2):
        plan = rng.choice([500, 1000, 1500, 2000, 5000, 12000])
        ws.append([c, plan, round(plan * rng.uniform(0.7, 1.3), 2), f"=C{r}-B{r}", f'=IF(D{r}>0,"over","ok")'])
    n = len(cats) + 1
    ws.append(["Total", f"=SUM(B2:B{n})", f"=SUM(C2:C{n})", f"=C{n + 1}-B{n + 1}"])
    q = wb.create_sheet("Quarters")
    q.append(["Quarter", "Share", "Planned"])
    for i, share in enumerate([0.25, 0.25, 0.25, 0.25], 2):
        q.append([f"Q{i - 1}", share, f"=B{i}*Budget!$B${n + 1}"])


def _invoice(wb, rng):
    p = wb.active
    p.title = "Prices"
    goods = rng.sample(GOODS, rng.randint(5, len(GOODS)))
    for g in goods:
        p.append([g, round(rng.uniform(0.1, 40), 2)])
    p["E1"] = rng.choice([0.07, 0.19, 0.2])
    wb.defined_names["TaxRate"] = DefinedName("TaxRate", attr_text="Prices!$E$1")
    ws = wb.create_sheet("Invoice")
    ws.append(["Item", "Qty", "Price", "Amount"])
    n = rng.randint(3, 25)
    for r in range(2, n + 2):
        ws.append([rng.choice(goods), rng.randint(1, 50), f"=VLOOKUP(A{r},Prices!$A$1:$B${len(goods)},2,FALSE)",
                   f"=B{r}*C{r}"])
    ws.append([])
    ws.append(["Subtotal", None, None, f"=SUM(D2:D{n + 1})"])
    ws.append(["Tax", None, None, f"=D{n + 3}*TaxRate"])
    ws.append(["Total", None, None, f"=D{n + 3}+D{n + 4}"])


def _gradebook(wb, rng):
    ws = wb.active
    ws.title = "Grades"
    ws.append(["Student", "HW1", "HW2", "HW3", "HW4", "Exam", "Final", "Grade"])
    n = rng.randint(8, 35)
    for r in range(2, n + 2):
        ws.append([rng.choice(NAMES)] + [rng.choice([100, 100, 90, 80, 70, 60]) for _ in range(4)] +
                  [rng.randint(40, 100), f"=0.4*AVERAGE(B{r}:E{r})+0.6*F{r}",
                   f'=IF(G{r}>=90,"A",IF(G{r}>=80,"B",IF(G{r}>=70,"C","F")))'])
    at = wb.create_sheet("Attendance")        # a wide register: the cell above is a row (~300 tokens) back
    lessons = rng.randint(120, 160)
    at.append(["Student"] + [f"L{i + 1}" for i in range(lessons)])
    for r in range(2, n + 2):
        at.append([ws.cell(r, 1).value] + ["P" if rng.random() < 0.85 else "A" for _ in range(lessons)])
    st = wb.create_sheet("Stats")
    st.append(["Column", "Mean", "Max"])
    for c in "BCDEFG":
        st.append([f"=Grades!{c}1", f"=AVERAGE(Grades!{c}2:{c}{n + 1})", f"=MAX(Grades!{c}:{c})"])


def _inventory(wb, rng):
    ws = wb.active
    ws.title = "Stock"
    ws.append(["SKU", "Item", "Qty", None, "Reorder level", "Reorder?", "Warehouse"])   # a blank column D
    n = rng.randint(8, 50)
    site = rng.choice(["North", "South", "East"])
    for r in range(2, n + 2):
        if rng.random() < 0.3:
            site = rng.choice(["North", "South", "East"])   # long runs of the value above
        ws.append([f"SKU-{rng.randint(1000, 9999)}", rng.choice(GOODS), rng.randint(0, 500), None,
                   rng.choice([50, 100, 100, 200]), f'=IF(C{r}<E{r},"yes","no")', site])
    ws.append([])
    ws.append(["Items to reorder", None, f'=COUNTIF(F2:F{n + 1},"yes")'])


def synthetic_workbooks(out_dir, n, seed=0):
    """Write n SYNTHETIC .xlsx workbooks (deterministic per seed) into out_dir."""
    import openpyxl
    rng = random.Random(seed)
    kinds = [_timesheet, _budget, _invoice, _gradebook, _inventory]
    os.makedirs(out_dir, exist_ok=True)
    for i in range(n):
        wb = openpyxl.Workbook()
        wb.properties.creator = sheets.SYNTHETIC_CREATOR
        kind = kinds[i % len(kinds)]
        kind(wb, rng)
        wb.save(os.path.join(out_dir, f"{kind.__name__[1:]}_{i:04d}.xlsx"))
    return out_dir


def sheets_sources(args):
    dirs = args.src
    if not dirs:
        dirs = [synthetic_workbooks(os.path.join(args.out, "sheets_synthetic_src"), args.workbooks)]
        print(f"no --src given: using {args.workbooks} SYNTHETIC workbooks written to {dirs[0]} "
              "(no real spreadsheet corpus is available offline; pass --src for real .xlsx files)")
    items = find_files(dirs, (".xlsx", ".xlsm", ".xls"))
    if not items:
        sys.exit(f"error: no .xlsx/.xlsm files under {dirs}")
    return items, dirs


# Files shipped inside installed packages and under /usr/share (real files, offline): where the
# json, xml and markdown corpora look when no --src is given.
SHIPPED = (sysconfig.get_paths()["purelib"], "/usr/share", "/usr/lib/node_modules")


def shipped_sources(exts):
    def sources(args):
        dirs = args.src or [d for d in SHIPPED if os.path.isdir(d)]
        items = find_files(dirs, exts)
        if not items:
            sys.exit(f"error: no {'/'.join(exts)} files under {dirs}; pass --src DIR")
        return items, dirs
    return sources


json_sources = shipped_sources((".json",))
xml_sources = shipped_sources((".xml", ".xsd", ".xsl", ".svg"))
markdown_sources = shipped_sources((".md", ".markdown"))


def _programs_of(item):
    name, path = item
    try:
        with open(path, "rb") as f:
            source = trees.source_text(f.read())
    except (OSError, trees.Skip):
        return []                                  # counted when a module cannot be read: none of it is used
    return [(f"{name}::{q}", p.encode()) for q, p in trees.python_programs(source)]


# The default programs: a fixed sample of those found (84,527 here, ~5x the standard library's
# tokens), since prepare holds a corpus's coordinates in memory (the whole standard library as
# modules peaks at 9.6 GB) and every one of them overflowed a 24 GB machine.
DEFAULT_PROGRAMS = 30_000


def programs_sources(args):
    """Small programs (appendix §4's Python corpus is 423,111 programs): the top-level functions
    and classes of 3-60 lines of the standard library and installed packages, each with its
    module's imports (trees.python_programs). Named module::qualname, so one module's programs
    share a split."""
    dirs = args.src or [sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["purelib"]]
    modules = [(f"{i}/{n}", p) for i, d in enumerate(dirs) for n, p in find_files([d], (".py",))]
    with multiprocessing.Pool(args.workers) as pool:
        items = [x for found in tqdm(pool.imap(_programs_of, modules, chunksize=16), total=len(modules),
                                     desc="programs", unit="module") for x in found]
    if not items:
        sys.exit(f"error: no top-level functions or classes of 3-60 lines under {dirs}; pass --src DIR")
    if not args.src and len(items) > DEFAULT_PROGRAMS:   # the same programs on every run: by name
        items = sorted(items, key=lambda it: hashlib.sha1(it[0].encode("utf-8", "surrogatepass")).digest())
        items = sorted(items[:DEFAULT_PROGRAMS])
    return items, dirs


def _size(src):
    """A source's size for the settings hash (-1: unreadable, which _build reports)."""
    if not isinstance(src, str):
        return len(repr(src))
    try:
        return os.path.getsize(src)
    except OSError:
        return -1


def web_sheets_sources(args):
    """Web pages and workbooks in one corpus (appendix, the two-corpus precursor): the HTML and
    the .xlsx files under --src, or python3-doc's pages and the SYNTHETIC workbooks."""
    web, web_dirs = web_sources(args)
    books, sheet_dirs = sheets_sources(args)
    return web + books, web_dirs + sheet_dirs


def _build(item, builder):
    """(name, Doc, None) or (name, None, reason): one bad file never ends the run."""
    name, src = item
    try:
        if isinstance(src, trees.Skip):          # a source already known to be unusable
            raise src
        if isinstance(src, str):
            trees.check_size("a file", os.path.getsize(src), trees.MAX_FILE_BYTES, "bytes")   # before reading it
            with open(src, "rb") as f:
                src = f.read()
        doc = builder(src)
        trees.check_size("a document", len(doc.text), trees.MAX_DOC_CHARS)   # every builder, whatever it read
        return name, doc, None
    except trees.Skip as e:
        return name, None, e.reason
    except OSError as e:
        return name, None, f"unreadable ({e.strerror})"
    except (RecursionError, MemoryError):
        return name, None, "too deeply nested"
    except Exception as e:                       # a builder bug on odd input: counted, and named
        return name, None, f"builder error ({type(e).__name__})"


def _build_python(item):
    return _build(item, trees.python_doc)


def _build_web(item):
    return _build(item, trees.web_doc)


def _prose(src):
    fmt, data = src
    return paragraphs.paragraphs_doc(data) if fmt == "paragraphs" else paragraphs.prose_doc(data, fmt)


def _build_prose(item):
    return _build(item, _prose)


def _build_code(item):
    return _build(item, paragraphs.code_doc)


def _build_json(item):
    return _build(item, formats.json_doc)


def _build_xml(item):
    return _build(item, formats.xml_doc)


def _build_markdown(item):
    return _build(item, formats.markdown_doc)


def _build_sheets(item, render="values"):
    return _build(item, lambda raw: sheets.sheet_doc(raw, render))


def _build_web_sheets(item, render="values"):
    is_sheet = item[0].lower().endswith((".xlsx", ".xlsm", ".xls"))
    name, doc, reason = (_build_sheets(item, render) if is_sheet else _build_web(item))
    if doc is not None:
        doc.source = int(is_sheet)
    return name, doc, reason


# ------------------------------------------------------------------------------- corpora ----
# Where a record may start when a long document is split (--long split): per token, from its
# coordinates and its Doc.
def statements(c, doc):        # Python: a top-level statement
    return np.r_[True, c["node"][1:] != c["node"][:-1]] & (c["depth"] == 1)


def paragraph_starts(c, doc):  # prose, code: a new paragraph or block
    return np.r_[True, c["p"][1:, 0] != c["p"][:-1, 0]]


def rows(c, doc):              # sheets: a new row
    return np.r_[True, (c["kind"][:-1] & trees.KIND_ROW_END) > 0]


def text_blocks(c, doc):       # web: a new text block
    return (c["kind"] & trees.KIND_NEW_BLOCK) > 0


def turns(c, doc):             # chat: a new turn
    return np.r_[True, (c["chat"][1:, :2] != c["chat"][:-1, :2]).any(1)]


def children_of_root(c, doc):  # json, xml: a member, element or child of the top-level node
    return np.r_[True, c["node"][1:] != c["node"][:-1]] & (c["depth"] == 2)


def rows_or_text_blocks(c, doc):
    return rows(c, doc) if doc.source == 1 else text_blocks(c, doc)


def blocks_p95(docs):
    """Paper 004 App. C.1 on code: p1 truncated at the 95th percentile of blocks per file."""
    return int(np.percentile([d.char_p[:, 0].max() + 1 for _, d in docs], 95)) - 1


@dataclass(frozen=True)
class Corpus:
    """One corpus: where its documents come from, how they become trees and records, and what
    train.py and evaluate.py should do with it. The last three (defaults) go into meta.json, so
    the scripts that read prepared data follow it without a table of their own."""
    sources: Callable           # args -> ([(name, path or payload)], folders read)
    build: Callable             # (name, source) -> (name, Doc or None, skip reason); runs in worker processes
    starts: Callable            # record rule: (coords, Doc) -> bool per token, where a record may start
    pattern: str = tokenizer.PAT   # the BPE's pre-split pattern
    options: tuple = ()         # prepare.py flags that shape this corpus's data (kept in the settings)
    p1_cap: Callable = None     # docs -> the largest p1 a record keeps, or None
    root_ranks: bool = False    # the sibling-rank statistics count the roots' ranks (a sheet's index)
    preset: str = "paper"       # train.py's model on CUDA (model.PRESETS; the CPU scale has its own)
    recipe: str = "tree"        # train.py's recipe (train.RECIPES; hrope runs as hrope_cpu on CPU)
    attention: tuple = ()       # evaluate.py --attention: the corpus's shares (evaluate.attention_stats)

    def defaults(self):
        """What prepare.py writes into meta.json for train.py and evaluate.py to read back."""
        return {"preset": self.preset, "recipe": self.recipe, "attention": list(self.attention)}


CORPORA = {   # a new corpus: one entry here and its builder (trees.py or beside it; README "Add a corpus")
    "python": Corpus(python_sources, _build_python, statements, options=("units",), attention=("ancestor",),
                     pattern=tokenizer.CODE_PAT),   # the serialisation's sigils need a pattern of their own
    "web": Corpus(web_sources, _build_web, text_blocks, preset="paper_web", attention=("same_depth",)),
    "prose": Corpus(prose_sources, _build_prose, paragraph_starts, preset="paper_hrope", recipe="hrope"),
    "code": Corpus(python_sources, _build_code, paragraph_starts, p1_cap=blocks_p95, preset="paper_hrope", recipe="hrope"),
    "sheets": Corpus(sheets_sources, _build_sheets, rows, options=("render",), root_ranks=True, preset="paper_sheets",
                     attention=("cells",)),
    "web_sheets": Corpus(web_sheets_sources, _build_web_sheets, rows_or_text_blocks, options=("render",),
                         preset="paper_sheets"),
    "programs": Corpus(programs_sources, _build_python, statements, options=("units",), attention=("ancestor",),
                       pattern=tokenizer.CODE_PAT),
    "webtext": Corpus(webtext_sources, functools.partial(_build, builder=paragraphs.webtext_doc), paragraph_starts,
                      preset="paper_hrope", recipe="hrope"),
    "chat": Corpus(chat.sources, functools.partial(_build, builder=chat.chat_doc), turns),
    # beyond the papers: any tree whose text determines it (sample.py serves these three)
    "json": Corpus(json_sources, _build_json, children_of_root),
    "xml": Corpus(xml_sources, _build_xml, children_of_root),
    "markdown": Corpus(markdown_sources, _build_markdown, paragraph_starts),
}
# A paper's setting (its flags here, its model, recipe and length in train.py) is one entry of
# settings.SETTINGS: `prepare.py --setting NAME`.


# ------------------------------------------------------------------------------- driver ----
def build_docs(corpus, items, workers, render="values"):
    build = CORPORA[corpus].build
    if "render" in CORPORA[corpus].options:
        build = functools.partial(build, render=render)
    docs, skipped = [], collections.Counter()
    with multiprocessing.Pool(workers) as pool:
        for name, doc, reason in tqdm(pool.imap(build, items, chunksize=8), total=len(items),
                                      desc=f"trees ({corpus})", unit="doc"):
            if doc is None:
                skipped[reason] += 1
            else:
                docs.append((name, doc))
    return docs, skipped


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("corpus", nargs="?", choices=sorted(CORPORA), help="implied by --setting")
    ap.add_argument("--setting", choices=list(SETTINGS), help="a paper's setting: its corpus and the flags "
                    "below; flags given override them (meta.json then records no setting)")
    ap.add_argument("--src", action="append", help="source folder or file (repeatable)")
    ap.add_argument("--out", default="data")
    # the flags that shape the data default to None here: settings.PREPARE, or the setting's, fill them
    ap.add_argument("--vocab", type=int, help="BPE entries (paper: 32,768; CPU default 4,096)")
    ap.add_argument("--max_len", type=int, help="longest record in tokens (the context; default 1,024)")
    ap.add_argument("--long", choices=("split", "crop", "drop"),
                    help="longer documents: split at statement/text-block boundaries (default), "
                         "crop (the larger web run) or drop (the small web setting)")
    ap.add_argument("--split", choices=("hash", "contiguous"),
                    help="documents to train/val/test 90/5/5: by a hash of the name (default), or as "
                         "contiguous ranges in source order (the paper's Python)")
    ap.add_argument("--bpe_bytes", type=int, default=30_000_000, help="training text the BPE sees")
    ap.add_argument("--workers", type=int, default=os.cpu_count())
    ap.add_argument("--force", action="store_true", help="rebuild even if the data is up to date")
    ap.add_argument("--render", choices=("values", "addressed"),
                    help="sheets: write each cell's content, or 'G4:=E4+F4'")
    ap.add_argument("--workbooks", type=int, default=600, help="sheets without --src: synthetic workbooks")
    ap.add_argument("--conversations", type=int, help="chat: only the first N conversations (default: all)")
    ap.add_argument("--units", choices=("module", "record"),
                    help="python: level-1 sibling ranks count over the whole module (default), or restart "
                         "at each record (closer to the paper's small programs)")
    args = ap.parse_args(argv)
    setting = args.setting
    if setting and args.corpus not in (None, SETTINGS[setting]["corpus"]):
        ap.error(f"--setting {setting} prepares the {SETTINGS[setting]['corpus']} corpus, not {args.corpus}")
    args.corpus = args.corpus or setting and SETTINGS[setting]["corpus"]
    if not args.corpus:
        ap.error("name a corpus or a --setting")
    given = {k: getattr(args, k) for k in PREPARE if getattr(args, k) is not None}
    shape = {**PREPARE, **(SETTINGS[setting]["prepare"] if setting else {})}
    departs = [f"--{k} {v}" for k, v in given.items() if v != shape[k]]
    for k, v in {**shape, **given}.items():
        setattr(args, k, v)
    if setting:   # recorded only when the data is exactly the setting's
        shown = ("vocab", "max_len", "long", "split", *CORPORA[args.corpus].options)
        print(f"setting {setting}: {args.corpus}, " + " ".join(f"--{k} {getattr(args, k)}" for k in shown)
              + (f"; {', '.join(departs)} given, so meta.json records no setting" if departs else ""))
        setting = None if departs else setting
    for flag, low in (("max_len", 2), ("vocab", 256), ("bpe_bytes", 1), ("workers", 1), ("workbooks", 1),
                      ("conversations", 1)):   # max_len: a record needs a next token; vocab: 256 byte tokens first
        if getattr(args, flag) is not None and getattr(args, flag) < low:
            ap.error(f"--{flag} must be at least {low} (got {getattr(args, flag)})")
    if args.vocab > 65536 * 4:
        ap.error(f"--vocab {args.vocab} is larger than this tokeniser supports (262,144)")

    entry = CORPORA[args.corpus]
    items, dirs = entry.sources(args)
    out_dir = os.path.join(args.out, args.corpus)
    pattern = entry.pattern
    settings = {"format": trees.FORMAT, "corpus": args.corpus, "sources": [os.path.abspath(d) for d in dirs],
                "vocab": args.vocab,
                "max_len": args.max_len, "long": args.long, "bpe_bytes": args.bpe_bytes,
                **{k: getattr(args, k) for k in entry.options},
                **({"split": args.split} if args.split != PREPARE["split"] else {}),   # older data: hash
                **({"setting": setting} if setting else {}),
                "defaults": entry.defaults(),
                "files": hashlib.sha1("\n".join(f"{n}:{_size(p)}" for n, p in items).encode()).hexdigest()}
    meta_path = os.path.join(out_dir, "meta.json")
    if not args.force and os.path.exists(meta_path):
        with open(meta_path) as f:
            if json.load(f).get("settings") == settings:
                print(f"{out_dir} is up to date (use --force to rebuild)")
                return out_dir
    t0 = time.time()
    docs, skipped = build_docs(args.corpus, items, args.workers, args.render)
    if args.corpus == "webtext":   # App. C.1: near-duplicate pages removed, the first kept
        dup = near_duplicates([d.text for _, d in docs])
        skipped["near-duplicate (5-gram MinHash > 0.5)"] += len(dup)
        docs = [x for i, x in enumerate(docs) if i not in dup]
    if not docs:
        sys.exit(f"error: no usable documents in {dirs} (skipped: {dict(skipped)})")
    t_trees = time.time() - t0
    p1_cap = entry.p1_cap(docs) if entry.p1_cap else None
    split = contiguous_split([n for n, _ in docs]) if args.split == "contiguous" else \
        {name: split_of(name) for name, _ in docs}

    t0 = time.time()
    ranks = tokenizer.train((d.text for n, d in docs if split[n] == "train"), args.vocab, args.bpe_bytes, pattern)
    enc = tokenizer.encoding(ranks, pattern)
    t_bpe = time.time() - t0
    tok_len = tokenizer.token_lengths(enc)

    t0 = time.time()
    all_ids = enc.encode_ordinary_batch([d.text for _, d in docs], num_threads=args.workers)
    t_encode = time.time() - t0
    # known only once encoded: a document over the token cap (the BPE has seen it; no record will
    # hold it) and, for webtext, one under App. C.1's 128 tokens (our BPE's) are counted skips
    def too_few_or_many(ids):
        if len(ids) > trees.MAX_DOC_TOKENS:
            return trees.too_large("a document", trees.MAX_DOC_TOKENS, "tokens").reason
        return "shorter than 128 tokens" if args.corpus == "webtext" and len(ids) < 128 else None
    why = [too_few_or_many(ids) for ids in all_ids]
    skipped.update(w for w in why if w)
    docs, all_ids = [d for d, w in zip(docs, why) if not w], [x for x, w in zip(all_ids, why) if not w]
    split = {name: split[name] for name, _ in docs}
    if not docs:
        sys.exit(f"error: no usable documents in {dirs} (skipped: {dict(skipped)})")
    t0 = time.time()
    recs = {s: [] for s in SPLITS}
    stats = collections.Counter()
    depth_hist = collections.Counter()
    rank_values = []
    for di, ((name, doc), ids) in enumerate(tqdm(list(zip(docs, all_ids)), desc="coordinates", unit="doc")):
        c = token_coords(doc, np.asarray(ids, np.int64), tok_len)
        c["tokens"] = np.asarray(ids, np.int64)
        depth_n, _ = doc.node_coords()
        stats["nodes"] += len(doc.parent)
        stats["nodes_owning_tokens"] += len(np.unique(c["node"][c["node"] >= 0]))
        stats["tokens"] += len(ids)
        stats["deeper_than_levels"] += int((depth_n > trees.LEVELS).sum())
        depth_hist.update(depth_n.tolist())
        rank_values.append(doc.rank if entry.root_ranks else doc.rank[doc.parent >= 0])
        rs = records(c, args.max_len, args.long, entry.starts(c, doc), p1_cap, args.units == "record")
        stats["records_dropped_long"] += not rs
        for r in rs:
            r["doc"] = di
        recs[split[name]].extend(rs)
    t_coords = time.time() - t0

    tmp = out_dir + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    counts = {s: {"records": len(recs[s]), "tokens": write_split(tmp, s, recs[s]),
                  "documents": sum(v == s for v in split.values())} for s in SPLITS}
    tokenizer.save(ranks, os.path.join(tmp, "tokenizer.json"), pattern)
    ranks_all = np.concatenate(rank_values) if rank_values else np.zeros(1)
    meta = {
        "settings": settings,
        "synthetic": any(d.synthetic for _, d in docs),
        "documents": len(docs), "skipped": dict(skipped), "skipped_total": sum(skipped.values()),
        "splits": counts,
        "tokens": stats["tokens"], "nodes": stats["nodes"],
        "nodes_per_token": stats["nodes"] / max(stats["tokens"], 1),
        # a node owns a token when that token's first byte with a node is the node's (data.token_coords);
        # a node whose text lies inside another's token owns none. The paper's 0.86 may count every node.
        "nodes_owning_tokens": stats["nodes_owning_tokens"],
        "nodes_owning_tokens_per_token": stats["nodes_owning_tokens"] / max(stats["tokens"], 1),
        "sibling_rank_p99": float(np.percentile(ranks_all, 99)), "sibling_rank_max": int(ranks_all.max()),
        "record_sibling_rank": record_rank_stats(recs["train"]),
        "depth_histogram": {int(k): v for k, v in sorted(depth_hist.items())},
        "nodes_deeper_than_22_levels": stats["deeper_than_levels"],
        "records_dropped_long": stats["records_dropped_long"],
        "tokenizer": {"kind": "byte-level BPE (rustbpe, trained here)", "vocab": enc.n_vocab, "pattern": pattern,
                      "trained_on_bytes": min(args.bpe_bytes, sum(len(d.text) for n, d in docs if split[n] == "train"))},
        "seconds": {"trees": round(t_trees, 1), "bpe_train": round(t_bpe, 1),
                    "tiktoken_encode": round(t_encode, 1), "coordinates": round(t_coords, 1)},
        "kinds": trees.KIND_NAMES,
        "kind_tokens": {name: sum(int(((r["kind"] & flag) > 0).sum()) for s in SPLITS for r in recs[s])
                        for flag, name in trees.KIND_NAMES.items()},
    }
    notes = collections.Counter()
    for _, d in docs:
        notes.update(d.notes or {})
    if notes:
        meta["notes"] = dict(notes)
    if any(d.ref_path is not None for _, d in docs):   # explicit reference targets (workbooks)
        meta["references"] = sum(len(d.ref_path or {}) for _, d in docs)
    if "p" in (recs["train"][0] if recs["train"] else {}):
        meta.update(paragraph_stats(recs["train"]), p1_cap=p1_cap)
    with open(os.path.join(tmp, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
    shutil.rmtree(out_dir, ignore_errors=True)
    os.replace(tmp, out_dir)
    if meta["synthetic"]:
        print("NOTE: this corpus is SYNTHETIC (generated workbooks), as meta.json records")
    for s in SPLITS:
        if not counts[s]["records"]:
            print(f"WARNING: the {s} split is empty ({len(docs)} documents, split 90/5/5 by name); "
                  f"train.py refuses a corpus without {s} records: add documents")
    print(json.dumps({k: meta[k] for k in ("synthetic", "documents", "skipped", "tokens", "nodes_per_token",
                                           "sibling_rank_p99", "sibling_rank_max", "record_sibling_rank",
                                           "seconds")}, indent=1))
    return out_dir


if __name__ == "__main__":
    main()
