"""Any tree in, beyond both papers: JSON, XML and Markdown as trees, each `raw -> Doc` or a `Skip`,
read from the files installed packages and /usr/share ship (or --src). Each builder's *_coords
scanner decides every character's node from the text up to it, so sample.py calls it on a growing text.
"""
import functools
import json
import math
import os
import sys
import sysconfig

import numpy as np

from treerope.corpora import Corpus, build, find_files
from treerope.corpora.paragraphs import paragraph_starts, paragraph_summary, paragraph_tally
from treerope.corpora.text import source_text
from trees import (
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


# -------------------------------------------------- JSON: compact JSON as a tree (beyond the papers) ----
def json_doc(raw, max_levels=LEVELS, max_width=MAX_WIDTH):
    """Bytes of a .json file -> Doc of its compact form (json.loads of the text equals the
    input's). Documents deeper than 22 levels or wider than 318 siblings are skipped, as web
    pages are (a member is a level: `{"a": 1}` puts 1 at depth 3).

    Objects, members, arrays and values are nodes. An object's children are its members (rank =
    member index); a member writes `"key":` and has one child, its value; an array's children
    are its values. A container writes its brackets and the commas between its children; a
    scalar writes itself. The nodes are assigned by a scanner (json_coords) that reads the text
    left to right and decides each character's node from the text up to and including it
    (appendix §5's no-look-ahead rule), so sample.py can call it on a growing text."""
    text = source_text(raw)
    def no_constant(name):          # NaN and Infinity: Python reads them, JSON has no such values
        raise ValueError(f"{name} is not json")

    def finite(number):             # 1e400 reads as inf, which would be written as Infinity: not JSON
        if not math.isfinite(float(number)):
            raise ValueError("a number out of range")
        return float(number)

    def unique(pairs):              # {"a":1,"a":2} would silently become {"a":2}
        if len({k for k, _ in pairs}) < len(pairs):
            raise ValueError("a duplicate key")
        return dict(pairs)
    try:
        value = json.loads(text, parse_constant=no_constant, parse_float=finite, object_pairs_hook=unique)
    except RecursionError:
        raise Skip("deeper than 22 levels")
    except ValueError as e:
        raise Skip(f"invalid json ({getattr(e, 'msg', str(e)).lower()})")
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    longest = max((len(s) for s in _json_strings(value)), default=0)
    check_size("a json string", longest, MAX_TEXT_CHARS)            # one value, as a page's text node
    doc = json_coords(text)
    if (doc.rank >= max_width).any():
        raise Skip(f"wider than {max_width} siblings")
    if doc.node_coords()[0].max() > max_levels:
        raise Skip(f"deeper than {max_levels} levels")
    return doc


def _json_strings(value):
    """Every key and string value of a parsed JSON document."""
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            yield v
        elif isinstance(v, dict):
            yield from v
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)


_JSON_SCALAR = set("0123456789+-.eEtruefalsn")   # the characters numbers, true, false and null use


def json_coords(text):
    """Compact JSON text, or any prefix of it (a sampler's text so far) -> Doc. Each character's
    node depends only on the characters before it and itself."""
    parent, rank, types = [], [], []
    char_node = np.full(len(text), -1, np.int32)
    stack = []          # open nodes: [node, type, children so far]
    string = None       # node owning the open string, or None
    escaped = scalar = False

    def new(typ):       # a node at the current value position (the top-level value: under no node)
        top = stack[-1] if stack else [-1, None, 0]
        parent.append(top[0])
        rank.append(top[2])
        top[2] += 1
        types.append(typ)
        return len(parent) - 1

    def close():        # a value ended: a member with its value is complete too
        if stack and stack[-1][1] == "member" and stack[-1][2]:
            stack.pop()

    for i, c in enumerate(text):
        if string is not None:                               # to the string's unescaped closing quote
            char_node[i] = string
            if c == '"' and not escaped:
                string = None
                if types[char_node[i]] != "member":
                    close()
            escaped = c == "\\" and not escaped
            continue
        if scalar:
            if c in _JSON_SCALAR:
                char_node[i] = len(parent) - 1
                continue
            scalar = False
            close()
        top = stack[-1] if stack else None
        if c in "{[":
            nid = new("object" if c == "{" else "array")
            stack.append([nid, types[nid], 0])
            char_node[i] = nid
        elif c in "}]" and top:
            char_node[i] = top[0]
            if top[1] != "member":
                stack.pop()
                close()
        elif c == '"' and top and top[1] == "object":       # a key opens a member
            nid = new("member")
            stack.append([nid, "member", 0])
            char_node[i] = string = nid
        elif c == '"':
            char_node[i] = string = new("string")
        elif c in _JSON_SCALAR:
            char_node[i] = new("number" if c in "0123456789-"
                               else {"t": "true", "f": "false"}.get(c, "null"))
            scalar = True
        elif top:                                            # , : and anything else: the open node
            char_node[i] = top[0]
    return Doc(text, char_node, np.asarray(parent, np.int32), np.asarray(rank, np.int32),
               label=first_appearance(types))


# ----------------------------------------------- XML: canonical XML as a tree (beyond the papers) ----
def canonical(tree):
    """C14N 1.0, or 2.0 where 1.0 refuses (relative namespace URIs such as xmlns:ns="ns"); 2.0 also
    moves namespace declarations to where they are used, so 1.0 stays the form of every other file."""
    import lxml.etree
    try:
        return lxml.etree.tostring(tree, method="c14n", with_comments=False)
    except lxml.etree.C14NError:
        return lxml.etree.tostring(tree, method="c14n2", with_comments=False)


def xml_doc(raw, max_levels=LEVELS, max_width=MAX_WIDTH):
    """Bytes of an XML file -> Doc of its canonical form. No DTD is loaded and nothing is fetched;
    documents deeper than 22 levels or wider than 318 siblings are skipped, as web pages are.

    Elements, attributes and text are nodes. The text is the input's C14N form (`canonical`: attributes
    sorted, namespaces kept, empty elements written out, comments dropped). An element writes
    its tag name, the `>` of its start tag and its end tag; its children are its attributes
    (each writes ` name="value"`, from the space), then its content: text runs and child
    elements in order. A `<` belongs to no node: only the character after it says whether a
    child starts or the element ends (a token takes the node of its first byte that has one, as
    web text does). Labels are node kinds (element, attribute, text, pi), not tag names, which
    are known only when the name ends. A scanner (xml_coords) assigns the nodes, each character
    from the text up to it, so sample.py can call it on a growing text."""
    import lxml.etree
    check_size("a page", len(raw), MAX_PAGE_BYTES, "bytes")        # lxml's memory, as for HTML
    # huge_tree: past 10 MB lxml would refuse a text node as "invalid"; our caps bound it instead
    parser = lxml.etree.XMLParser(no_network=True, load_dtd=False, remove_comments=True, huge_tree=True)
    try:
        tree = lxml.etree.fromstring(raw, parser).getroottree()
        for node in tree.iter():
            for s in (node.text, node.tail, *node.attrib.values()):
                check_size("a text node", len(s or ""), MAX_TEXT_CHARS)
        text = canonical(tree).decode("utf-8")
        check_size("a document", len(text), MAX_DOC_CHARS)
    except lxml.etree.XMLSyntaxError as e:      # libxml2's error type, e.g. ERR_TAG_NAME_MISMATCH
        kind = e.error_log.last_error.type_name if e.error_log else "ERR_SYNTAX"   # or WAR_…
        raise Skip(f"invalid xml ({kind.split('_', 1)[1].replace('_', ' ').lower()})")
    except (lxml.etree.C14NError, ValueError):
        raise Skip("invalid xml (neither C14N 1.0 nor 2.0 gives a canonical form)")
    doc = xml_coords(text)
    if (doc.rank >= max_width).any():
        raise Skip(f"wider than {max_width} siblings")
    if doc.node_coords()[0].max(initial=0) > max_levels:
        raise Skip(f"deeper than {max_levels} levels")
    return doc


def xml_coords(text):
    """Canonical XML text, or any prefix of it -> Doc. Each character's node depends only on the
    characters before it and itself."""
    parent, rank, kinds = [], [], []
    char_node = np.full(len(text), -1, np.int32)
    stack = []                  # open elements: [node, children so far]
    state, node, quote = "content", -1, None

    def new(kind):
        top = stack[-1] if stack else [-1, sum(p < 0 for p in parent)]   # the root's siblings: pis
        parent.append(top[0])
        rank.append(top[1])
        top[1] += 1
        kinds.append(kind)
        return len(parent) - 1

    for i, c in enumerate(text):
        if state == "content":
            if c == "<":
                state, node = "lt", -1
                continue
            if node < 0 or kinds[node] != "text":
                node = new("text") if stack else -1     # outside the root element: separators
            char_node[i] = node
        elif state == "lt":
            state, node = _after_lt(c, stack, new)
            char_node[i] = node
        elif state == "name":                           # a start tag: name, attributes, `>`
            if c == " ":
                node, state = new("attribute"), "attribute"
            elif c == ">":
                char_node[i], state, node = stack[-1][0], "content", -1
                continue
            char_node[i] = node
        elif state == "attribute":
            char_node[i] = node
            if quote:
                quote = None if c == quote else quote
            elif c in "\"'":
                quote = c
            elif c in " >":                             # the next attribute, or the tag's end
                char_node[i] = stack[-1][0] if c == ">" else new("attribute")
                node = char_node[i]
                if c == ">":
                    state, node = "content", -1
        elif state == "end":                            # `</name>`: the element's own end tag
            char_node[i] = node
            if c == ">":
                stack.pop()
                state, node = "content", -1
        else:                                           # a processing instruction, to `?>`
            char_node[i] = node
            if c == ">" and text[i - 1] in "?-]":
                state, node = "content", -1
    return Doc(text, char_node, np.asarray(parent, np.int32), np.asarray(rank, np.int32),
               label=first_appearance(kinds))


def _after_lt(c, stack, new):
    """After `<`, the next character decides: an end tag, a pi or a new element -> (state, node)."""
    if c == "/":
        return "end", stack[-1][0] if stack else -1
    if c in "?!":
        return "pi", new("pi")
    node = new("element")
    stack.append([node, 0])
    return "name", node


# ----------------------- Markdown: sections, blocks, sentences; also hRoPE's p1/p2 (beyond the papers) ----
def markdown_doc(raw):
    """Bytes of a Markdown file -> Doc (the text unchanged).

    A `# ` .. `###### ` heading opens a section under the nearest open section of a lower level
    (document -> section -> subsection); the section writes its title. Blocks (paragraphs,
    lists, code) are runs of lines separated by blank lines (inside a ``` or ~~~ fence a blank
    line does not separate) and are children of the innermost section; sentences are children
    of blocks and write the text. p1 = block (a heading counts), p2 = sentence in it, as App.
    C.1's rules for WikiText: a sentence starts at an uppercase letter or quote after [.!?] and
    whitespace. Readings, so that each character's node follows from the text up to it
    (markdown_coords): the `#` run of a heading belongs to no node (only the space after it
    makes the line a heading); a setext heading (a title underlined by === or ---) is a
    paragraph, since only the line after it would say otherwise; a fence that opens inside a
    paragraph stays in that paragraph's block."""
    text = source_text(raw).replace("\r\n", "\n")
    if not text.strip():
        raise Skip("empty")
    return markdown_coords(text)


def markdown_coords(text):
    """Markdown text, or any prefix of it -> Doc with p1/p2; no look-ahead."""
    parent, rank, kinds, children = [], [], [], {-1: 0}
    char_node = np.full(len(text), -1, np.int32)
    char_p = np.zeros((len(text), 3), np.int32)
    sections = []                # open sections: (level, node)
    block = sentence = -1        # open block and sentence nodes
    p1, p2 = -1, 0
    line_start, hashes, blank, fence, ticks, ended, gap = True, 0, True, None, "", 0, False

    def new(p, kind):
        parent.append(p)
        rank.append(children[p])
        children[p] += 1
        children[len(parent) - 1] = 0
        kinds.append(kind)
        return len(parent) - 1

    for i, c in enumerate(text):
        if line_start and c == "#" and fence is None:
            hashes += 1                                   # a heading's marks: no node yet
            char_p[i] = (max(p1, 0), p2, 0)
            continue
        if hashes:
            if c == " " and hashes <= 6:                  # a heading: its section writes the title
                while sections and sections[-1][0] >= hashes:
                    sections.pop()
                sec = new(sections[-1][1] if sections else -1, "section")
                sections.append((hashes, sec))
                block, sentence, p1, p2 = -1, sec, p1 + 1, 0
                hashes, line_start, gap = 0, False, False
                char_node[i], char_p[i] = sec, (p1, p2, 0)
                continue
            hashes = 0                                    # `#tag`: the line is text after all
        if c == "\n":
            if blank and fence is None:
                gap = True                                # a blank line ends the block
            elif sentence >= 0 and block < 0:
                gap = True                                # a heading line ends with its newline
            char_node[i], char_p[i] = sentence, (max(p1, 0), p2, 0)
            line_start, blank, ticks, ended = True, True, "", 2 if ended else 0
            continue
        if line_start and c in "`~" or ticks:             # a fence line: ``` or ~~~ opens or closes
            ticks = ticks + c if c in "`~" and (not ticks or c == ticks[0]) else ticks
            if len(ticks) == 3 and c in "`~":
                fence = None if fence == ticks else fence or ticks
        if not c.isspace():
            if gap or sentence < 0:                       # a new block, under the innermost section
                block = new(sections[-1][1] if sections else -1, "block")
                sentence, p1, p2, gap = new(block, "sentence"), p1 + 1, 0, False
            elif ended == 2 and block >= 0 and (c.isupper() or c in "\"'"):
                sentence, p2 = new(block, "sentence"), p2 + 1
            ended, blank = int(c in ".!?"), False         # 1: after [.!?]; 2: and whitespace since
        elif ended:
            ended = 2
        line_start = False
        char_node[i], char_p[i] = sentence, (max(p1, 0), p2, 0)
    return Doc(text, char_node, np.asarray(parent, np.int32), np.asarray(rank, np.int32),
               char_p=char_p, label=first_appearance(kinds))


# Files shipped inside installed packages and under /usr/share (real files, offline): where the
# json, xml and markdown corpora look when no --src is given.
SHIPPED = (sysconfig.get_paths()["purelib"], "/usr/share", "/usr/lib/node_modules")


def shipped_sources(exts, near=None):
    def sources(args):
        dirs = args.src or [d for d in SHIPPED if os.path.isdir(d)]
        items = find_files(dirs, exts, bool(args.src), near)   # given in --src: counted
        if not items:
            sys.exit(f"error: no {'/'.join(exts)} files under {dirs}"
                     + ("" if args.src else "; pass --src DIR"))
        return items, dirs
    return sources


json_sources = shipped_sources((".json",))
xml_sources = shipped_sources((".xml", ".xsd", ".xsl", ".svg"))
markdown_sources = shipped_sources((".md", ".markdown"), {".rst": "reStructuredText (.rst), not markdown"})


def children_of_root(c, doc):
    """Where a record may start (json, xml): a member, element or child of the top-level node."""
    return np.r_[True, c["node"][1:] != c["node"][:-1]] & (c["depth"] == 2)


CORPORA = {   # beyond the papers: any tree whose text determines it (sample.py serves these three)
    "json": Corpus(json_sources, functools.partial(build, builder=json_doc), children_of_root),
    "xml": Corpus(xml_sources, functools.partial(build, builder=xml_doc), children_of_root),
    "markdown": Corpus(markdown_sources, functools.partial(build, builder=markdown_doc), paragraph_starts,
                       record_tally=paragraph_tally, record_stats=paragraph_summary),
}
