"""JSON, XML and Markdown as trees (beyond the papers): nodes by hand, the round trip and the
prefix property on real files, hostile files, and sample.py's online coordinates against
prepare.py's, token by token."""
import itertools
import json
import os
import shutil

import numpy as np
import pytest
import torch

import evaluate
import prepare
import sample
import train
import trees
from treerope import fields, runs, tokenizer
from treerope.corpora import formats

FORMATS = {   # corpus: (whole-document builder, scanner for any prefix, canonical form of the input)
    "json": (formats.json_doc, formats.json_coords, lambda raw: json.loads(raw.decode("utf-8-sig"))),
    "xml": (formats.xml_doc, formats.xml_coords, lambda raw: canonical_xml(raw)),
    "markdown": (formats.markdown_doc, formats.markdown_coords,
                 lambda raw: raw.decode("utf-8-sig").replace("\r\n", "\n")),
}


def canonical_xml(raw):
    import lxml.etree
    tree = lxml.etree.fromstring(raw, lxml.etree.XMLParser(no_network=True, load_dtd=False,
                                                           remove_comments=True))
    return lxml.etree.tostring(tree.getroottree(), method="c14n", with_comments=False).decode()


def real_files(corpus, n):
    """Up to n real files from prepare.py's default sources for the corpus (installed packages,
    /usr/share), spread over the sorted list, each 200 B to 20 kB so tests stay quick."""
    sources = {"json": formats.json_sources, "xml": formats.xml_sources, "markdown": formats.markdown_sources}
    files, dirs = sources[corpus](type("A", (), {"src": None})())
    files = [p for _, p in files if 200 < os.path.getsize(p) < 20_000]
    if len(files) < 20:
        pytest.skip(f"fewer than 20 real {corpus} files on this machine ({len(files)} under {dirs})")
    return files[:: max(1, len(files) // n)][:n]


def same_nodes(whole, part):
    """Every character of `part` (a prefix) has the depth and path `whole` gives it (or no node in both)."""
    depth, path = whole.node_coords()
    dp, pp = part.node_coords()
    a, b = whole.char_node[:len(part.text)], part.char_node
    return (((a >= 0) == (b >= 0)).all() and (depth[a[a >= 0]] == dp[b[b >= 0]]).all()
            and (path[a[a >= 0]] == pp[b[b >= 0]]).all()
            and (whole.char_p is None or (whole.char_p[:len(part.text)] == part.char_p).all()))


def test_nodes_by_hand():
    """{"a":[1,{"b":null}],"c":"x"}: object -> members -> values; a member writes `"key":`, a
    container its brackets and commas, a scalar itself (paths derived by hand)."""
    d = formats.json_doc(b'{"a": [1, {"b": null}], "c": "x"}')
    assert d.text == '{"a":[1,{"b":null}],"c":"x"}'
    depth, path = d.node_coords()
    owner = {}
    for ch_i, ch in enumerate(d.text):
        owner.setdefault(ch, []).append((int(depth[d.char_node[ch_i]]), path[d.char_node[ch_i]][:5].tolist()))
    obj, member_a, arr = [0, -1, -1, -1, -1], [0, 0, -1, -1, -1], [0, 0, 0, -1, -1]
    assert owner["{"] == [(1, obj), (4, [0, 0, 0, 1, -1])]            # outer object; the array's 2nd value
    assert owner[":"] == [(2, member_a), (5, [0, 0, 0, 1, 0]), (2, [0, 1, -1, -1, -1])]
    assert owner["1"] == [(4, [0, 0, 0, 0, -1])]                         # the array's first value
    assert owner[","] == [(3, arr), (1, obj)]                            # commas belong to their container
    assert owner["n"] == [(6, [0, 0, 0, 1, 0])]                          # null: the member b's value
    assert owner["x"] == [(3, [0, 1, 0, -1, -1])]
    # labels: the node's type by first appearance (object member array number null string)
    assert d.label.tolist() == [0, 1, 2, 3, 0, 1, 4, 1, 5]


@pytest.mark.parametrize("corpus", sorted(FORMATS))
def test_round_trip_and_prefix_property_on_real_files(corpus):
    """Real files: the text is the input's canonical form (JSON: json.loads equal; XML: C14N;
    Markdown: the text itself); every prefix gives its characters the nodes the whole text gives."""
    build, scan, canonical = FORMATS[corpus]
    files = real_files(corpus, 30)
    kept = 0
    for p in files:
        raw = open(p, "rb").read()
        try:
            d = build(raw)
        except trees.Skip:
            continue
        kept += 1
        assert (json.loads(d.text) if corpus == "json" else d.text) == canonical(raw), p
        for cut in sorted({1, len(d.text) // 5, len(d.text) // 3, len(d.text) // 2, len(d.text) - 1}):
            assert same_nodes(d, scan(d.text[:cut])), (p, cut)
    assert kept >= len(files) // 2


def test_xml_nodes_by_hand():
    """<r b="x"><x>t</x></r>: the element writes its name, `>` and end tag; the attribute
    ` b="x"` from its space; text is a node; `<` belongs to no node."""
    d = formats.xml_doc(b'<?xml version="1.0"?><r b="x"><!-- gone --><x>t</x>u</r>')
    assert d.text == '<r b="x"><x>t</x>u</r>'
    depth, path = d.node_coords()
    def at(i):
        n = d.char_node[i]
        return (int(depth[n]), path[n][:3].tolist()) if n >= 0 else None
    assert [at(i) for i in range(len(d.text))] == (
        [None, (1, [0, -1, -1])] + [(2, [0, 0, -1])] * 6 + [(1, [0, -1, -1])]        # <r, ` b="x"`, >
        + [None] + [(2, [0, 1, -1])] * 2 + [(3, [0, 1, 0])]                           # <x>t
        + [None] + [(2, [0, 1, -1])] * 3 + [(2, [0, 2, -1])]                          # </x>u
        + [None] + [(1, [0, -1, -1])] * 3)                                            # </r>
    assert d.label.tolist() == [0, 1, 0, 2, 2]                  # element attribute element text text


def test_xml_with_a_relative_namespace_uri_is_kept():
    """C14N 1.0 refuses xmlns:ns="ns" (a relative URI, common in XSD test suites); C14N 2.0 takes it,
    writing the declaration where it is used. Files 1.0 takes keep their 1.0 form."""
    d = formats.xml_doc(b'<?xml version="1.0"?><a xmlns:ns="ns"><ns:b x="1">t</ns:b></a>')
    assert d.text == '<a><ns:b xmlns:ns="ns" x="1">t</ns:b></a>'
    depth, _ = d.node_coords()
    assert int(depth[d.char_node[d.text.index("t<")]]) == 3          # a text under ns:b under a
    kept = formats.xml_doc(b'<a xmlns:u="http://x" xmlns:v="http://y"><u:b>t</u:b></a>')
    assert kept.text == '<a xmlns:u="http://x" xmlns:v="http://y"><u:b>t</u:b></a>'   # 1.0: unused v kept


def test_markdown_nodes_and_paragraphs_by_hand():
    """Sections nest by heading level; blocks under the innermost section; sentences under blocks;
    p1 counts blocks (a heading is one), p2 sentences; a heading's `#`s belong to no node."""
    text = "Intro. Two.\n\n# A\nText here.\n\n## B\n```\nx\n\ny\n```\n# C\n"
    d = formats.markdown_coords(text)
    depth, _ = d.node_coords()
    def line(s):
        i = text.index(s)
        return [int(depth[n]) if n >= 0 else 0 for n in d.char_node[i:i + len(s)]]
    assert line("Intro. Two.") == [2] * 11 and line("# A") == [0, 1, 1] and line("Text here.") == [3] * 10
    assert line("## B") == [0, 0, 2, 2] and line("x\n\ny") == [4] * 4 and line("# C") == [0, 1, 1]
    def p(s):
        return d.char_p[text.index(s), :2].tolist()
    assert [p("Intro"), p("Two"), p("A\n"), p("Text"), p("B\n"), p("x\n"), p("y\n"), p("C\n")] == \
        [[0, 0], [0, 1], [1, 0], [2, 0], [3, 0], [4, 0], [4, 0], [5, 0]]   # the fence keeps its blank line
    # "e.g.Foo": no space after the stop, and "y" no capital: one sentence throughout
    assert set(formats.markdown_coords("e.g.Foo and x. y").char_p[:, 1].tolist()) == {0}


@pytest.mark.parametrize("build,raw,reason", [
    (formats.json_doc, b'{"a": [1, 2', "invalid json"),                    # truncated
    (formats.json_doc, b'{"a":' * 11 + b"1" + b"}" * 11, "deeper than 22 levels"),  # 11 x (obj, member) + 1
    (formats.json_doc, b'{"a": "\xff"}', "not utf-8"),
    (formats.json_doc, b"", "invalid json"),
    (formats.json_doc, b"[NaN]", "invalid json"),                          # Python reads it; JSON has none
    (formats.json_doc, json.dumps(list(range(400))).encode(), "wider than 318 siblings"),
    (formats.xml_doc, b"<a><b>text</b", "invalid xml (gt required)"),      # truncated
    (formats.xml_doc, b"<a>" * 23 + b"</a>" * 23, "deeper than 22 levels"),
    (formats.xml_doc, b"<a>\xff</a>", "invalid xml"),                      # not UTF-8
    (formats.xml_doc, b"<a>" + b"<b/>" * 400 + b"</a>", "wider than 318 siblings"),
    (formats.xml_doc, b'<!DOCTYPE a SYSTEM "http://example.invalid/a.dtd"><a>&x;</a>',
     "invalid xml (undeclared entity)"),
    (formats.markdown_doc, b"  \n\n", "empty"),
    (formats.markdown_doc, b"# a\n\xff", "not utf-8"),
])
def test_hostile_files_are_counted_skips(build, raw, reason):
    with pytest.raises(trees.Skip) as e:
        build(raw)
    assert e.value.reason.startswith(reason)


def test_ten_levels_are_kept():
    d = formats.json_doc(b'{"a":' * 10 + b"1" + b"}" * 10)                # 21 levels
    assert d.node_coords()[0].max() == 21


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """corpus -> (data root, source folder): 60 real files each, prepared with a 400-entry BPE."""
    made = {}

    def make(corpus):
        if corpus not in made:
            src, files = tmp_path_factory.mktemp(f"{corpus}src"), real_files(corpus, 60)
            # the split hashes the name (90/5/5), so 60 names leave val or test empty about 1 time in 10
            # (2 x 0.95^60): the first numbering that gives each split a file, whatever packages are installed
            k = next(k for k in itertools.count() if {"train", "val", "test"} == {
                prepare.split_of(f"{i + k:03d}_{os.path.basename(p)}") for i, p in enumerate(files)})
            for i, p in enumerate(files):
                shutil.copy(p, src / f"{i + k:03d}_{os.path.basename(p)}")
            out = tmp_path_factory.mktemp(f"{corpus}data")
            prepare.main([corpus, "--src", str(src), "--out", str(out), "--vocab", "400", "--max_len", "128",
                          "--workers", "1"])
            made[corpus] = str(out), str(src)
        return made[corpus]
    return make


@pytest.mark.parametrize("corpus", sorted(FORMATS))
def test_online_coordinates_equal_prepare_token_by_token(corpus, tiny):
    """The no-look-ahead rule in practice: feed whole documents token by token as sample.py does;
    each token's coordinates, recorded at its own step, equal prepare.py's on the whole text."""
    root, src = tiny(corpus)
    enc = tokenizer.load(os.path.join(root, corpus))
    tok_len = tokenizer.token_lengths(enc)
    checked = 0
    for name in sorted(os.listdir(src))[:8]:
        try:
            doc = FORMATS[corpus][0](open(os.path.join(src, name), "rb").read())
        except trees.Skip:
            continue
        ids = enc.encode_ordinary(doc.text)
        full = fields.token_coords(doc, np.asarray(ids), tok_len)
        for i in range(min(len(ids), 120)):
            step = sample.online_coords(corpus, ids[:i + 1], enc, tok_len)
            for k in step:
                assert np.array_equal(step[k], full[k][i]), (name, i, k)
        checked += 1
    assert checked >= 4


def test_a_character_cut_by_a_token_reads_as_content():
    """A token that ends inside a UTF-8 character: its bytes read as 'x' until the character
    completes, so byte offsets stay the tokens' and the string keeps owning them."""
    enc = tokenizer.encoding({bytes([b]): b for b in range(256)})     # byte tokens: 'é' is two
    tok_len = tokenizer.token_lengths(enc)
    ids = enc.encode_ordinary('{"k":"é"}')
    assert len(ids) == 10
    assert sample.online_text(ids[:7], enc) == '{"k":"x'
    step = sample.online_coords("json", ids[:7], enc, tok_len)
    full = fields.token_coords(formats.json_doc('{"k":"é"}'.encode()), np.asarray(ids), tok_len)
    assert step["depth"] == full["depth"][6] == 3 and np.array_equal(step["path"], full["path"][6])


def test_sample_py_end_to_end(tiny, tmp_path, capsys):
    root, _ = tiny("json")
    run = train.main(["--corpus", "json", "--config", "seq_depth", "--data", root, "--out", str(tmp_path),
                      "--steps=3", "--n_layer=1", "--n_embd=64", "--n_head=1",
                      "--max_len=128", "--docs_per_step=4", "--val_docs=4", "--test_docs=4", "--milestones=1",
                      "--mb_tokens=512"])
    texts = sample.main([run, "--num_samples", "2", "--max_new_tokens", "20", "--seed", "1"])
    out = capsys.readouterr().out
    assert len(texts) == 2 and all(t.startswith("{") for t in texts)
    assert "/2 samples parse as json" in out and "ran out of tokens (--max_new_tokens 20, context 128)" in out
    with pytest.raises(SystemExit, match="already a whole json document"):
        sample.main([run, "--prompt", "{}"])
    with pytest.raises(SystemExit, match="the model's context 128: no room to generate"):
        sample.main([run, "--prompt", '{"a": [' + "1, " * 200])
    cfg = json.load(open(os.path.join(run, "config.json")))
    cfg["run"]["corpus"] = "python"
    json.dump(cfg, open(os.path.join(run, "config.json"), "w"))
    with pytest.raises(SystemExit, match="corpus: json in ckpt.pt, python in config.json"):
        sample.load(run, "cpu")                   # config.json alone edited: not the checkpoint's run
    ck = torch.load(os.path.join(run, "ckpt.pt"), weights_only=False)
    ck["run"]["corpus"] = "python"
    runs.save_checkpoint(ck, os.path.join(run, "ckpt.pt"))
    with pytest.raises(SystemExit, match="cannot serve"):
        sample.load(run, "cpu")


@pytest.mark.parametrize("corpus", sorted(sample.PROMPT))
def test_each_corpus_samples_from_its_default_prompt_under_a_structural_configuration(corpus, tiny, tmp_path,
                                                                                      capsys):
    """Issue 71 D1: without --prompt, sample.py refused every xml run of a configuration that reads the
    tree ("--prompt '<' cannot begin a xml document"): the default prompt failed its corpus's own start
    rule. Every corpus with a default prompt samples from it under seq_depth (a 1-step run)."""
    root, _ = tiny(corpus)
    run = train.main(["--corpus", corpus, "--config", "seq_depth", "--data", root, "--out", str(tmp_path),
                      "--steps=1", "--n_layer=1", "--n_embd=64", "--n_head=1", "--max_len=128",
                      "--docs_per_step=2", "--val_docs=2", "--test_docs=2", "--milestones=1",
                      "--mb_tokens=256"])
    texts = sample.main([run, "--num_samples=1", "--max_new_tokens=4"])
    assert texts[0].startswith(sample.PROMPT[corpus])
    assert f"--- sample 0\n{texts[0]}" in capsys.readouterr().out


def test_a_run_refuses_data_prepared_again(tiny, tmp_path):
    """sample.py on data re-prepared after training decoded fluent garbage (the ids meant other
    tokens); the tokeniser's fingerprint, kept in config.json, now stops it and evaluate.py."""
    root, _ = tiny("json")
    data_root = tmp_path / "data"
    shutil.copytree(root, data_root)
    run = train.main(["--corpus", "json", "--config", "seq_only", "--data", str(data_root),
                      "--out", str(tmp_path), "--steps=1", "--n_layer=1", "--n_embd=32",
                      "--n_head=1", "--max_len=128", "--docs_per_step=2", "--val_docs=2", "--test_docs=2",
                      "--milestones=1", "--mb_tokens=512"])
    sample.load(run, "cpu")                       # the data it trained on: accepted
    ranks = json.load(open(data_root / "json" / "tokenizer.json"))
    ranks["ranks"][300], ranks["ranks"][301] = ranks["ranks"][301], ranks["ranks"][300]
    json.dump(ranks, open(data_root / "json" / "tokenizer.json", "w"))
    with pytest.raises(SystemExit, match="prepared again"):
        sample.load(run, "cpu")
    with pytest.raises(SystemExit, match="prepared again"):
        evaluate.main([run, "--max_docs", "2"])
