"""The webtext corpus (paper 004 App. C.1 "OpenWebText" as far as offline pages allow): main-text
paragraphs from the DOM, near-duplicate removal by 5-gram MinHash, the 128-token minimum, and
`prepare.py webtext` end to end. Run: python -m pytest -q tests/test_webtext.py"""
import json
import os
from types import SimpleNamespace

import numpy as np
import pytest

import prepare
import train
import trees
from treerope import fields, prepared
from treerope.corpora import paragraphs

PAGE = """<html><head><title>Title text</title><script>var s = "Script text. Not kept.";</script>
<style>p {{ color: red }}</style></head><body>
<nav><a href="/">Home</a> <a href="/about">About us</a></nav>
<div class="sidebar">Sidebar words that are not main text.</div>
{open}<h1>A heading is not a paragraph</h1>
<p>First paragraph has <b>two</b> sentences. The second one is <a href="x">here</a>.</p>
<p>Second paragraph. "Quoted start" follows. lower case stays.</p>
<ul><li><a href="n">Next</a> | <a href="p">Previous</a></li></ul>
<pre>code = "listing. Not prose."</pre>
<p>Short.</p>{close}
<footer>Copyright footer.</footer>
</body></html>"""
MAIN = ["First paragraph has two sentences. The second one is here.",
        'Second paragraph. "Quoted start" follows. lower case stays.', "Short."]


@pytest.mark.parametrize("open_,close", [("<main>", "</main>"), ('<div role="main">', "</div>"), ("", "")])
def test_main_text_paragraphs_and_sentences(open_, close):
    """Script, style, title, nav, a sidebar, headings, a link list, a code listing and the footer
    go; each <p> is a paragraph, short ones included (C.1: no length filter for OpenWebText)."""
    html = PAGE.format(open=open_, close=close).encode()
    assert paragraphs.webtext_paragraphs(html) == MAIN
    doc = paragraphs.webtext_doc(html)
    assert doc.text == "\n\n".join(MAIN)
    ids = np.frombuffer(doc.text.encode(), np.uint8).astype(np.int64)
    p = fields.token_coords(doc, ids, np.ones(256, np.int64))["p"]     # one token per byte
    def at(s):
        return doc.text.index(s)
    assert p[at("First")].tolist() == [0, 0, 0] and p[at("The second")].tolist() == [0, 1, 0]
    assert p[at("here.")].tolist() == [0, 1, len("The second one is ")]
    # WikiText-2's rule: a quote opens a sentence, lowercase after '.' does not
    assert p[at('"Quoted')].tolist() == [1, 1, 0] and p[at("lower")][:2].tolist() == [1, 1]
    assert p[at("Short.")].tolist() == [2, 0, 0]


@pytest.mark.parametrize("html,reason", [
    (b"<html><body><nav><a href='/'>Home</a></nav><script>x()</script></body></html>", "no main text"),
    (b"<html><body><p><a href='a'>Only</a> <a href='b'>links</a></p></body></html>", "no main text"),
    (b"", "empty or unparsable html"),
    (b"\x00\x01<p>binary</p>", "binary (NUL bytes)"),
])
def test_pages_without_main_text_are_counted_skips(html, reason):
    with pytest.raises(trees.Skip) as e:
        paragraphs.webtext_doc(html)
    assert e.value.reason == reason


def test_deep_pages_are_read_whole_or_skipped():
    """lxml's default parser keeps 256 levels and drops the rest of the page without a word:
    at 300 levels the deep paragraph and the one after it must both be there; past our cap of
    512 the page is a counted skip, never a page cut short."""
    def nest(n):
        return ("<html><body><p>First one.</p>" + "<div>" * n + "<p>Deep one.</p>" + "</div>" * n
                + "<p>After it.</p></body></html>")
    assert paragraphs.webtext_paragraphs(nest(300)) == ["First one.", "Deep one.", "After it."]
    with pytest.raises(trees.Skip) as e:
        paragraphs.webtext_paragraphs(nest(600))
    assert e.value.reason == "nested deeper than 512 elements"


def test_a_huge_text_node_is_a_counted_skip():
    """web's cap on one text node holds for webtext too (lxml alone keeps 1 MB, drops 10 MB)."""
    ok = "<html><body><p>" + "x" * 1_000_000 + "</p></body></html>"
    assert [len(p) for p in paragraphs.webtext_paragraphs(ok)] == [1_000_000]
    with pytest.raises(trees.Skip) as e:
        paragraphs.webtext_paragraphs(ok.replace("<p>", "<p>y"))
    assert e.value.reason == "too large: a text node over 1,000,000 characters"


def words(rng, n):
    vocab = [f"w{i}" for i in range(3000)]
    return list(rng.choice(vocab, n))


def grams(ws):
    return {" ".join(ws[i:i + 5]) for i in range(len(ws) - 4)}


def test_near_duplicates_planted():
    """A copy whose last quarter differs shares 60% of its 5-grams with the original (over 0.5):
    it goes, the original stays. A page sharing its first 150 words (23% of 5-grams) and a page
    sharing nothing stay."""
    rng = np.random.default_rng(0)
    a = words(rng, 400)
    near = a[:300] + words(rng, 100)
    half = a[:150] + words(rng, 250)
    other = words(rng, 400)
    def jac(x, y):
        return len(grams(x) & grams(y)) / len(grams(x) | grams(y))
    assert jac(a, near) == pytest.approx(0.6, abs=0.02) and jac(a, half) == pytest.approx(0.23, abs=0.02)
    texts = [" ".join(t) for t in (a, half, near, other)]
    assert paragraphs.near_duplicates(texts) == {2}
    assert paragraphs.near_duplicates(texts[::-1]) == {3}            # the first in reading order is kept
    est = np.mean(paragraphs.minhash(texts[0]) == paragraphs.minhash(texts[2]))
    assert est == pytest.approx(0.6, abs=0.1)
    assert (paragraphs.minhash(texts[0].upper()) == paragraphs.minhash(texts[0])).all()   # case-blind


def page(body):
    return f"<html><body><div class='nav'>Menu</div><main>{body}</main></body></html>"


def prose(rng, n_paragraphs, sentences=2, n=8):
    out = []
    for _ in range(n_paragraphs):
        out.append("<p>" + " ".join(" ".join(words(rng, n)).capitalize() + "." for _ in range(sentences))
                   + "</p>")
    return "".join(out)


def test_prepare_webtext_end_to_end(tmp_path):
    """Six distinct pages, a near-copy of one, a page under 128 tokens and one without main text:
    meta.json counts each; the kept pages carry p1/p2/p3 with p1 counted in the page (a record
    that starts mid-page keeps its paragraph index) and no cap (C.1 sets none for OpenWebText)."""
    rng = np.random.default_rng(1)
    src = tmp_path / "pages"
    src.mkdir()
    bodies = [prose(rng, 12) for _ in range(6)]
    for i, b in enumerate(bodies):
        (src / f"page{i}.html").write_text(page(b))
    (src / "page0_copy.html").write_text(page(bodies[0][:-250] + prose(rng, 1)))   # same text but its end
    (src / "short.html").write_text(page("<p>Too short to keep. Two sentences.</p>"))
    (src / "menu.htm").write_text("<html><body><nav><a href='/'>Home</a></nav></body></html>")
    out = tmp_path / "data"
    d = prepare.main(["webtext", "--src", str(src), "--out", str(out), "--vocab", "300", "--max_len", "128",
                      "--workers", "1"])
    meta = json.load(open(os.path.join(d, "meta.json")))
    assert meta["skipped"] == {"near-duplicate (5-gram MinHash > 0.5)": 1, "shorter than 128 tokens": 1,
                               "no main text": 1}
    assert meta["documents"] == 6 and sum(s["documents"] for s in meta["splits"].values()) == 6
    assert meta["p1_cap"] is None and meta["p_max"][0] == 11 and 0 < meta["p1_density"] < 1
    a = prepared.load_split(d, "train")
    starts = a["doc_start"][:-1]
    assert (a["p"][starts, 1:] == 0).all() and (a["p"][starts, 0] > 0).any()   # records mid-page keep p1
    # hRoPE trains on it, its p1 spectrum calibrated on this M_1
    train.main(["--corpus", "webtext", "--data", str(out), "--out", str(tmp_path / "out"),
                "--config", "hrope_axial", "--steps", "1", "--docs_per_step", "2", "--val_docs", "2",
                "--test_docs", "2", "--milestones", "1"])
    run = json.load(open(tmp_path / "out" / "webtext" / "hrope_axial" / "seed0" / "config.json"))
    assert run["model"]["corpus"]["p_max"] == meta["p_max"]


def test_default_pages_each_once_and_a_clear_error(tmp_path, monkeypatch):
    """Without --src: HTML under the root, a folder reached again through a symlink read once;
    no page at all is a one-line error."""
    (tmp_path / "pkg" / "html").mkdir(parents=True)
    (tmp_path / "pkg" / "html" / "page.html").write_text(page("<p>Text.</p>"))
    (tmp_path / "pkg" / "notes.txt").write_text("not html")
    (tmp_path / "alias").symlink_to(tmp_path / "pkg")
    monkeypatch.setattr(paragraphs, "WEBTEXT_ROOT", str(tmp_path))
    items, dirs = paragraphs.webtext_sources(SimpleNamespace(src=None))
    assert [n for n, _ in items] == [os.path.join("alias", "html", "page.html")] and dirs == [str(tmp_path)]
    monkeypatch.setattr(paragraphs, "WEBTEXT_ROOT", str(tmp_path / "pkg" / "html" / "none"))
    with pytest.raises(SystemExit, match="no HTML pages under .* pass --src DIR"):
        paragraphs.webtext_sources(SimpleNamespace(src=None))
