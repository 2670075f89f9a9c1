"""hRoPE paragraph corpora (paper 004 App. C.1): prose and code builders, p1/p2/p3 on disk."""
import glob
import json
import os

import numpy as np
import pytest
from conftest import TINY_PYTHON, stdlib_files

import prepare
import trees
from treerope import fields, prepared
from treerope.corpora import paragraphs
from treerope.hrope import candidates

RST = sorted(glob.glob("/usr/share/doc/python3*/html/_sources/library/*.rst.txt"))


def per_byte(doc):
    """token_coords with one token per byte (ASCII text): p per character."""
    ids = np.frombuffer(doc.text.encode(), np.uint8).astype(np.int64)
    return fields.token_coords(doc, ids, np.ones(256, np.int64))


def test_three_paragraphs_hand_worked():
    text = ('This is what I love. You are the reason.\n\nok\n\n'
            'Second paragraph, one sentence here.\n\nThird one! "Quoted start" next. lower case stays.')
    doc = paragraphs.prose_doc(text.encode())
    assert doc.text == ('This is what I love. You are the reason.\n\nSecond paragraph, one sentence here.'
                        '\n\nThird one! "Quoted start" next. lower case stays.')      # "ok" < 20 chars
    c = per_byte(doc)
    p = c["p"]
    def at(s):
        return doc.text.index(s)
    assert p[at("This")].tolist() == [0, 0, 0] and p[at("You")].tolist() == [0, 1, 0]
    assert p[at("reason")].tolist() == [0, 1, 12]                  # "You are the " is 12 characters
    assert p[at("Second")].tolist() == [1, 0, 0]
    assert p[at('"Quoted')].tolist() == [2, 1, 0]                  # a quote opens a sentence
    assert p[at("lower")][:2].tolist() == [2, 1]                   # lowercase after '.' does not
    # separators belong to no node and keep the coordinates of the text before them
    sep = at("\n\nSecond")
    assert doc.char_node[sep] == -1 and p[sep][:2].tolist() == [0, 1]
    assert doc.char_node[at(" You")] == -1 and p[at(" You")][:2].tolist() == [0, 0]
    depth, path = doc.node_coords()
    assert depth[doc.char_node[at("You")]] == 2 and path[doc.char_node[at("You")], :3].tolist() == [0, 1, -1]


def test_two_block_python_file_hand_worked():
    src = b"import os\nimport sys\n\n\ndef f():\n    return 1\n"
    doc = paragraphs.code_doc(src)
    assert doc.text == src.decode()                                # the text is unchanged
    p = per_byte(doc)["p"]
    def at(s):
        return doc.text.index(s)
    assert p[at("import os")].tolist() == [0, 0, 0]
    assert p[at("import sys")].tolist() == [0, 1, 0]
    assert p[at("def")].tolist() == [1, 0, 0]
    assert p[at("    return")].tolist() == [1, 1, 0] and p[at("1\n")].tolist() == [1, 1, 11]
    assert doc.char_node[at("\n\n")] == -1 and p[at("\n\n")][:2].tolist() == [0, 1]


@pytest.mark.parametrize("builder,data,reason", [
    (paragraphs.code_doc, b"x = 1\ny = 2\n", "fewer than 2 blocks"),
    (paragraphs.code_doc, b"", "fewer than 2 blocks"),
    (paragraphs.code_doc, b"\xff\xfe x = 1\n\ny = 2", "not utf-8"),
    (paragraphs.prose_doc, b"", "no paragraph of 20+ characters"),
    (paragraphs.prose_doc, b"short\n\nalso short", "no paragraph of 20+ characters"),
    (paragraphs.prose_doc, b"\xff\xfe long enough paragraph of text", "not utf-8"),
    (paragraphs.prose_doc, b"\x00\x01 long enough paragraph of binary", "binary (NUL bytes)"),
])
def test_bad_paragraph_documents_are_counted_skips(builder, data, reason):
    with pytest.raises(trees.Skip) as e:
        builder(data)
    assert e.value.reason == reason


def test_wikitext_documents_and_escapes():
    text = (" = Alpha = \n\n The first @-@ paragraph is long enough . It has 1 @,@ 000 words .\n\n"
            " = = Sub heading = = \n\n Second paragraph of the alpha article .\n\n"
            " = Beta = \n\n Beta has one paragraph that is long enough .\n")
    docs = paragraphs.wikitext_documents(text)
    assert [t for t, _ in docs] == ["Alpha", "Beta"]
    alpha = paragraphs.paragraphs_doc(docs[0][1])
    assert alpha.text == ("The first-paragraph is long enough . It has 1,000 words .\n\n"
                          "Second paragraph of the alpha article .")   # headings discarded


def test_rst_markup_is_cleaned():
    rst = """Title here
==========

.. module:: json
   :synopsis: JSON.

A :func:`dumps` call and ``literal`` text, see `docs <https://x.org>`_. Another sentence::

    >>> code_is_dropped()

.. function:: dump(obj, fp)

   Serialize *obj* to a file. It returns nothing.

.. code-block:: python

   also_dropped = True

* A list item that is long enough.
"""
    assert paragraphs.rst_paragraphs(rst) == [
        "A dumps call and literal text, see docs. Another sentence:",
        "Serialize obj to a file. It returns nothing.",
        "A list item that is long enough."]


@pytest.mark.skipif(not RST, reason="python3-doc is not installed")
def test_no_lookahead_on_real_documents():
    """A prefix of a real document keeps every character's (p1, p2) and node: prose cut after
    k paragraphs, code cut after k lines."""
    for path in RST[:5]:
        paras = [p for p in paragraphs.rst_paragraphs(open(path).read()) if len(" ".join(p.split())) >= 20]
        full = paragraphs.paragraphs_doc(paras)
        for k in (1, len(paras) // 2):
            part = paragraphs.paragraphs_doc(paras[:max(k, 1)])
            n = len(part.text)
            assert full.text[:n] == part.text
            assert (full.char_p[:n] == part.char_p).all() and (full.char_node[:n] == part.char_node).all()
    for path in stdlib_files()[300:305]:
        src = open(path, "rb").read()
        lines = src.splitlines(keepends=True)
        full = paragraphs.code_doc(src)
        for k in (len(lines) // 2, len(lines) - 3):
            try:
                part = paragraphs.code_doc(b"".join(lines[:k]))
            except trees.Skip:
                continue
            n = len(part.text)
            assert (full.char_p[:n] == part.char_p).all() and (full.char_node[:n] == part.char_node).all()


def test_paragraph_stats_by_hand():
    r1 = {"p": np.array([[0, 0, 0], [0, 0, 1], [1, 0, 0], [1, 1, 0], [1, 1, 1], [2, 0, 0]])}
    r2 = {"p": np.array([[0, 0, 0], [0, 0, 1]])}
    s = paragraphs.paragraph_stats([r1, r2])
    assert s["p_max"] == [2, 1, 1]
    assert s["p1_density"] == pytest.approx(2 / 6)      # 2 boundaries over 6 token transitions
    assert s["paragraphs"] == 4 and s["p1_period"] == 2  # 8 tokens / 4 paragraphs


def test_prepare_code_and_wikitext(tmp_path):
    code = tmp_path / "code"
    code.mkdir()
    for p in TINY_PYTHON[:15]:
        (code / os.path.basename(p)).write_bytes(open(p, "rb").read())
    (code / "one_block.py").write_bytes(b"x = 1\n")
    out = tmp_path / "data"
    d = prepare.main(["code", "--src", str(code), "--out", str(out), "--vocab", "300", "--max_len", "128",
                      "--workers", "1"])
    meta = json.load(open(os.path.join(d, "meta.json")))
    assert meta["skipped"] == {"fewer than 2 blocks": 1} and meta["p1_cap"] >= 1
    a = prepared.load_split(d, "train")
    starts = a["doc_start"][:-1]
    first = np.r_[True, a["record_doc"][1:] != a["record_doc"][:-1]]
    # p1 counted in the file
    assert (a["p"][starts[first], 0] == 0).all() and (a["p"][starts[~first], 0] > 0).any()
    assert (a["p"][starts, 1:] == 0).all() and (a["p"] >= 0).all()
    assert meta["p_max"][0] <= meta["p1_cap"] and 0 < meta["p1_density"] < 1 and meta["p1_period"] > 1

    wiki = tmp_path / "wiki"
    wiki.mkdir()
    body = " = {0} = \n\n" + " The {0} article has a paragraph that is long . And a second sentence .\n\n" * 3
    (wiki / "wiki.train.tokens").write_text("".join(body.format(t) for t in ("Alpha", "Beta", "Gamma")))
    d = prepare.main(["prose", "--src", str(wiki), "--out", str(out), "--vocab", "300", "--workers", "1"])
    meta = json.load(open(os.path.join(d, "meta.json")))
    assert meta["documents"] == 3 and meta["paragraphs"] >= 1 and not meta["synthetic"]


def test_records_start_a_paragraph():
    """A record cut inside a paragraph starts its p2/p3 at (0, 0): relative p2/p3 never compare a
    paragraph's 2,000th line with the next paragraph's first. p1 stays counted in the document
    (App. C.1), clipped at the cap."""
    p = np.array([[0, 0, 0], [0, 0, 1], [0, 1, 0], [0, 1, 1], [1, 0, 0], [1, 0, 1], [1, 1, 0]])
    coords = {"pos": np.arange(7), "p": p}
    boundary = np.r_[True, p[1:, 0] != p[:-1, 0]]
    rs = prepare.records(coords, 3, "split", boundary)               # cuts [0, 3) [3, 4) [4, 7)
    assert [r["p"].tolist() for r in rs] == [p[:3].tolist(), [[0, 0, 0]], [[1, 0, 0], [1, 0, 1], [1, 1, 0]]]
    whole = prepare.records(coords, 7, "split", boundary, p1_cap=0)[0]["p"]
    assert whole[:, 0].tolist() == [0] * 7 and whole[:, 1:].tolist() == p[:, 1:].tolist()
    capped = prepare.records(coords, 3, "split", boundary, p1_cap=0)
    assert paragraphs.paragraph_stats(capped)["paragraphs"] == 3


def test_p1_cap_and_m1_on_a_long_tailed_corpus(tmp_path):
    """App. C.1 on a planted corpus: 20 files of 2-5 blocks (five each) and one of 200. Blocks per
    file sorted: 2 x5, 3 x5, 4 x5, 5 x5, 200; the 95th percentile of 21 values is the 20th
    smallest (index 0.95 * 20 = 19), 5 blocks, so p1 <= 4 and M_1 = 4: the long file's blocks from
    its fifth on share p1 = 4, and its records after the first start there. Prose, which C.1 does
    not truncate, keeps the long document's 200 paragraphs: M_1 = 199."""
    name = next(f"long{i}" for i in range(100) if prepare.split_of(f"long{i}.py") == "train"
                and prepare.split_of(f"long{i}.txt") == "train")
    for corpus, ext, block in (("code", "py", "x{0} = {0}\n"),
                               ("prose", "txt", "Paragraph number {0} is here.")):
        src = tmp_path / corpus
        src.mkdir()
        for k in range(20):
            (src / f"f{k}.{ext}").write_text("\n\n".join(block.format(j) for j in range(2 + k % 4)))
        (src / f"{name}.{ext}").write_text("\n\n".join(block.format(j) for j in range(200)))
        d = prepare.main([corpus, "--src", str(src), "--out", str(tmp_path / "data"), "--vocab", "300",
                          "--max_len", "64", "--workers", "1"])
        meta = json.load(open(os.path.join(d, "meta.json")))
        a = prepared.load_split(d, "train")
        long_doc = np.flatnonzero(np.bincount(a["record_doc"]) > 1)        # the only file cut into records
        starts = a["doc_start"][:-1][np.isin(a["record_doc"], long_doc)]
        if corpus == "code":
            assert meta["p1_cap"] == 4 and meta["p_max"][0] == 4
            assert a["p"][starts, 0].tolist() == [0] + [4] * (len(starts) - 1)
        else:
            assert meta["p1_cap"] is None and meta["p_max"][0] == 199
            assert a["p"][starts[-1], 0] > a["p"][starts[1], 0] > 0
        assert meta["paragraphs"] == int(((a["p"][:, 1] == 0) & (a["p"][:, 2] == 0)).sum())   # clipped or not
        true = len(candidates.segment(a, true_paragraphs=True)[3])     # Table 4 reads the real blocks
        assert true == meta["paragraphs"] and (len(candidates.segment(a)[3]) < true) == (corpus == "code")
