"""Web pages: the DOM's visible text (depth-perception appendix §4 "Web text").

    python prepare.py web               # the HTML pages python3-doc installs
    python prepare.py web --src DIR     # .html/.htm, .warc/.warc.gz

Nodes are retained elements and text runs with a non-space character; paths start at the children
of body; only text emits characters, blocks joined by a space ("all markup is removed, so document
structure reaches the model only through the rotation"; `--blocks newline`: the older stream).
The record rule: a record may start at a new text block.
"""
import functools
import itertools
import sys

import numpy as np

from treerope.corpora import Corpus, build, find_files, first_place
from treerope.corpora.warc import warc_items
from trees import (
    KIND_NEW_BLOCK,
    LEVELS,
    MAX_DOC_CHARS,
    MAX_PAGE_BYTES,
    MAX_TEXT_CHARS,
    MAX_WIDTH,
    Doc,
    Skip,
    check_size,
    first_appearance,
)

WEB_SKIP = {"head", "script", "style", "svg", "iframe", "noscript", "template"}
# elements whose boundaries end a text block: its first token is a new_block token
WEB_BLOCKS = {"address", "article", "aside", "blockquote", "body", "br", "caption", "dd", "details",
              "div", "dl", "dt", "fieldset", "figcaption", "figure", "footer", "form", "h1", "h2", "h3",
              "h4", "h5", "h6", "header", "hr", "li", "main", "nav", "ol", "p", "pre", "section",
              "summary", "table", "td", "th", "tr", "ul"}


def html_root(html):
    """HTML (bytes or str) -> lxml root, or Skip. huge_tree: without it lxml drops, silently, a
    text node past 10 MB and everything nested past 256 elements (and all text after it); with
    it the limits are 2,048 levels and our caps (MAX_TEXT_CHARS, the callers' depth caps)."""
    import lxml.etree
    import lxml.html
    if isinstance(html, bytes) and html[:2] in (b"\xff\xfe", b"\xfe\xff"):   # UTF-16 has NUL bytes
        html = html.decode("utf-16", "replace")
    elif isinstance(html, bytes) and b"\0" in html[:8192]:
        raise Skip("binary (NUL bytes)")
    check_size("a page", len(html), MAX_PAGE_BYTES, "bytes")
    try:
        return lxml.html.document_fromstring(html, parser=lxml.html.HTMLParser(huge_tree=True))
    except (lxml.etree.ParserError, ValueError):
        raise Skip("empty or unparsable html")


BLOCK_SEPARATORS = {"space": " ", "newline": "\n"}


def web_doc(html, max_levels=LEVELS, max_width=MAX_WIDTH, blocks="space"):
    """HTML (bytes or str) -> Doc. Nodes are retained elements and text runs with a non-space
    character; paths start at the children of body; only text emits characters, so every
    token-carrying node is a leaf. Blocks are joined by BLOCK_SEPARATORS[blocks]; inside <pre> the
    whitespace is visible text and kept. Pages deeper than 22 levels or wider than 318 siblings are
    skipped (appendix §4 "What is excluded")."""
    root = html_root(html)
    body = root.find("body")
    if body is None:
        body = root
    parent, rank, depth_of, tags = [], [], [], []
    pieces, piece_node, piece_block, raw_edges, piece_pre = [], [], [], [], []
    chars = 0

    def add_node(p, r, d, tag):
        if d > max_levels:
            raise Skip("deeper than 22 levels")
        if r >= max_width:
            raise Skip("wider than 318 siblings")
        parent.append(p)
        rank.append(r)
        depth_of.append(d)
        tags.append(tag)
        return len(parent) - 1

    def walk(el, nid, d, block, pre):
        """Children of element `el` (node id nid, or -1 for body) in document order."""
        nonlocal chars
        r = 0
        runs = itertools.chain([(el.text, None)], ((c.tail, c) for c in el))  # lazy: a width skip comes early
        for text, child in runs:
            if child is not None and isinstance(child.tag, str) and child.tag.lower() not in WEB_SKIP:
                tag = child.tag.lower()
                cid = add_node(nid, r, d + 1, tag)
                r += 1
                walk(child, cid, d + 1, cid if tag in WEB_BLOCKS else block, pre or tag == "pre")
                if tag in WEB_BLOCKS:   # text after a block element starts a new block
                    block = ("after", cid)
            if not text or not (text.strip() or pre):
                continue
            check_size("a text node", len(text), MAX_TEXT_CHARS)
            tid = -1                           # whitespace between runs inside <pre>: text of no node
            if text.strip():                   # a text run is labelled by the element holding it
                tid = add_node(nid, r, d + 1, tags[nid] if nid >= 0 else "body")
                r += 1
            pieces.append(text if pre else " ".join(text.split()))
            chars += len(pieces[-1]) + 1
            check_size("a document", chars, MAX_DOC_CHARS)
            piece_node.append(tid)
            piece_block.append(block)
            raw_edges.append((text[0].isspace(), text[-1].isspace()))
            piece_pre.append(pre)

    walk(body, -1, 0, "body", body.tag == "pre")
    if not any(n >= 0 for n in piece_node):
        raise Skip("no visible text")
    text, char_node, kind = _join_runs(pieces, piece_node, piece_block, raw_edges, piece_pre,
                                       BLOCK_SEPARATORS[blocks])
    return Doc(text, np.asarray(char_node, np.int32), np.asarray(parent, np.int32),
               np.asarray(rank, np.int32), char_kind=np.asarray(kind, np.uint8), label=first_appearance(tags))


def _join_runs(pieces, piece_node, piece_block, raw_edges, piece_pre, block_sep):
    """The page's text runs joined: `block_sep` between blocks, inside <pre> as they stand, else a
    space where the source had one. A block starts at its first run with a node (new_block)."""
    last_node = {b: i for i, (b, n) in enumerate(zip(piece_block, piece_node)) if n >= 0}
    text, char_node, kind, prev = [], [], [], None
    for i, s in enumerate(pieces):
        block = piece_block[i]
        new_block = prev is None or block != piece_block[prev]
        if piece_node[i] < 0 and (new_block or i > last_node.get(block, -1)):
            continue                                   # <pre> whitespace before or after its block's text
        if piece_pre[i]:
            s = s.lstrip() if new_block else s
            s = s.rstrip() if i == last_node[block] else s
        if prev is not None:
            sep = block_sep if new_block else "" if piece_pre[prev] and piece_pre[i] else \
                " " if raw_edges[prev][1] or raw_edges[i][0] else ""
            text.append(sep)
            char_node.extend([-1] * len(sep))          # separators belong to no node
            kind.extend([0] * len(sep))
        text.append(s)
        char_node.extend([piece_node[i]] * len(s))
        kind.extend([KIND_NEW_BLOCK if new_block else 0] + [0] * (len(s) - 1))
        prev = i
    return "".join(text), char_node, kind


# Where `prepare.py web` looks for real HTML when no --src is given (first hit wins).
WEB_PLACES = ["/usr/share/doc/python3/html", "/usr/share/doc/python3.*/html",
              "/usr/share/doc/python3-doc/html", "/usr/share/doc/*/html"]


def web_sources(args):
    dirs = args.src or first_place(WEB_PLACES, (".html", ".htm"))
    if not dirs:
        sys.exit("error: no HTML pages found on this machine (looked in " + ", ".join(WEB_PLACES) + ").\n"
                 "On Debian/Ubuntu: sudo apt-get install python3-doc  (about 530 real pages),\n"
                 "or pass your own pages: python prepare.py web --src DIR  (.html/.htm/.warc/.warc.gz)")
    items = []
    for name, path in find_files(dirs, (".html", ".htm", ".warc", ".warc.gz"), bool(args.src)):
        if isinstance(path, str) and path.endswith((".warc", ".warc.gz")):   # a web archive: warc.py reads it
            items += warc_items(name, path)
        else:
            items.append((name, path))
    if not items:
        sys.exit(f"error: no .html/.htm/.warc files under {dirs}")
    return items, dirs


def text_blocks(c, doc):
    """Where a record may start: a new text block."""
    return (c["kind"] & KIND_NEW_BLOCK) > 0


def build_web(item, blocks="space"):
    return build(item, functools.partial(web_doc, blocks=blocks))


CORPORA = {
    "web": Corpus(web_sources, build_web, text_blocks, options=("blocks",),
                  attention=("same_depth",)),
}
