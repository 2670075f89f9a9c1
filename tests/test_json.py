"""JSON as a tree (beyond the papers): nodes by hand, the round trip and the prefix property on
real files, hostile files, and sample.py's online coordinates against prepare.py's."""
import json
import os
import shutil

import numpy as np
import pytest
import torch

import prepare
import sample
import tokenizer
import train
import trees


def real_json_files(n):
    """Up to n real .json files from prepare.py json's default sources (installed packages,
    /usr/share), smallest first among those over 200 bytes, so tests stay quick."""
    dirs = prepare.json_sources(type("A", (), {"src": None})())[1]
    files = [p for _, p in prepare.find_files(dirs, (".json",)) if 200 < os.path.getsize(p) < 20_000]
    if len(files) < 20:
        pytest.skip(f"fewer than 20 real .json files on this machine ({len(files)})")
    return files[:: max(1, len(files) // n)][:n]


def test_nodes_by_hand():
    """{"a":[1,{"b":null}],"c":"x"}: object -> members -> values; a member writes `"key":`, a
    container its brackets and commas, a scalar itself (paths derived by hand)."""
    d = trees.json_doc(b'{"a": [1, {"b": null}], "c": "x"}')
    assert d.text == '{"a":[1,{"b":null}],"c":"x"}'
    depth, path = d.node_coords()
    owner = {}
    for ch_i, ch in enumerate(d.text):
        owner.setdefault(ch, []).append((int(depth[d.char_node[ch_i]]), path[d.char_node[ch_i]][:5].tolist()))
    obj, member_a, arr = [0, -1, -1, -1, -1], [0, 0, -1, -1, -1], [0, 0, 0, -1, -1]
    assert owner["{"] == [(1, obj), (4, [0, 0, 0, 1, -1])]            # the outer object; the array's 2nd value
    assert owner[":"] == [(2, member_a), (5, [0, 0, 0, 1, 0]), (2, [0, 1, -1, -1, -1])]
    assert owner["1"] == [(4, [0, 0, 0, 0, -1])]                         # the array's first value
    assert owner[","] == [(3, arr), (1, obj)]                            # commas belong to their container
    assert owner["n"] == [(6, [0, 0, 0, 1, 0])]                          # null: the member b's value
    assert owner["x"] == [(3, [0, 1, 0, -1, -1])]
    # labels: the node's type by first appearance (object member array number null string)
    assert d.label.tolist() == [0, 1, 2, 3, 0, 1, 4, 1, 5]


def test_round_trip_and_prefix_property_on_real_files():
    """Real files: json.loads of the compact text equals the input's; every prefix of the text
    gives its characters the nodes (depth and path) the whole text gives them."""
    files = real_json_files(40)
    kept = 0
    for p in files:
        raw = open(p, "rb").read()
        try:
            d = trees.json_doc(raw)
        except trees.Skip:
            continue
        kept += 1
        assert json.loads(d.text) == json.loads(raw.decode("utf-8-sig"))
        depth, path = d.node_coords()
        for cut in sorted({1, len(d.text) // 3, len(d.text) // 2, len(d.text) - 1}):
            part = trees.json_coords(d.text[:cut])
            dp, pp = part.node_coords()
            a, b = d.char_node[:cut], part.char_node
            assert ((a >= 0) == (b >= 0)).all()
            assert (depth[a[a >= 0]] == dp[b[b >= 0]]).all() and (path[a[a >= 0]] == pp[b[b >= 0]]).all(), p
    assert kept >= len(files) // 2


@pytest.mark.parametrize("raw,reason", [
    (b'{"a": [1, 2', "invalid json"),                                   # truncated
    (b'{"a":' * 11 + b"1" + b"}" * 11, "deeper than 22 levels"),        # 11 x (object, member) + the value
    (b"{\"a\": \"\xff\"}", "not utf-8"),
    (b"", "invalid json"),
    (b"[NaN]", "invalid json"),                                          # not JSON, though Python reads it
    (json.dumps(list(range(400))).encode(), "wider than 318 siblings"),
])
def test_hostile_json_is_a_counted_skip(raw, reason):
    with pytest.raises(trees.Skip) as e:
        trees.json_doc(raw)
    assert e.value.reason.startswith(reason)


def test_ten_levels_are_kept():
    d = trees.json_doc(b'{"a":' * 10 + b"1" + b"}" * 10)                # 21 levels
    assert d.node_coords()[0].max() == 21


@pytest.fixture(scope="module")
def tiny_json(tmp_path_factory):
    src = tmp_path_factory.mktemp("jsonsrc")
    for i, p in enumerate(real_json_files(80)):
        shutil.copy(p, src / f"{i:03d}_{os.path.basename(p)}")
    out = tmp_path_factory.mktemp("jsondata")
    prepare.main(["json", "--src", str(src), "--out", str(out), "--vocab", "400", "--max_len", "128", "--workers", "1"])
    return str(out), str(src)


def test_online_coordinates_equal_prepare_token_by_token(tiny_json):
    """The no-look-ahead rule in practice: feed whole documents token by token as sample.py does;
    each token's coordinates, recorded at its own step, equal prepare.py's on the whole text."""
    data, src = tiny_json
    enc = tokenizer.load(os.path.join(data, "json"))
    tok_len = tokenizer.token_lengths(enc)
    checked = 0
    for name in sorted(os.listdir(src))[:12]:
        try:
            doc = trees.json_doc(open(os.path.join(src, name), "rb").read())
        except trees.Skip:
            continue
        ids = enc.encode_ordinary(doc.text)[:150]
        whole = prepare.token_coords(trees.json_coords(sample.online_text(ids, enc)), np.asarray(ids), tok_len)
        full = prepare.token_coords(doc, np.asarray(enc.encode_ordinary(doc.text)), tok_len)
        for i in range(len(ids)):
            step = sample.online_coords("json", ids[:i + 1], enc, tok_len)
            for k in ("depth", "path", "within", "label"):
                assert np.array_equal(step[k], full[k][i]), (name, i, k)
                assert np.array_equal(step[k], whole[k][i])
        checked += 1
    assert checked >= 5


def test_a_character_cut_by_a_token_reads_as_content():
    """A token that ends inside a UTF-8 character: its bytes read as 'x' until the character
    completes, so byte offsets stay the tokens' and the string keeps owning them."""
    enc = tokenizer.encoding({bytes([b]): b for b in range(256)})     # byte tokens: 'é' is two
    tok_len = tokenizer.token_lengths(enc)
    ids = enc.encode_ordinary('{"k":"é"}')
    assert len(ids) == 10
    assert sample.online_text(ids[:7], enc) == '{"k":"x'
    step = sample.online_coords("json", ids[:7], enc, tok_len)
    full = prepare.token_coords(trees.json_doc('{"k":"é"}'.encode()), np.asarray(ids), tok_len)
    assert step["depth"] == full["depth"][6] == 3 and np.array_equal(step["path"], full["path"][6])


def test_sample_py_end_to_end(tiny_json, tmp_path, capsys):
    data, _ = tiny_json
    run = train.main(["--corpus", "json", "--config", "seq_depth", "--data", data, "--out", str(tmp_path),
                      "--steps=3", "--preset=cpu", "--n_layer=1", "--n_embd=64", "--n_head=1", "--max_len=128",
                      "--docs_per_step=4", "--val_docs=4", "--test_docs=4", "--milestones=1", "--mb_tokens=512"])
    texts = sample.main([run, "--num_samples", "2", "--max_new_tokens", "20", "--seed", "1"])
    out = capsys.readouterr().out
    assert len(texts) == 2 and all(t.startswith("{") for t in texts)
    assert "/2 samples parse as json" in out
    with pytest.raises(SystemExit, match="cannot serve"):
        cfg = json.load(open(os.path.join(run, "config.json")))
        cfg["run"]["corpus"] = "python"
        json.dump(cfg, open(os.path.join(run, "config.json"), "w"))
        sample.load(run, "cpu")
