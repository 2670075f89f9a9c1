"""Chat (corpora/chat.py): the exchange / speaker / position grid by hand on a two-exchange conversation,
the skip rule, and `prepare.py chat` on the installed dataset (a few conversations), trained a step.
Run: python -m pytest -q tests/test_chat.py"""
import json
import os

import numpy as np
import pytest

import prepare
import train
import trees
from treerope import fields, prepared
from treerope.corpora import chat

# two exchanges: Ann opens each; Bob answers the first with two messages, the second with one
TALK = [("ann", "Hi"), ("bob", "Hey"), ("bob", "ok"), ("ann", "Bye"), ("bob", "Cya")]


def test_chat_coordinates_by_hand():
    doc = chat.chat_doc(TALK)
    assert doc.text == "Hi\nHey\nok\nBye\nCya"
    ids = np.frombuffer(doc.text.encode(), np.uint8).astype(np.int64)   # one token per character
    c = fields.token_coords(doc, ids, np.ones(256, np.int64))
    got = [(ch, *c["chat"][i].tolist()) for i, ch in enumerate(doc.text)]
    assert got == [   # (token, exchange, speaker, position in its turn); a newline ends its message's turn
        ("H", 0, 0, 0), ("i", 0, 0, 1), ("\n", 0, 0, 2),
        ("H", 0, 1, 0), ("e", 0, 1, 1), ("y", 0, 1, 2), ("\n", 0, 1, 3), ("o", 0, 1, 4), ("k", 0, 1, 5),
        ("\n", 0, 1, 6),
        ("B", 1, 0, 0), ("y", 1, 0, 1), ("e", 1, 0, 2), ("\n", 1, 0, 3),
        ("C", 1, 1, 0), ("y", 1, 1, 1), ("a", 1, 1, 2)]
    # the tree: exchange -> turn (its rank in the exchange) -> message (its rank in the turn)
    at = {w: doc.text.index(w) for w in ("Hi", "Hey", "ok", "Bye", "Cya")}
    assert {w: c["path"][i, :3].tolist() for w, i in at.items()} == {
        "Hi": [0, 0, 0], "Hey": [0, 1, 0], "ok": [0, 1, 1], "Bye": [1, 0, 0], "Cya": [1, 1, 0]}
    assert set(c["depth"][[i for i, ch in enumerate(doc.text) if ch != "\n"]]) == {3}
    assert (c["path"][np.array(list(doc.text)) == "\n"] == -1).all()            # separators: no node
    # a record may start at each new turn
    assert np.flatnonzero(chat.turns(c, doc)).tolist() == [0, 3, 10, 14]
    # and no coordinate depends on later text: every prefix conversation gives the same
    for k in range(1, len(TALK)):
        part = TALK[:k]
        if len({s for s, _ in part}) < 2:
            continue
        p = fields.token_coords(chat.chat_doc(part), ids[:len("\n".join(t for _, t in part))],
                              np.ones(256, np.int64))
        assert (p["chat"] == c["chat"][:len(p["chat"])]).all() and \
            (p["path"] == c["path"][:len(p["path"])]).all()


def test_one_speaker_is_a_counted_skip():
    with pytest.raises(trees.Skip, match="one speaker only"):
        chat.chat_doc([("ann", "anyone home?"), ("ann", "hello?")])


def test_prepare_chat_default_source_and_a_step(tmp_path):
    """The default source is the installed chitchat_dataset: real conversations, never synthetic."""
    pytest.importorskip("chitchat_dataset")
    out = prepare.main(["chat", "--conversations", "240", "--vocab", "300", "--max_len", "128",
                        "--workers", "1", "--out", str(tmp_path)])
    meta = json.load(open(os.path.join(out, "meta.json")))
    assert not meta["synthetic"] and meta["documents"] + meta["skipped_total"] == 240
    a = prepared.load_split(out, "train")
    g = np.asarray(a["chat"])
    assert g.shape[1] == 3 and set(np.unique(g[:, 1])) == {0, 1}
    record_start = np.zeros(len(g), bool)
    record_start[np.asarray(a["doc_start"])[:-1]] = True
    new_turn = np.r_[True, (g[1:, :2] != g[:-1, :2]).any(1)] & ~record_start
    same_turn = ~new_turn & ~record_start
    assert (g[new_turn, 2] == 0).all() and \
        (g[same_turn, 2] == g[np.flatnonzero(same_turn) - 1, 2] + 1).all()
    run = train.main(["--corpus", "chat", "--config", "seq_chat_grid", "--data", str(tmp_path),
                      "--out", str(tmp_path / "out"), "--steps=1", "--n_layer=1", "--n_embd=128",
                      "--n_head=1", "--max_len=128", "--docs_per_step=4", "--compile=0", "--bf16=0"])
    assert np.isfinite(json.load(open(os.path.join(run, "final.json")))["val_loss"])


def test_a_folder_is_read_and_a_bad_file_is_a_counted_skip(tmp_path):
    """`prepare.py chat --src FOLDER` was an IsADirectoryError and an empty .json a JSONDecodeError: a
    folder's .json files are read, 40 real conversations in one of them, and an empty file and a file
    that is not JSON are counted skips."""
    pytest.importorskip("chitchat_dataset")
    src = tmp_path / "src" / "nested"
    os.makedirs(src)
    real = json.load(open(chat.default_source()))
    (src / "forty.json").write_text(json.dumps(dict(list(real.items())[:40])))
    (src / "empty.json").write_text("")
    (src / "broken.json").write_text('{"a": ')
    [(_, empty)] = chat.conversations(str(src / "empty.json"))   # a file given alone: the same skip
    assert isinstance(empty, trees.Skip) and "not JSON" in str(empty)
    out = prepare.main(["chat", "--src", str(tmp_path / "src"), "--vocab", "300", "--max_len", "128",
                        "--workers", "1", "--out", str(tmp_path / "d")])
    meta = json.load(open(os.path.join(out, "meta.json")))
    assert meta["documents"] + meta["skipped_total"] == 42, meta
    assert sum(v for k, v in meta["skipped"].items() if k.startswith("not JSON")) == 2, meta["skipped"]


def test_a_file_nested_too_deep_is_a_counted_skip(tmp_path):
    """Issue 71 T6: a JSON nested 10,000 deep was a RecursionError (read in `sources`, before
    corpora.build's guard): a counted skip with build's reason."""
    src = tmp_path / "src"
    os.makedirs(src)
    (src / "deep.json").write_text("[" * 10_000 + "]" * 10_000)
    args, _ = prepare.parse(["chat", "--src", str(src), "--out", str(tmp_path), "--workers", "1"])
    items, _ = chat.sources(args)
    assert [(name, skip.reason) for name, skip in items] == [("deep.json:", "too deeply nested")]
