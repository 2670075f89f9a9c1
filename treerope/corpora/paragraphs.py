"""Paragraph corpora as trees (hRoPE, paper 004 §3.1, §3.4, App. C.1): prose (.rst, plain text,
WikiText), code and web text, each `source -> Doc` or a `Skip`; their sources, the near-duplicate
removal of web text, and the record rule (a record may start at a new paragraph or block).

    python prepare.py prose             # the reStructuredText sources python3-doc installs
    python prepare.py code              # the standard library, as blocks and lines
    python prepare.py webtext           # main-text paragraphs of the HTML under /usr/share/doc
"""
import collections
import functools
import glob
import os
import re
import sys
import zlib

import numpy as np

from treerope.corpora import Corpus, build, find_files, first_place, python, unusable, web
from treerope.corpora.text import source_text
from treerope.corpora.web import WEB_BLOCKS, WEB_SKIP, html_root
from trees import MAX_FILE_BYTES, MAX_TEXT_CHARS, Doc, Skip, check_size, too_large

# ------------------------- hRoPE paragraph corpora (paragraph-boundaries paper §3.1, §3.4, App. C.1) ----
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'])")   # App. C.1, WikiText-2
WIKI_TITLE = re.compile(r"^\s*=\s[^=].*[^=]\s=\s*$")         # a top-level heading starts a document
WIKI_HEADING = re.compile(r"^\s*(=\s)+.*(\s=)+\s*$")
MIN_PARAGRAPH = 20                                          # shorter paragraphs are dropped


def _hier_doc(text, spans):
    """spans: (start, end, p1, p2) character ranges in reading order, one node each.

    Every character carries (p1, p2): paragraph (or code block) index in the document and
    sentence (or line) index in its paragraph; p3, the token's index in its sentence, is filled
    per token by prepare.py. The tree is the same hierarchy: paragraphs at depth 1, their
    sentences at depth 2. Separators (the blank line, the space between sentences, a newline)
    belong to no node and keep the (p1, p2) of the text before them, so a coordinate never
    depends on text that follows it."""
    n = len(text)
    char_node = np.full(n, -1, np.int32)
    parent, rank, para_node = [], [], {}
    for start, end, p1, p2 in spans:
        if p1 not in para_node:
            para_node[p1] = len(parent)
            parent.append(-1)
            rank.append(p1)
        char_node[start:end] = len(parent)
        parent.append(para_node[p1])
        rank.append(p2)
    # every character takes the (p1, p2) of the last span started at or before it
    starts = np.array([s[0] for s in spans])
    latest = np.searchsorted(starts, np.arange(n), side="right") - 1
    char_p = np.zeros((n, 3), np.int32)
    char_p[:, :2] = np.where(latest[:, None] >= 0, np.array([s[2:] for s in spans])[latest], 0)
    return Doc(text, char_node, np.asarray(parent, np.int32), np.asarray(rank, np.int32), char_p=char_p)


def paragraphs_doc(paragraphs, min_chars=MIN_PARAGRAPH):
    """Paragraph strings -> Doc: paragraphs under min_chars dropped, sentences split (App. C.1),
    the paragraphs joined by one blank line."""
    paragraphs = [" ".join(p.split()) for p in paragraphs]
    paragraphs = [p for p in paragraphs if len(p) >= max(min_chars, 1)]
    if not paragraphs:
        raise Skip(f"no paragraph of {min_chars}+ characters")
    text, spans, at = [], [], 0
    for p1, para in enumerate(paragraphs):
        if p1:
            text.append("\n\n")
            at += 2
        s = 0
        for p2, m in enumerate(list(SENTENCE_END.finditer(para)) + [None]):
            e = m.start() if m else len(para)
            spans.append((at + s, at + e, p1, p2))
            s = m.end() if m else s
        text.append(para)
        at += len(para)
    return _hier_doc("".join(text), spans)


def wikitext_documents(text):
    """WikiText-style text -> [(title, paragraphs)]: a single-equals heading starts a document,
    heading lines are discarded, paragraphs split on blank lines, @-@ escapes normalised."""
    text = re.sub(r" @([-,.])@ ", r"\1", text)
    docs = []
    for line in text.split("\n"):
        if WIKI_TITLE.match(line):
            docs.append([line.strip(" =\t"), []])
        elif not docs:
            docs.append(["", []])
        if not WIKI_HEADING.match(line):
            docs[-1][1].append(line)
    return [(title, re.split(r"\n\s*\n", "\n".join(lines))) for title, lines in docs]


# reStructuredText: prose survives, markup and code do not (python3-doc's _sources)
_RST_ADORNMENT = re.compile(r"^([=\-~^\"'`#*+.:_<>])\1{2,}\s*$")
_RST_DIRECTIVE = re.compile(r"^(\s*)\.\.(?=\s|$)(\s+([\w:-]+)::)?")
_RST_FIELD = re.compile(r"^:[\w .-]+:(\s|$)")
_RST_CODE_DIRECTIVES = {"code-block", "sourcecode", "code", "literalinclude", "productionlist", "doctest",
                        "testcode", "testoutput", "testsetup", "testcleanup", "toctree", "image", "figure",
                        "csv-table", "list-table", "table", "raw", "highlight", "index", "math", "graphviz",
                        "only", "include", "opcode", "cmdoption", "option"}
_RST_ADMONITIONS = {"note", "warning", "seealso", "important", "tip", "caution", "attention", "danger",
                    "impl-detail", "versionadded", "versionchanged", "deprecated", "deprecated-removed"}
_RST_ROLE = re.compile(r":[\w:+-]+:`~?([^`<]*?)\s*(<[^`]*>)?`")
_RST_LINK = re.compile(r"`([^`<]+?)\s*<[^`]*>`__?")


def rst_paragraphs(text):
    """Prose paragraphs of a reStructuredText source: headings, directives (except the bodies of
    description/admonition directives), literal blocks after '::', doctests, tables, comments
    and option lines are dropped; inline roles and links keep their text."""
    lines = text.expandtabs().split("\n")
    paras, cur, skip_indent, literal_after, continued = [], [], None, False, False

    def flush():
        if cur:
            paras.append(" ".join(cur))
            cur.clear()

    for i, line in enumerate(lines):
        ind = len(line) - len(line.lstrip())
        if not line.strip():
            if cur and cur[-1].endswith("::"):
                literal_after = True
            flush()
            continue
        if skip_indent is not None:
            if ind > skip_indent:
                continue
            skip_indent = None
        if literal_after:                       # the indented block after '::' is code
            literal_after = False
            skip_indent = ind - 1 if ind > 0 else None
            if skip_indent is not None:
                continue
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        if continued:                           # a signature continued with a backslash
            continued = line.rstrip().endswith("\\")
            continue
        d = _RST_DIRECTIVE.match(line)
        if d:
            flush()
            if not d.group(2) or d.group(3) in _RST_CODE_DIRECTIVES:   # comment or code: drop body
                skip_indent = ind
            elif d.group(3) in _RST_ADMONITIONS and line[d.end():].strip():
                cur.append(line[d.end():].strip())                     # '.. note:: text'
            continued = line.rstrip().endswith("\\")
            continue
        s = line.strip()
        if (_RST_ADORNMENT.match(s) or _RST_ADORNMENT.match(nxt.strip()) and not cur
                or s.startswith((">>>", "+-", "|")) or _RST_FIELD.match(s) or re.fullmatch(r"[=\s]+", s)):
            flush()
            continue
        item = re.match(r"^([*+-]|\d+\.|#\.|\(\w\))\s+", s)
        if item:                                # a list item starts its own paragraph
            flush()
            s = s[item.end():]
        cur.append(s)
    flush()
    return [_rst_inline(p) for p in paras]


def _rst_inline(p):
    """One paragraph's inline markup (roles, links, literals, emphasis, footnotes) reduced to its text."""
    p = _RST_LINK.sub(r"\1", _RST_ROLE.sub(r"\1", p))
    p = re.sub(r"``([^`]*)``", r"\1", p)
    p = re.sub(r"\*\*([^*]+)\*\*|\*([^*]+)\*", lambda m: m.group(1) or m.group(2), p)
    p = re.sub(r"`([^`]+)`__?", r"\1", p)
    p = re.sub(r"\s*\[#[\w-]*\]_|\\ ", "", p)
    p = p.replace("`", "")
    return re.sub(r"::$", ":", p)


def prose_doc(raw, fmt="text"):
    """Bytes of one prose document -> Doc. fmt 'rst' cleans reStructuredText markup first."""
    text = source_text(raw)
    return paragraphs_doc(rst_paragraphs(text) if fmt == "rst" else re.split(r"\n\s*\n", text))


def code_doc(raw):
    """Python source -> Doc with p1 = blank-line-separated block, p2 = line in its block
    (App. C.1 'Code'); files with fewer than 2 blocks are excluded. The text is unchanged."""
    text = source_text(raw)
    spans, p1, p2, at, gap = [], -1, 0, 0, True
    for line in text.splitlines(keepends=True):
        body = line.rstrip("\r\n")
        if body.strip():
            if gap:
                p1, p2, gap = p1 + 1, 0, False
            else:
                p2 += 1
            spans.append((at, at + len(body), p1, p2))
        else:
            gap = True
        at += len(line)
    if p1 < 1:
        raise Skip("fewer than 2 blocks")
    return _hier_doc(text, spans)


# OpenWebText's stand-in (App. C.1 "OpenWebText"; newspaper's extraction, our reading): the main
# text of a page is what is left after markup a reader skips (webtext_paragraphs).
WEBTEXT_DROP = WEB_SKIP | {"nav", "header", "footer", "aside", "form", "button", "select", "menu", "pre",
                           "title", "h1", "h2", "h3", "h4", "h5", "h6"}
MAX_NESTING = 512   # our cap, well inside lxml's 2,048 (huge_tree) and Python's recursion limit
WEBTEXT_BOILERPLATE = re.compile(r"nav|menu|sidebar|footer|header|breadcrumb|related|banner|cookie|skip"
                                 r"|\btoc", re.I)


def webtext_paragraphs(html):
    """HTML (bytes or str) -> its main-text paragraphs. The first <main>, <article> or
    role="main" element is the page's text where there is one, else <body>. Dropped: WEBTEXT_DROP
    elements, elements whose class, id or role names navigation or boilerplate, and text blocks
    more than half of whose characters are link text (menus, indexes, 'next | previous').

    A paragraph is one text block (the text between two WEB_BLOCKS boundaries, as `web` splits
    it): headings, code listings (pre) and link lists are not paragraphs. Sentences split as
    WikiText-2's, and no paragraph length filter applies (C.1: "we do not apply an additional
    per-paragraph character-length filter")."""
    root = html_root(html)
    main = root.xpath("//main | //article | //*[@role='main']")
    paras, cur = [], []                     # cur: (text, in a link) runs of the open block

    def flush():
        text = "".join(t for t, _ in cur)
        chars = sum(len("".join(t.split())) for t, _ in cur)
        links = sum(len("".join(t.split())) for t, link in cur if link)
        if chars and links <= chars / 2:
            paras.append(" ".join(text.split()))
        cur.clear()

    def walk(el, link, depth):
        if depth > MAX_NESTING:
            raise Skip(f"nested deeper than {MAX_NESTING} elements")
        for text, child in [(el.text, None)] + [(c.tail, c) for c in el]:
            if child is not None and isinstance(child.tag, str):
                tag = child.tag.lower()
                marks = " ".join(child.get(k, "") for k in ("class", "id", "role"))
                if tag not in WEBTEXT_DROP and not WEBTEXT_BOILERPLATE.search(marks):
                    if tag in WEB_BLOCKS:
                        flush()
                    walk(child, link or tag == "a", depth + 1)
                    if tag in WEB_BLOCKS:
                        flush()
            if text:
                check_size("a text node", len(text), MAX_TEXT_CHARS)
                cur.append((text, link))

    start = main[0] if main else root.find("body")
    walk(root if start is None else start, False, 0)
    flush()
    return paras


def webtext_doc(raw):
    """An HTML page -> Doc of its main-text paragraphs (p1) and sentences (p2), as prose."""
    paras = webtext_paragraphs(raw)
    if not paras:
        raise Skip("no main text")
    return paragraphs_doc(paras, min_chars=1)


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
                 "or pass text files: python prepare.py prose --src DIR  "
                 "(.txt/.rst/.md; WikiText .tokens/.raw)")
    items = []
    for name, path in find_files(dirs, PROSE_EXTS, bool(args.src)):
        fmt = "rst" if name.endswith((".rst", ".rst.txt")) else "text"
        if isinstance(path, Skip):   # not a regular file (find_files): counted, never opened
            items.append((name, path))
            continue
        try:   # a file over the cap is skipped, but not WikiText's: they hold many articles, each capped
            if os.path.getsize(path) > MAX_FILE_BYTES and not name.endswith((".tokens", ".raw")):
                items.append((name, too_large("a file", MAX_FILE_BYTES, "bytes")))
                continue
            with open(path, "rb") as f:
                raw = f.read()
        except OSError as e:         # as corpora.build counts a file it cannot read
            items.append((name, Skip(f"unreadable ({e.strerror})")))
            continue
        text = raw.decode("utf-8", "replace")
        if fmt == "text" and any(WIKI_TITLE.match(line) for line in text.split("\n")):
            # WikiText: one file holds many articles; each `= Title =` starts a document
            for k, (title, paras) in enumerate(wikitext_documents(text)):
                items.append((f"{name}#{k}:{title}", ("paragraphs", paras)))
        else:
            items.append((name, (fmt, raw)))
    if not items:
        sys.exit(f"error: no {'/'.join(PROSE_EXTS)} files under {dirs}")
    return items, dirs


# `prepare.py webtext` without --src: each HTML page under /usr/share/doc once, but not python3-doc's (`prose`
# reads their .rst) nor Node.js's all.html: its chapter pages in one, by C.1 a near-duplicate of none.
WEBTEXT_ROOT = "/usr/share/doc"
WEBTEXT_SKIP = {"nodejs/api/all.html"}


def webtext_sources(args):
    """OpenWebText's stand-in (paper 004 App. C.1): real pages reachable offline, or --src."""
    if args.src:
        return web.web_sources(args)
    python_doc = {os.path.realpath(p) for pattern in web.WEB_PLACES[:3] for p in glob.glob(pattern)}
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
            if (f.lower().endswith((".html", ".htm")) and os.path.realpath(path) not in seen
                    and name not in WEBTEXT_SKIP):
                seen.add(os.path.realpath(path))
                why = unusable(path)             # find_files' rule: a FIFO is never opened
                items.append((name, Skip(why) if why else path))
    if not items:
        sys.exit(f"error: no HTML pages under {WEBTEXT_ROOT} besides python3-doc's; "
                 "pass --src DIR (.html/.htm/.warc)")
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
            continue                 # only kept texts: a duplicate of a duplicate is compared to its source
        for key in keys:
            buckets[key].append(i)
    return dropped


def blocks_p95(blocks):
    """Paper 004 App. C.1 on code: p1 truncated at the 95th percentile of blocks per file."""
    return int(np.percentile(blocks, 95)) - 1


def prose(src):
    fmt, data = src
    return paragraphs_doc(data) if fmt == "paragraphs" else prose_doc(data, fmt)


def drop_near_duplicates(texts):
    """App. C.1: near-duplicate pages removed, the first kept."""
    dup = near_duplicates(texts)
    return dup, {"near-duplicate (5-gram MinHash > 0.5)": len(dup)}


def paragraph_starts(c, doc):
    """Where a record may start: a new paragraph or block."""
    return np.r_[True, c["p"][1:, 0] != c["p"][:-1, 0]]


# ------------------------------------------------------------ hRoPE's corpus statistics ----
def paragraph_stats(recs):
    """What hRoPE's base calibration and controls need (App. C): the largest p1, p2, p3 (M_g; p1 in
    its document, clipped: the per-file distribution C.1 calibrates on), the paragraph-boundary
    density per token (rand_axial) and the mean paragraph length in tokens L (period_axial: p1 =
    floor(t / L)). Density and L count the true paragraphs, clipped or not. Our reading: M_1 is the
    largest training p1 after the corpus's p1_cap (code: C.1's 95th percentile; prose, webtext: none)."""
    return paragraph_summary(paragraph_tally(recs))


def paragraph_tally(recs):
    """paragraph_stats' maxima and sums over some records: prepare.py merges its chunks' tallies."""
    # a paragraph starts where p2 and p3 are both 0: every record start, and inside a record
    # wherever p1 moves on or would move on above the cap
    return {"p_max": np.max([r["p"].max(0) for r in recs], 0),
            "paragraphs": sum(int(((r["p"][:, 1] == 0) & (r["p"][:, 2] == 0)).sum()) for r in recs),
            "records": len(recs), "tokens": sum(len(r["p"]) for r in recs)}


def paragraph_summary(t):
    starts = t["paragraphs"] - t["records"]
    return {"p_max": [int(v) for v in t["p_max"]], "p1_density": starts / max(t["tokens"] - t["records"], 1),
            "p1_period": max(1, round(t["tokens"] / t["paragraphs"])), "paragraphs": t["paragraphs"]}


HROPE = dict(record_tally=paragraph_tally, record_stats=paragraph_summary)
CORPORA = {
    "prose": Corpus(prose_sources, functools.partial(build, builder=prose), paragraph_starts, **HROPE),
    "code": Corpus(python.python_sources, functools.partial(build, builder=code_doc), paragraph_starts,
                   p1_cap=blocks_p95, **HROPE),
    "webtext": Corpus(webtext_sources, functools.partial(build, builder=webtext_doc), paragraph_starts,
                      filter_docs=drop_near_duplicates, min_tokens=128, **HROPE),   # App. C.1: 128 tokens
}
