"""Corpora: where documents come from, how each becomes a tree (`trees.Doc`) and where a record
may start. One module per family, each ending in its table of entries, one line a corpus:

    python.py      python                    the Python serialisation (appendix §4 "Python")
    programs.py    programs                  small programs cut from modules, in that serialisation
    web.py         web                       the DOM's visible text (appendix §4 "Web text")
    sheets.py      sheets, web_sheets        workbooks and formula trees, the SYNTHETIC generator
    paragraphs.py  prose, code, webtext      paper 004's paragraph corpora (App. C.1)
    formats.py     json, xml, markdown       trees whose text determines them (beyond the papers)
    chat.py        chat                      real conversations
    text.py, warc.py                         readers: text files as Python reads source; web archives

prepare.corpus(name) imports only the module that holds `name` (settings.CORPORA names it):
`prepare.py web` reads no workbook code. Here: the Corpus entry and what the modules share.
"""
import glob
import multiprocessing
import os
import signal
import stat
import sys
from dataclasses import dataclass, field
from typing import Callable

import trees
from treerope import tokenizer


@dataclass(frozen=True)
class Corpus:
    """One corpus: where its documents come from, how they become trees and records, and what
    evaluate.py should do with it (`defaults`, written into meta.json)."""
    sources: Callable           # args -> ([(name, path or payload)], folders read)
    build: Callable             # (name, source) -> (name, Doc or None, skip reason); runs in worker processes
    starts: Callable            # record rule: (coords, Doc) -> bool per token, where a record may start
    pattern: str = tokenizer.PAT   # the BPE's pre-split pattern
    options: tuple = ()         # prepare.py flags that shape this corpus's data (kept in the settings)
    reads: tuple = ()           # its other prepare.py flags, each (flag, whether read with --src too)
    p1_cap: Callable = None     # paragraph blocks per document -> the largest p1 a record keeps, or None
    root_ranks: bool = False    # the sibling-rank statistics count the roots' ranks (a sheet's index)
    filter_docs: Callable = None   # texts -> ({index removed}, {reason: count}): corpus-wide removals
    min_tokens: int = 0         # documents with fewer tokens are counted skips
    record_tally: Callable = None   # training records -> maxima (keys ending "max") and sums; chunks merge
    record_stats: Callable = None   # the merged tally -> what meta.json adds (paper 004: the p1 statistics)
    attention: tuple = field(default=())   # evaluate.py --attention: the corpus's shares

    def defaults(self):
        """What prepare.py writes into meta.json for evaluate.py to read back."""
        return {"attention": list(self.attention)}


def build(item, builder):
    """(name, Doc, None) or (name, None, reason): one bad file never ends the run."""
    name, src = item
    try:
        if isinstance(src, trees.Skip):          # a source already known to be unusable
            raise src
        if isinstance(src, str):
            trees.check_size("a file", os.path.getsize(src), trees.MAX_FILE_BYTES, "bytes")   # before reading
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


def _worker_start(initializer, initargs):
    signal.signal(signal.SIGINT, signal.SIG_IGN)   # Ctrl-C reaches the whole process group: the main
    if initializer:                                # process alone answers it, in one line
        initializer(*initargs)


def worker_pool(workers, initializer=None, initargs=()):
    """A process pool whose workers leave Ctrl-C to the main process (no worker tracebacks)."""
    return multiprocessing.Pool(workers, _worker_start, (initializer, initargs))


def find_files(dirs, exts, given=True, near=None):
    """(name relative to its folder, path) of every regular file under `dirs` ending in one of `exts`:
    the one rule of what a walk reads. Nothing is opened before os.stat says it is a regular file: any
    other (a FIFO would block its reader forever, a socket, a device, a broken link) comes as (name,
    Skip), counted. A symbolic link to a file is read; one to a folder is not followed (a loop, or files
    read twice under two names) and, in folders a --src named (`given`), is counted, as is a file ending
    in one of `near` ({extension: why it is not read})."""
    out = []
    for d in dirs:
        try:
            mode = os.stat(d).st_mode
        except OSError:
            sys.exit(f"error: source {d!r} does not exist")
        if not stat.S_ISDIR(mode):
            out.append((d, d if stat.S_ISREG(mode) else trees.Skip(not_a_file(mode))))
            continue
        for root, subdirs, files in os.walk(d):
            linked = {s for s in subdirs if os.path.islink(os.path.join(root, s))}
            subdirs[:] = sorted(s for s in subdirs if s not in ("site-packages", "__pycache__", *linked))
            for f in sorted(files) + sorted(linked):
                p = os.path.join(root, f)
                if f not in linked and f.lower().endswith(exts):
                    why = unusable(p)
                    out.append((os.path.relpath(p, d), trees.Skip(why) if why else p))
                    continue
                why = LINKED if f in linked else next((v for k, v in (near or {}).items()
                                                       if f.lower().endswith(k)), None)
                if given and why:                    # not read: counted where a --src named it
                    out.append((os.path.relpath(p, d), trees.Skip(why)))
    return out


LINKED = "a symbolic link to a folder (not followed: pass its target as a --src of its own)"


def unusable(path):
    """Why `path` cannot be read as a file (known from os.stat, before anything opens it), or None."""
    try:
        mode = os.stat(path).st_mode
    except OSError as e:                         # a broken link, a file gone meanwhile
        return f"unreadable ({e.strerror})"
    return None if stat.S_ISREG(mode) else not_a_file(mode)


def not_a_file(mode):
    kind = "a FIFO" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode) else "a device"
    return f"not a regular file ({kind}: never opened)"


def first_place(patterns, exts):
    """[the first folder matching one of `patterns` (in order) that holds such files], or None."""
    for pattern in patterns:
        hits = sorted({os.path.realpath(p) for p in glob.glob(pattern) if os.path.isdir(p)})
        if hits and find_files(hits[:1], exts, given=False):
            return hits[:1]
    return None
