import ast
import random
import sys

import numpy as np
import pytest
from conftest import stdlib_files

import trees
from treerope import fields, tokenizer, writer
from treerope.corpora import python as pycorpus
from treerope.corpora import warc, web


def nodes_of(doc):
    """Each node's own text (without the space before it)."""
    starts = np.flatnonzero(np.r_[True, doc.char_node[1:] != doc.char_node[:-1]])
    return [doc.text[s:e].lstrip(" ") for s, e in zip(starts, np.r_[starts[1:], len(doc.text)])]


def test_hand_worked_program():
    src = "def f(a, b):\n    c = a + b\n    return c\nx = f(1, 2)\n"
    doc = pycorpus.python_doc(src)
    assert nodes_of(doc) == [
        "FunctionDef f",          # 0  depth 1, rank 0
        "arguments",              # 1  depth 2, rank 0 (FunctionDef's first field)
        "=:x0",                   # 2  depth 3: an arg in arguments' field 1 (args), one field skipped
        ":x1",                    # 3  args is a list: the next child stays in it
        "Assign",                 # 4  depth 2, rank 1: FunctionDef.args holds one child, so body is next
        "x2",                     # 5  depth 3 (definition of c)
        "=Add",                   # 6  a BinOp by its operator, in Assign.value (targets is a list)
        "x0",                     # 7  depth 4 (use of a)
        "x1",                     # 8  BinOp.right follows the single left
        "Return",                 # 9  depth 2, rank 2
        "x2",                     # 10 use of c
        "Assign",                 # 11 depth 1, rank 1 (module level: not renamed)
        "x",
        "=Call",
        "f",
        "1",                      # Call.args follows the single func
        "2",
    ]
    assert doc.text == "FunctionDef f arguments =:x0 :x1 Assign x2 =Add x0 x1 Return x2 Assign x =Call f 1 2"
    depth, path = doc.node_coords()
    assert depth.tolist() == [1, 2, 3, 3, 2, 3, 3, 4, 4, 2, 3, 1, 2, 2, 3, 3, 3]
    assert doc.rank.tolist() == [0, 0, 0, 1, 1, 0, 1, 0, 1, 2, 0, 1, 0, 1, 0, 1, 2]
    assert path[8, :5].tolist() == [0, 1, 1, 1, -1]       # f > body[1] Assign > BinOp > right
    assert path[16, :4].tolist() == [1, 1, 2, -1]
    # references: each use knows its definition; symbols by first mention
    assert doc.ref[7] == 2 and doc.ref[8] == 3 and doc.ref[10] == 5
    assert doc.ref[5] == -1 and doc.ref[14] == -1
    assert doc.symbol[[2, 3, 5, 7, 8, 10]].tolist() == [0, 1, 2, 0, 1, 2]
    # kinds, our reading of "right after a subtree closes": after_close where a subtree of 2+ nodes
    # closed (nodes 4, 9, 11), after_leaf after a leaf sibling (3, 6, 8, 13, 15, 16), none on a first child
    starts = np.flatnonzero(np.r_[True, doc.char_node[1:] != doc.char_node[:-1]])   # a node owns its space
    def flagged(k):
        return [i for i, s in enumerate(starts) if doc.char_kind[s] & k]
    assert flagged(trees.KIND_AFTER_CLOSE) == [4, 9, 11]
    assert flagged(trees.KIND_AFTER_LEAF) == [3, 6, 8, 13, 15, 16]


def test_scopes_renaming():
    src = ("import os\n"
           "def f(a):\n"
           "    def g():\n        nonlocal a\n        a = 2\n        return h\n"
           "    h = 1\n"
           "    global G\n"
           "    G = [a for a in range(3)]\n"
           "    import json\n"
           "    return a, os, json\n"
           "class C:\n    y = 1\n    def m(self):\n        return self.y\n")
    canon = pycorpus.canonical_python(src)
    assert "def f(x0):" in canon
    assert "nonlocal x0" in canon and "x0 = 2" in canon
    assert "return h" in canon and "    h = 1" in canon      # used before its binding: kept
    assert "G = [x" in canon and "global G" in canon
    assert "import json as x" in canon
    assert "    y = 1" in canon and "def m(x0):" in canon and "return x0.y" in canon
    # the renamed program means the same: same bytecode shape as the original
    compile(canon, "<canon>", "exec")


def round_trips(data):
    """True if the file round-trips byte for byte and parents come back from depth alone;
    None for a counted skip."""
    try:
        doc = pycorpus.python_doc(data, rename=False)
    except trees.Skip:
        return None
    depth = doc.node_coords()[0].tolist()
    assert ast.unparse(pycorpus.decode_python(doc.text, depth)) == ast.unparse(ast.parse(data))
    renamed = pycorpus.python_doc(data)
    assert pycorpus.parents_from_depth(renamed.node_coords()[0].tolist()) == renamed.parent.tolist()
    return True


def test_round_trip_sample():
    files = stdlib_files()
    random.Random(0).shuffle(files)
    assert sum(bool(round_trips(open(p, "rb").read())) for p in files[:40]) >= 30


@pytest.mark.skipif(sys.version_info < (3, 12), reason="`type X = ...` is Python 3.12's syntax")
def test_a_type_alias_name_is_a_node_and_round_trips():
    """Python 3.12's TypeAlias names its alias with an expression (a Name node), not an identifier:
    written as the name (not the node's repr, a memory address in the corpus) and decoded back."""
    src = b"type X[T] = list[T]\n"
    assert pycorpus.python_doc(src, rename=False).text == "TypeAlias X TypeVar T =Subscript list T"
    assert round_trips(src)


@pytest.mark.slow
def test_round_trip_whole_stdlib():
    assert sum(bool(round_trips(open(p, "rb").read())) for p in stdlib_files()) > 1000


def test_no_lookahead_on_real_files():
    """A document's prefix keeps its coordinates: serialise the first k top-level statements
    of a real file and compare every character's node, path, reference and symbol."""
    for p in stdlib_files()[300:306]:
        src = open(p, "rb").read()
        try:
            tree = ast.parse(src)
        except SyntaxError:
            continue
        full = pycorpus.python_doc(src)
        fd, fp = full.node_coords()
        for k in (1, len(tree.body) // 2, len(tree.body) - 1):
            if k < 1:
                continue
            part_src = ast.unparse(ast.Module(body=tree.body[:k], type_ignores=[]))
            part = pycorpus.python_doc(part_src)
            n = len(part.text)
            assert full.text[:n] == part.text
            m = len(part.parent)
            pd, pp = part.node_coords()
            assert (full.char_node[:n] == part.char_node).all()
            assert (fp[:m] == pp).all() and (fd[:m] == pd).all()
            assert (full.ref[:m] == part.ref).all() and (full.symbol[:m] == part.symbol).all()
            assert (full.char_kind[:n] == part.char_kind).all()


def test_serialisation_edge_cases_by_hand():
    """Forms the format must keep apart: a name equal to a node type, a constant whose repr is no
    literal, u- and bytes strings, a real newline (raw) next to an escaped backslash-n, an absent
    dict key (**), a keyword for ** (@ alone), a two-operator Compare, and a decode that matches
    ast.unparse of the source with renaming off."""
    src = "List = {**d, 'k': u'v'}\nx = 1e999 < 2 < 3\ny = f(*a, b'\\n', '\\\\n', '''a\nb''', k=1, **w)\n"
    doc = pycorpus.python_doc(src, rename=False)
    assert nodes_of(doc) == [
        "Assign", "Name List", "=Dict", "~", "'k'", "=d", "u'v'",
        "Assign", "x", "=Compare Lt,Lt", "Constant inf", "2", "3",
        "Assign", "y", "=Call", "f", "Starred", "a", "b'\n'", "'\\\\n'", "'a\nb'", "=@k", "1", "@", "w"]
    depth = doc.node_coords()[0].tolist()
    assert ast.unparse(pycorpus.decode_python(doc.text, depth)) == ast.unparse(ast.parse(src))
    with pytest.raises(ValueError):
        pycorpus.decode_python(doc.text, depth[:-1])                  # a depth short: text remains


def test_code_pattern_keeps_sigils_with_their_identifier():
    import re

    from treerope import tokenizer
    assert re.findall(tokenizer.CODE_PAT, "FunctionDef f =:x0 .attr @key 'abc' x12 =Add") == [
        "FunctionDef", " f", " =:x0", " .attr", " @key", " 'abc", "'", " x12", " =Add"]
    # the compact stream's words: ^def, ^^async def, $class, !alias, !!alias with asname, |from ..level
    assert re.findall(tokenizer.CODE_PAT, "^f ^^g =$C !os !!numpy x0 |..pkg.mod |.") == [
        "^f", " ^^g", " =$C", " !os", " !!numpy", " x0", " |..pkg", ".mod", " |."]


def test_label_and_statement_grid_by_hand():
    """Depth with a label: node types numbered by first appearance. Statement grid: each token's
    innermost statement (its ordinal: the row) and its index among that statement's own tokens."""
    doc = pycorpus.python_doc("def f(a):\n    if a:\n        return a + 1\n    b = 2\n")
    assert doc.text == "FunctionDef f arguments =:x0 If x0 Return Add x0 1 Assign x1 =2"
    #   FunctionDef arguments arg If Name Return BinOp Name Constant Assign Name Constant
    assert doc.label.tolist() == [0, 1, 2, 3, 4, 5, 6, 4, 7, 8, 4, 7]
    assert doc.stmt.tolist() == [0, 0, 0, 3, 3, 5, 5, 5, 5, 9, 9, 9]
    ids = np.frombuffer(doc.text.encode(), np.uint8).astype(np.int64)   # one token per character
    c = fields.token_coords(doc, ids, np.ones(256, np.int64))
    at = {w: doc.text.index(w) for w in ("FunctionDef", " If", " Return", " Add", " Assign", " =2")}
    assert [c["grid"][at[w]].tolist() for w in at] == [[0, 0], [1, 0], [2, 0], [2, 7], [3, 0], [3, 10]]
    assert c["label"][at[" Add"]] == 6 and c["label"][at[" =2"]] == 7


def test_web_and_sheet_labels():
    html = b"<html><body><p>one <b>two</b></p><p>three</p>four</body></html>"
    doc = web.web_doc(html)
    def node(s):
        return doc.char_node[doc.text.index(s)]
    assert [doc.label[node(s)] for s in ("one", "two", "three", "four")] == [0, 1, 0, 2]   # p, b, p, body


def test_no_lookahead_inside_functions():
    """Cut inside a function body: a later binding must not rename an earlier use."""
    a = "def f():\n    print(v)\n"
    b = "def f():\n    print(v)\n    v = 1\n"
    pa, pb = pycorpus.python_doc(a), pycorpus.python_doc(b)
    assert pb.text.startswith(pa.text)
    assert nodes_of(pb)[5:7] == ["v", "Assign"] and "x0" not in pb.text


@pytest.mark.parametrize("data,reason", [
    (b"def f(:\n", "syntax error"),
    (b"x = '\xff\xfe'\n", "not utf-8"),
    (b"", "empty"),
    (b"   \n\n", "empty"),
    (b"x = " + b"1 + " * 400_000 + b"1\n", "too large: Python source over 1,000,000 bytes"),
    (b"x = " + b"(" * 5000 + b"1" + b")" * 5000 + b"\n", None),
])
def test_bad_python_is_a_counted_skip(data, reason):
    with pytest.raises(trees.Skip) as e:
        pycorpus.python_doc(data)
    if reason:
        assert e.value.reason == reason


def test_nesting_too_deep_for_unparse_is_a_counted_skip():
    src = "x = 1" + " + 1" * 5000 + "\n"          # a 5,000-deep BinOp chain
    with pytest.raises(RecursionError):
        ast.unparse(ast.parse(src))
    with pytest.raises(trees.Skip) as e:
        pycorpus.python_doc(src)
    assert e.value.reason == "too deeply nested"


def test_nodes_deeper_than_22_levels_are_kept():
    doc = pycorpus.python_doc("x = " + "[" * 190 + "]" * 190 + "\n")
    depth, path = doc.node_coords()
    assert depth.max() == 191 and (path[depth.argmax()] >= 0).sum() == 22


def test_web_page_hand_worked():
    html = b"""<html><head><title>T</title><style>p{}</style></head><body>
    <h1>Hello <b>big</b> world</h1><script>var x;</script>
    <ul><li>one</li><li>two<ul><li>deep</li></ul></li></ul>
    <table><tr><td>a</td><td>b</td></tr></table><!-- c --><p>end</p></body></html>"""
    assert web.web_doc(html, blocks="newline").text == "Hello big world\none\ntwo\ndeep\na\nb\nend"
    doc = web.web_doc(html)   # appendix §4: "all markup is removed": blocks joined by a space
    assert doc.text == "Hello big world one two deep a b end"
    depth, path = doc.node_coords()
    def node(s):
        return doc.char_node[doc.text.index(s)]
    assert path[node("big"), :4].tolist() == [0, 1, 0, -1]        # h1 > b > text
    assert path[node("deep"), :6].tolist() == [1, 1, 1, 0, 0, -1]  # ul > li[1] > ul > li > text
    assert path[node("b e"), :5].tolist() == [2, 0, 1, 0, -1]     # table > tr > td[1] > text
    assert path[node("end"), :3].tolist() == [3, 0, -1]           # script and comment skipped
    assert (doc.char_node[doc.text.index(" one")] == -1)          # the separator is no node's
    blocks = [doc.text[i:i + 3] for i in np.flatnonzero(doc.char_kind & trees.KIND_NEW_BLOCK)]
    assert blocks == ["Hel", "one", "two", "dee", "a b", "b e", "end"]


def test_a_block_start_token_takes_the_node_of_its_first_non_space_byte():
    """Appendix §4: "a token belongs to the text node containing its first non-space byte". Two blocks
    through the web corpus: <div><p>Read this</p></div><p>See that</p> is "Read this See that"; nodes
    in document order 0 div (depth 1), 1 p (2), 2 "Read this" (3), 3 p (1), 4 "See that" (2, path
    [1, 0]); the separator space is no node's. A BPE with " S", " Se", " See" glues the separator on:
    the token " See" starts on that space, so it must take node 4 (depth 2, path [1, 0]) and the new
    block's first character's kind; read from its first byte it would be no node's (depth 0)."""
    html = b"<html><body><div><p>Read this</p></div><p>See that</p></body></html>"
    _, doc, skipped = web.CORPORA["web"].build(("page.html", html))
    assert skipped is None and doc.text == "Read this See that"
    assert doc.char_node[doc.text.index(" See")] == -1
    enc = tokenizer.encoding({**{bytes([b]): b for b in range(256)}, b" S": 256, b" Se": 257, b" See": 258})
    ids = enc.encode_ordinary(doc.text)
    c = fields.token_coords(doc, np.asarray(ids), tokenizer.token_lengths(enc))
    see = [enc.decode([i]) for i in ids].index(" See")
    assert (c["node"][see], c["depth"][see], c["path"][see, :3].tolist()) == (4, 2, [1, 0, -1])
    assert (c["node"][see - 1], c["depth"][see - 1]) == (2, 3)       # "s" of "this": the first block's
    assert c["kind"][see] & trees.KIND_NEW_BLOCK


def test_web_text_is_one_line_and_pre_keeps_its_whitespace():
    """Headings, paragraphs and list items: one line, no newline between blocks (the structure is
    only in the rotation); inside <pre> the whitespace is visible text, its spans' gaps kept."""
    doc = web.web_doc(b"<h1>Title</h1><p>First paragraph.</p><ul><li>item one</li><li>two</li></ul>"
                      b"<pre>\ndef f():\n    <span>return</span> <b>1</b>\n</pre><p>After.</p>")
    assert doc.text == "Title First paragraph. item one two def f():\n    return 1 After."
    starts = [doc.text[i:i + 4] for i in np.flatnonzero(doc.char_kind & trees.KIND_NEW_BLOCK)]
    assert starts == ["Titl", "Firs", "item", "two ", "def ", "Afte"]
    gap = doc.text.index(" 1 After") 
    assert doc.char_node[gap] == -1 and doc.char_node[doc.text.index("\n    return")] >= 0


def test_no_lookahead_on_web_pages():
    """Appending elements after a point of a real page (python3-doc HTML) keeps every earlier
    character's node, path, depth and kind: cut each page after an element's subtree, at several
    depths, by removing everything that follows it in document order."""
    import glob

    import lxml.html
    pages = sorted(glob.glob("/usr/share/doc/python3*/html/library/*.html"))[:6]
    if not pages:
        pytest.skip("python3-doc is not installed")
    for p in pages:
        raw = open(p, "rb").read()
        try:
            full = web.web_doc(raw)
        except trees.Skip:
            continue
        fd, fp = full.node_coords()
        elements = list(lxml.html.document_fromstring(raw).find("body").iter())
        for j in (len(elements) // 5, len(elements) // 2, len(elements) - 2):
            root = lxml.html.document_fromstring(raw)
            e = list(root.find("body").iter())[j]
            while e.getparent() is not None:       # e's subtree stays; what follows it goes
                e.tail = None
                for sib in list(e.itersiblings()):
                    e.getparent().remove(sib)
                e = e.getparent()
            try:
                part = web.web_doc(lxml.html.tostring(root))
            except trees.Skip:
                continue
            n = len(part.text)
            assert full.text[:n] == part.text
            fn, pn = full.char_node[:n], part.char_node[:n]
            assert ((fn >= 0) == (pn >= 0)).all() and (full.char_kind[:n] == part.char_kind).all()
            pd, pp = part.node_coords()
            has = pn >= 0
            assert (fp[fn[has]] == pp[pn[has]]).all() and (fd[fn[has]] == pd[pn[has]]).all()


def test_symbol_ids_are_unique_over_the_document():
    """Spellings restart at each outermost function (x0 of f, x0 of g); symbol identity numbers
    each variable once per document by first mention, so the two x0 differ (appendix §5)."""
    doc = pycorpus.python_doc("def f(a):\n    b = a\n    return b\n\ndef g(c):\n    d = c\n    return d\n")
    nodes = nodes_of(doc)
    assert [nodes[i] for i in (2, 10)] == ["=:x0", "=:x0"]
    assert doc.symbol[[2, 4, 5, 7]].tolist() == [0, 1, 0, 1]                 # f: a, b, a, b
    assert doc.symbol[[10, 12, 13, 15]].tolist() == [2, 3, 2, 3]             # g: c, d, c, d
    assert doc.ref[[5, 7, 13, 15]].tolist() == [2, 4, 10, 12]                # uses point at their definitions


def test_web_skip_list_applies_inside_body():
    """style, svg, script, noscript, template and iframe carry no visible text wherever they sit,
    and take no sibling rank: the paragraph after them is body's second child (rank 1)."""
    html = (b"<html><body><p>keep</p><style>p{color:red}</style><svg><text>no</text></svg><script>no</script>"
            b"<noscript>no</noscript><template><p>no</p></template><iframe>no</iframe>"
            b"<p>also</p></body></html>")
    doc = web.web_doc(html)
    assert doc.text == "keep also"
    assert doc.node_coords()[1][doc.char_node[doc.text.index("also")], :2].tolist() == [1, 0]


@pytest.mark.parametrize("html,reason", [
    (b"", "empty or unparsable html"),
    (b"<html><body><script>x</script></body></html>", "no visible text"),
    (b"<body>" + b"<div>" * 30 + b"x" + b"</div>" * 30 + b"</body>", "deeper than 22 levels"),
    (b"<body><ul>" + b"<li>x</li>" * 400 + b"</ul></body>", "wider than 318 siblings"),
])
def test_bad_web_pages(html, reason):
    with pytest.raises(trees.Skip) as e:
        web.web_doc(html)
    assert e.value.reason == reason


def test_warc_response_records(tmp_path):
    """A hand-written WARC (plain and gzipped): HTML responses are read, a request record and a
    non-HTML response are not."""
    import gzip

    def record(kind, uri, http):
        return (f"WARC/1.0\r\nWARC-Type: {kind}\r\nWARC-Target-URI: {uri}\r\n"
                f"Content-Length: {len(http)}\r\n\r\n").encode() + http + b"\r\n\r\n"
    page = b"<html><body><p>Hello warc</p></body></html>"
    data = (record("request", "http://a/", b"GET / HTTP/1.1\r\n\r\n")
            + record("response", "http://a/", b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n" + page)
            + record("response", "http://a/x.png",
                     b"HTTP/1.1 200 OK\r\nContent-Type: image/png\r\n\r\n\x89PNG"))
    (tmp_path / "crawl.warc").write_bytes(data)
    with gzip.open(tmp_path / "crawl.warc.gz", "wb") as f:
        f.write(data)
    for name in ("crawl.warc", "crawl.warc.gz"):
        got = list(warc.warc_records(str(tmp_path / name)))
        assert got == [("http://a/", page)]
        assert web.web_doc(got[0][1]).text == "Hello warc"


def test_python_reference_statistics_by_hand(tmp_path):
    """The appendix's Python reference figures (§5: 20.6% of tokens affected; whole-path overwrite
    shortens 91.7% of paths, by 3.13 levels), one byte a token. Serialised:
    FunctionDef f arguments =:x0 Assign x1 =x0 Return Add x1 x0 (59 characters); the uses =x0
    (path 0 1 1, its definition :x0 at 0 0 0), x1 (0 2 0 0 -> x1 at 0 1 0) and x0 (0 2 0 1 -> 0 0 0)
    own their leading space: 4 + 3 + 3 = 10 tokens, all moved by reference rotation. Whole-path
    overwrite: 3 -> 3, 4 -> 3, 4 -> 3, so two of three paths shorter, by one level each."""
    doc = pycorpus.python_doc("def f(a):\n    b = a\n    return b + a\n")
    assert doc.text == "FunctionDef f arguments =:x0 Assign x1 =x0 Return Add x1 x0"
    ids = np.frombuffer(doc.text.encode(), np.uint8).astype(np.int64)
    c = fields.token_coords(doc, ids, np.ones(256, np.int64))
    assert writer.reference_counts(c["path"], c["ref_path"], [0]) == {
        "tokens": 59, "reference_tokens": 10, "affected": 10, "references": 3, "other_level1": 0,
        "shorter": 2, "lost_shorter": 2, "lost": 2}
