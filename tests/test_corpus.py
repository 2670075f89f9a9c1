"""README "Add a corpus": a corpus is one entry in a module's CORPORA plus its builder, named in
treerope/settings.CORPORA. A toy corpus (this module's CORPORA) registered at runtime is prepared, trained
a step and evaluated, no other file touched.
Run: python -m pytest -q tests/test_corpus.py"""
import json
import os
import re

import numpy as np

import evaluate
import prepare
import train
import trees
from treerope import corpora, prepared, settings
from treerope.corpora.text import source_text


def toy_doc(raw):
    """The toy builder: each line a node (depth 1, rank = its line number), each word in it a node
    (depth 2, rank = its place in the line); spaces and the newline belong to the line."""
    text = source_text(raw)
    char_node, parent, rank = np.full(len(text), -1, np.int32), [], []
    start = 0
    for i, line in enumerate(text.split("\n")):
        char_node[start:start + len(line) + 1] = len(parent)
        parent.append(-1)
        rank.append(i)
        for k, word in enumerate(re.finditer(r"\S+", line)):
            char_node[start + word.start():start + word.end()] = len(parent)
            parent.append(len(parent) - k - 1)
            rank.append(k)
        start += len(line) + 1
    return trees.Doc(text, char_node, np.array(parent, np.int32), np.array(rank, np.int32))


def toy_build(item):   # module level: prepare.py's worker processes receive it by name
    return corpora.build(item, toy_doc)


def toy_sources(args):
    return corpora.find_files(args.src, (".txt",)), args.src


def lines(c, doc):     # the record rule: a record may start at a new line
    return np.r_[True, c["path"][1:, 0] != c["path"][:-1, 0]]


CORPORA = {"toy": corpora.Corpus(toy_sources, toy_build, lines, attention=("same_depth",))}


def test_a_new_corpus_is_one_entry_and_its_builder(monkeypatch, tmp_path):
    rng = np.random.default_rng(0)
    words = "tree rotary plane angle depth path rank level node sibling parent child".split()
    src = tmp_path / "src"
    src.mkdir()
    names = [f"doc{i}.txt" for i in range(200)]
    for s in prepared.SPLITS:     # three documents in every split, whichever way the names hash
        for name in [n for n in names if prepare.split_of(n) == s][:3 if s != "train" else 30]:
            (src / name).write_text("\n".join(" ".join(rng.choice(words, rng.integers(2, 7)))
                                              for _ in range(12)))
    monkeypatch.setitem(settings.CORPORA, "toy", __name__)
    out = str(tmp_path / "data")
    prepare.main(["toy", "--src", str(src), "--out", out, "--vocab", "300", "--max_len", "64",
                  "--workers", "1"])
    meta = json.load(open(os.path.join(out, "toy", "meta.json")))
    assert meta["documents"] == 36 and meta["settings"]["defaults"] == \
        {"attention": ["same_depth"]}
    run = train.main(["--corpus", "toy", "--config", "seq_tree", "--data", out,
                      "--out", str(tmp_path / "out"), "--steps=1", "--n_layer=1", "--n_embd=128",
                      "--n_head=1", "--max_len=64", "--docs_per_step=4", "--compile=0", "--bf16=0"])
    result = evaluate.main([run, "--attention", "--max_docs", "3"])
    assert set(result["interventions"]) == {"shuffle", "remove"} and \
        np.isfinite(result["kinds"]["all"]["nll"])
    shares = json.load(open(os.path.join(run, "attention_test.json")))
    assert 0 < shares["same_depth_elsewhere"]["mean_over_heads"] < 1
