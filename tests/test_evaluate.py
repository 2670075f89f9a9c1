"""evaluate.py: interventions, per-kind scores and attention statistics, where the expected
effect is known by construction."""
import itertools
import json
import math
import os
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from conftest import TINY_PYTHON

import analyze
import evaluate
import prepare
import train
import trees
from model import GPT, GPTConfig
from treerope import batches, figures, statistics
from treerope.corpora import python as pycorpus
from treerope.hrope import boundaries, compression, hubs, paragraph_depth
from treerope.prepared import corpus_stats


def test_zero_structural_rates_make_shuffle_a_no_op(tiny_python):
    """seq_depth with its two learned depth rates (and offsets) at zero: depth turns no plane,
    so shuffling or removing it changes no score. With the paper's rates it does."""
    d = os.path.join(tiny_python, "python")
    split = batches.Split(d, "test", 64)
    ids = np.arange(4)
    cfg = {"mb_tokens": 512, "device": "cpu"}
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=512, n_layer=2, n_embd=128, n_head=1, max_len=64,
                          configuration="seq_depth")).eval()
    base = evaluate.score(model, split, ids, cfg, {})
    moved = evaluate.score(model, split, ids, cfg, {}, change=evaluate.shuffle, seed=1)
    assert not all(np.allclose(base[r], moved[r]) for r in base)      # the test can fail
    with torch.no_grad():
        model.rotary.rates.zero_()
        model.rotary.offsets.zero_()
    base = evaluate.score(model, split, ids, cfg, {})
    for change in (evaluate.shuffle, evaluate.remove):
        moved = evaluate.score(model, split, ids, cfg, {}, change=change, seed=1)
        assert all(np.allclose(base[r], moved[r], atol=1e-5) for r in base)


def paragraph_batch():
    p = torch.tensor([[[0, 0, 0], [0, 0, 1], [0, 1, 0], [0, 1, 1],
                       [1, 0, 0], [1, 0, 1], [2, 0, 0], [2, 1, 0]]])
    return {"tokens": torch.arange(8)[None], "pos": torch.arange(8)[None], "p": p, "len": torch.tensor([8])}


@pytest.mark.parametrize("name,groups", [("fake_merge", 2), ("fake_split", 4)])
def test_fake_merge_and_split_change_only_p1(name, groups):
    b = paragraph_batch()
    before = {k: v.clone() for k, v in b.items()}
    evaluate.INTERVENTIONS[name](b, torch.Generator().manual_seed(0))
    assert torch.equal(b["tokens"], before["tokens"]) and torch.equal(b["pos"], before["pos"])
    assert torch.equal(b["p"][..., 1:], before["p"][..., 1:])                  # p2, p3 untouched
    p1 = b["p"][0, :, 0]
    assert len(torch.unique(p1)) == groups and (p1.diff() >= 0).all() and (p1.diff() <= 1).all()
    if name == "fake_split":   # the new boundary sits at a sentence start inside a paragraph
        at = int(torch.nonzero(p1 != before["p"][0, :, 0])[0])
        assert at in (2, 7)


def test_p1_substitutions():
    b = paragraph_batch()
    b.update(p1_period=3, p1_density=0.5)
    for name, want in (("period", [0, 0, 0, 1, 1, 1, 2, 2]), ("const0", [0] * 8)):
        bb = {k: (v.clone() if torch.is_tensor(v) else v) for k, v in b.items()}
        evaluate.INTERVENTIONS[name](bb, None)
        assert bb["p1_sub"][0].tolist() == want and torch.equal(bb["p"], b["p"])   # p2, p3, true p1 kept
    bb = dict(b)
    evaluate.rand(bb, torch.Generator().manual_seed(0))
    p1 = bb["p1_sub"][0]
    assert p1[0] == 0 and (p1.diff() >= 0).all() and (p1.diff() <= 1).all()


def test_ancestor_and_same_depth_shares_by_hand():
    # nodes: 0 root-level A (depth 1), 1 its child (depth 2), 2 grandchild (depth 3), 3 another depth-1 node
    path = torch.full((4, 22), -1)
    path[0, 0] = 0
    path[1, :2] = torch.tensor([0, 0])
    path[2, :3] = torch.tensor([0, 0, 0])
    path[3, 0] = 1
    depth = torch.tensor([1, 2, 3, 1])
    anc = evaluate.ancestor_mask(path, depth)
    assert anc.int().tolist() == [[0, 0, 0, 0], [1, 0, 0, 0], [1, 1, 0, 0], [0, 0, 0, 0]]
    same = evaluate.same_depth_mask(path, depth)
    assert same[3].tolist() == [True, False, False, False] and not same[2].any()
    att = torch.tensor([[1, 0, 0, 0], [.5, .5, 0, 0], [.2, .3, .5, 0], [.1, .2, .3, .4]])[None, None]
    earlier = torch.ones(4, 4, dtype=torch.bool).tril(-1)
    m = anc & earlier
    s, q = evaluate.share(att, m, m.any(-1))
    assert q == 2 and s.item() == pytest.approx(0.5 + 0.5)                 # query 1: .5, query 2: .2 + .3


def test_depth_cells_by_hand():
    att = torch.tensor([[1, 0, 0], [.25, .75, 0], [.5, .25, .25]])[None, None]
    p1 = torch.tensor([0, 1, 1])
    S, Q, N = compression.depth_cells(att, p1, n_d=3, n_k=3)
    # pairs (i, j): (1, 0) d=1 Δp1=1; (2, 0) d=2 Δp1=1; (2, 1) d=1 Δp1=0
    assert N.tolist() == [[0, 0, 0], [1, 1, 0], [0, 1, 0]]
    assert S[1, 1] == pytest.approx(np.log(.25)) and S[2, 1] == pytest.approx(np.log(.5))
    assert Q[1, 0] == pytest.approx(np.log(.25) ** 2)


def test_depth_cells_bin_by_the_labels_read_by_hand():
    """Table 3 reading the label bins. Four tokens, true p1 0 0 1 1, labels read 0 1 1 2. Pairs
    (query, key): (1,0) d1 true Δ0 read Δ1; (2,1) d1 1/0; (3,2) d1 0/1; (2,0) d2 1/1; (3,1) d2
    1/1; (3,0) d3 1/2. A second label draw 0 0 0 1 on the same record adds its pairs: (1,0) (2,1)
    d1 Δ0, (3,2) d1 Δ1, (2,0) d2 Δ0, (3,1) d2 Δ1, (3,0) d3 Δ1; the true binning counts twice."""
    att = torch.tensor([[1, 0, 0, 0], [.5, .5, 0, 0], [.2, .3, .5, 0], [.1, .2, .3, .4]])[None, None]
    p = torch.tensor([[0, 0, 0], [0, 0, 1], [1, 0, 0], [1, 0, 1]])
    _, collect_cells, summary = evaluate.attention_stats([], 4)
    collect_cells(7, {"p": p, "p1_read": torch.tensor([0, 1, 1, 2])}, att)
    true, read = (summary()[1][s][7] for s in ("", "_read"))          # (sum, sumsq, count), (d, Δp1 <= 32)
    assert true[2].shape == (4, 33) and true[2][:, 3:].sum() == read[2][:, 3:].sum() == 0
    assert true[2][:, :3].tolist() == [[0, 0, 0], [2, 1, 0], [0, 2, 0], [0, 1, 0]]
    assert read[2][:, :3].tolist() == [[0, 0, 0], [1, 2, 0], [0, 2, 0], [0, 0, 1]]
    assert (read[0][1, 0] == pytest.approx(np.log(.3))
            and read[0][1, 1] == pytest.approx(np.log(.5) + np.log(.3)))
    assert true[0][1, 0] == pytest.approx(np.log(.5) + np.log(.3))
    collect_cells(7, {"p": p, "p1_read": torch.tensor([0, 0, 0, 1])}, att)     # a second label draw
    true, read = (summary()[1][s][7] for s in ("", "_read"))
    assert true[2][:, :3].tolist() == [[0, 0, 0], [4, 2, 0], [0, 4, 0], [0, 2, 0]]
    assert read[2][:, :3].tolist() == [[0, 0, 0], [3, 3, 0], [1, 3, 0], [0, 1, 1]]


def test_per_kind_scores_follow_hand_marked_tokens():
    """A kind belongs to the token being predicted: NLL at position i scores token i + 1."""
    kind = np.array([0, 0, trees.KIND_AFTER_CLOSE, 0, trees.KIND_AFTER_CLOSE, 0], np.uint8)
    split = SimpleNamespace(a={"kind": kind}, start=np.array([0]), len=np.array([6]))
    per = {0: np.array([1.0, 2.0, 3.0, 4.0, 5.0])}
    out, nll, k = evaluate.by_kind(per, split, np.array([0]))
    assert out["after_close"] == {"nll": pytest.approx((2.0 + 4.0) / 2), "tokens": 2}
    assert out["all"]["nll"] == pytest.approx(3.0)
    # the flags on a small program: a subtree of 2+ nodes closes before Return (arguments) and Assign
    # (the function); =1 follows a leaf, its sibling y; a flag sits on the space a node begins with
    doc = pycorpus.python_doc("def f(x):\n    return x\ny = 1\n")
    assert doc.text == "FunctionDef f arguments =:x0 Return x0 Assign y =1"

    def flagged(k):
        return [doc.text[i:].split(" ")[1] for i in np.flatnonzero(doc.char_kind & k)]
    assert (flagged(trees.KIND_AFTER_CLOSE) == ["Return", "Assign"]
            and flagged(trees.KIND_AFTER_LEAF) == ["=1"])


def code_corpus(tmp_path, max_len):
    """15 real stdlib files as an hRoPE code corpus (blocks and lines), records of <= max_len."""
    src = tmp_path / "src"
    src.mkdir()
    for p in TINY_PYTHON[:15]:
        (src / os.path.basename(p)).write_bytes(open(p, "rb").read())
    data = tmp_path / "data"
    prepare.main(["code", "--src", str(src), "--out", str(data), "--vocab", "300",
                  "--max_len", str(max_len), "--workers", "1"])
    return data


def test_cli_on_trained_runs(tiny_python, tmp_path):
    """Python: scores, interventions, ancestor share; code (hRoPE): p1 substitutions, fake
    merge/split, depth cells that analyze.py reads, and the Fig. 1 demo."""
    tiny = ["--n_layer=2", "--n_embd=128", "--max_len=64", "--docs_per_step=4", "--val_docs=4",
            "--test_docs=4", "--milestones=1", "--mb_tokens=256", "--steps=2"]
    run = train.main(["--compile=0", "--bf16=0", "--corpus", "python", "--config", "seq_depth",
                      "--data", tiny_python, "--out", str(tmp_path), "--n_head=1", *tiny])
    res = evaluate.main([run, "--max_docs", "4", "--attention"])
    assert set(res["interventions"]) == {"shuffle", "remove"} and "after_close" in res["kinds"]
    # --docs 2: every record of the split's first and last documents (evenly spaced, two of them)
    split = evaluate.Split(os.path.join(tiny_python, "python"), "train", 64)
    docs = evaluate.record_docs(split, np.arange(len(split.len)))
    whole = evaluate.main([run, "--split", "train", "--docs", "2", "--interventions", "none"])
    assert whole["documents"] == 2 and whole["records"] == np.isin(docs, [docs.min(), docs.max()]).sum()
    att = json.load(open(os.path.join(run, "attention_test.json")))
    assert 0 < att["ancestor"]["mean_over_heads"] < 1
    z = np.load(os.path.join(run, "eval_test_tokens.npz"))
    assert len(z["nll"]) == res["kinds"]["all"]["tokens"] == len(z["record"])

    data = code_corpus(tmp_path, 64)
    run = train.main(["--compile=0", "--bf16=0", "--corpus", "code", "--config", "hrope_axial",
                      "--data", str(data), "--out", str(tmp_path), "--n_head=2", *tiny])
    res = evaluate.main([run, "--max_docs", "6", "--attention", "--demo"])
    assert set(res["interventions"]) >= {"period", "rand", "const0", "fake_merge", "fake_split"}
    acc = compression.load_acc(os.path.join(run, "depth_test.npz"))
    assert acc["count"].shape[1:] == (64, compression.K_MAX + 1) and acc["count"].sum() > 0
    demo = res["demo"]
    assert demo["real"]["to_first_sentence"] != demo["fake_split"]["to_first_sentence"]


def test_docs_takes_whole_documents_spaced_evenly(capsys):
    """--docs counts documents as paper 004 does: 3 of 5 documents are the 1st, 3rd and 5th, with
    every record of each (document 1's one, 3's two, 5's two); more than there are takes all."""
    split = SimpleNamespace(a={"record_doc": np.array([0, 1, 1, 1, 2, 2, 3, 4, 4]),
                               "doc_start": np.arange(10) * 5}, len=np.full(9, 5))
    assert evaluate.whole_docs(split, 3).tolist() == [0, 4, 5, 7, 8]
    assert evaluate.whole_docs(split, 9).tolist() == list(range(9))
    with pytest.raises(SystemExit):
        evaluate.parse(["run", "--docs", "3", "--max_docs", "8"])
    assert "--docs and --max_docs: choose one" in capsys.readouterr().err


def test_table3_cells_average_label_draws(tmp_path):
    """Table 3's depth cells over --label_draws: rand_axial's labels drawn afresh for each draw
    (2 x the 2-draw mean − the 1-draw cells is draw 1 alone: whole pair counts, one per pair,
    not draw 0 again); period_axial's grid floor(t/L) is fixed, so it is scored once, and at d = 1
    it moves by one label at every multiple of L: floor((n − 1)/L) pairs in a record of n tokens;
    hrope_axial reads the true p1, so no second binning is written."""
    prepared = os.path.join(str(code_corpus(tmp_path, 64)), "code")
    # paragraph starts inside 64-token records are rare here: plant a density of 0.1, a few per record
    with open(os.path.join(prepared, "meta.json")) as f:
        meta = json.load(f)
    with open(os.path.join(prepared, "meta.json"), "w") as f:
        json.dump({**meta, "p1_density": 0.1}, f)
    tiny = ["--n_layer=1", "--n_embd=128", "--max_len=64", "--docs_per_step=4", "--val_docs=4",
            "--test_docs=4", "--milestones=1", "--mb_tokens=512", "--steps=2", "--n_head=2", "--compile=0",
            "--bf16=0"]
    split = batches.Split(prepared, "train", 64)
    lens = split.len[evaluate.spread(split, 8)]
    L = corpus_stats(prepared)[1]["p1_period"]
    cells = {}
    for config in ("rand_axial", "period_axial", "hrope_axial"):
        run = train.main(["--corpus", "code", "--config", config, "--data", os.path.dirname(prepared),
                          "--out", str(tmp_path / "out"), *tiny])
        for k in (1, 2):
            evaluate.main([run, "--split", "train", "--max_docs", "8", "--interventions", "none",
                           "--attention", "--label_draws", str(k)])
            cells[config, k] = {s: dict(np.load(os.path.join(run, f"depth{s}_train.npz")))
                                for s in ("", "_read")
                                if os.path.exists(os.path.join(run, f"depth{s}_train.npz"))}
    r1, r2 = cells["rand_axial", 1], cells["rand_axial", 2]
    assert r1["_read"]["label_draws"] == r1[""]["label_draws"] == 1 and r2["_read"]["label_draws"] == 2
    draw1 = 2 * r2["_read"]["count"] - r1["_read"]["count"]
    assert np.array_equal(draw1, np.round(draw1)) and draw1.min() == 0
    assert draw1[:, 1].sum() == r1["_read"]["count"][:, 1].sum() == (lens - 1).sum()  # every d = 1 pair once
    assert not np.array_equal(draw1, r1["_read"]["count"])                            # another draw of labels
    assert np.array_equal(r2[""]["count"], r1[""]["count"])     # the true binning: the same pairs ...
    assert not np.allclose(r2[""]["sum"], r1[""]["sum"])        # ... under draw 1's attention too
    p1, p2 = cells["period_axial", 1], cells["period_axial", 2]
    assert p2["_read"]["label_draws"] == 1 and all(np.array_equal(p1["_read"][k], p2["_read"][k])
                                                   for k in p1["_read"])
    assert p1["_read"]["count"][:, 1, 1].sum() == ((lens - 1) // L).sum()
    assert p1["_read"]["count"][:, 1, 0].sum() == (lens - 1).sum() - ((lens - 1) // L).sum()
    assert set(cells["hrope_axial", 2]) == {""} and cells["hrope_axial", 2][""]["label_draws"] == 1


def test_sheet_column_offset_histogram_and_reference_share_by_hand():
    """Two rows of two cells, one token each, then a reference to A1 in row 2:
    tokens 0 A1, 1 B1, 2 A2, 3 B2 (a reference to A1)."""
    path = torch.full((4, 22), -1)
    path[:, :3] = torch.tensor([[0, 0, 0], [0, 0, 1], [0, 1, 0], [0, 1, 1]])
    depth = torch.full((4,), 4)
    ref = torch.full((4, 22), -1)
    ref[3, :3] = torch.tensor([0, 0, 0])
    bins, masks, cell = evaluate.sheet_masks(path, depth, ref)
    att = torch.tensor([[1, 0, 0, 0], [.6, .4, 0, 0], [.1, .2, .7, 0], [.5, .1, .3, .1]])[None, None]
    earlier = torch.ones(4, 4, dtype=torch.bool).tril(-1)
    q = cell & earlier.any(-1)                                      # queries 1, 2, 3

    def h(k):
        return evaluate.share(att, bins[k] & earlier, q)[0].item() / 3
    assert h("same_row_-1") == pytest.approx((.6 + .3) / 3)         # B1 -> A1, B2 -> A2
    assert h("rows_above_+0") == pytest.approx((.1 + .1) / 3)       # A2 -> A1, B2 -> B1
    assert h("rows_above_-1") == pytest.approx(.5 / 3)              # B2 -> A1
    assert h("rows_above_+1") == pytest.approx(.2 / 3)              # A2 -> B1
    m = masks["referenced_cell"] & earlier
    s, n = evaluate.share(att, m, m.any(-1))
    assert n == 1 and s.item() == pytest.approx(.5)                 # the reference B2 -> its target A1


def test_cli_on_a_sheets_run(tmp_path):
    data = tmp_path / "data"
    prepare.main(["sheets", "--workbooks", "17", "--out", str(data), "--vocab", "300", "--max_len", "64",
                  "--workers", "1"])                                  # 17: the first count with val and test
    run = train.main(["--compile=0", "--bf16=0", "--corpus", "sheets", "--config", "seq_grid",
                      "--data", str(data), "--out", str(tmp_path), "--n_layer=2", "--n_embd=128",
                      "--n_head=1", "--max_len=64", "--docs_per_step=4", "--val_docs=4", "--test_docs=4",
                      "--milestones=1", "--mb_tokens=256", "--steps=2"])
    # --rotation_off implies --attention
    res = evaluate.main([run, "--split", "train", "--max_docs", "40", "--rotation_off"])
    assert ({"row_end", "cell_ref"} <= set(res["kinds"])
            and {"shuffle", "remove"} == set(res["interventions"]))
    att = json.load(open(os.path.join(run, "attention_train.json")))
    off = json.load(open(os.path.join(run, "attention_train_rotation_off.json")))
    assert (set(off) == set(att)
            and off["same_column_above"]["queries"] == att["same_column_above"]["queries"] > 0)
    row, above = att["same_row_by_column_offset"], att["rows_above_by_column_offset"]
    assert row["offsets"] == above["offsets"] == list(range(-8, 9))
    assert 0 < sum(row["mean_over_heads"]) + sum(above["mean_over_heads"]) <= 1
    assert sum(row["mean_over_heads"][9:]) == 0                    # later columns of one row come later
    assert 0 <= att["same_column_above"]["mean_over_heads"] <= 1


def test_rotation_off_classes_keys_by_the_true_coordinates(tiny_python, tmp_path):
    """evaluate.py --rotation_off (appendix §2): the shares again with the structural planes at angle
    0. With seq_depth's depth rates and offsets at zero, depth turns no plane, so switching it off
    changes no attention: every head's share on ancestors is the one with the rotation on, over the
    same queries (classed by the removed coordinates instead, no key would be an ancestor). With the
    paper's rates it changes."""
    split = batches.Split(os.path.join(tiny_python, "python"), "test", 64)
    ids, cfg = np.arange(4), {"mb_tokens": 512, "device": "cpu"}
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=512, n_layer=2, n_embd=128, n_head=1, max_len=64,
                          configuration="seq_depth")).eval()

    def on_off():
        collect, _, summary = evaluate.attention_stats(("ancestor",), 64)
        evaluate.score(model, split, ids, cfg, {}, attention=collect)
        evaluate.write_attention(summary, split, ids, str(tmp_path), "test")
        evaluate.write_rotation_off(model, split, ids, cfg, {}, ("ancestor",), str(tmp_path), "test")
        return [json.load(open(tmp_path / f"attention_test{s}.json"))["ancestor"]
                for s in ("", "_rotation_off")]
    on, off = on_off()
    assert (off["queries"] == on["queries"] > 0
            and not np.allclose(off["per_layer_head"], on["per_layer_head"]))
    with torch.no_grad():
        model.rotary.rates.zero_()
        model.rotary.offsets.zero_()
    on, off = on_off()
    assert (off["queries"] == on["queries"]
            and np.allclose(off["per_layer_head"], on["per_layer_head"], atol=1e-6))


def test_spread_covers_documents_round_robin():
    split = SimpleNamespace(a={"record_doc": np.array([0, 0, 0, 1, 2, 2]), "doc_start": np.arange(0, 14, 2)},
                            len=np.full(6, 2))
    assert evaluate.spread(split, 3).tolist() == [0, 3, 4]          # first record of each document
    assert evaluate.spread(split, 5).tolist() == [0, 1, 3, 4, 5]
    split = SimpleNamespace(a={"doc_start": np.arange(0, 14, 2)}, len=np.full(6, 2))   # no record_doc
    assert evaluate.spread(split, 3).tolist() == [0, 1, 2]


def test_boundary_effect_end_to_end_and_h0_exact_for_p1_blind_models(tmp_path, capsys):
    """evaluate.py --boundary on tiny code runs, analyze.py --boundary prints Table 1: flat,
    sent_axial and rand_axial do not read p1, so falsifying it changes no input and Δ_B = Δ_C = 0
    exactly; hrope_axial reads it."""
    data = code_corpus(tmp_path, 128)
    tiny = ["--n_layer=2", "--n_embd=128", "--max_len=128", "--docs_per_step=4", "--val_docs=4",
            "--test_docs=4", "--milestones=1", "--mb_tokens=512", "--steps=2", "--n_head=2", "--compile=0",
            "--bf16=0"]
    for config in ("flat", "sent_axial", "hrope_axial", "rand_axial"):
        for seed in (0, 1):
            run = train.main(["--corpus", "code", "--config", config, "--seed", str(seed),
                              "--data", str(data), "--out", str(tmp_path / "out"), *tiny])
            # hrope_axial: more records than train documents, so some are a document's later windows
            hrope = config == "hrope_axial"
            evaluate.main([run, "--split", "train", "--max_docs", "24" if hrope else "8",
                           "--interventions", "none", "--boundary"] + ["--paragraphs"] * hrope)
            # writes eval_test.json
            res = evaluate.main([run, "--max_docs", "1", "--interventions", "none", "--demo"])
            change = res["demo"]["d_eff_change_across_boundary"]
            assert (change == 0.0) == (config != "hrope_axial")      # Fig. 3: zero for the p1-blind models
    meta, corpus = corpus_stats(os.path.join(str(data), "code"))   # rand_axial reads random labels: the
    torch.manual_seed(0)                                          # same ones in both conditions, every time
    rand = GPT(GPTConfig(vocab_size=meta["tokenizer"]["vocab"], n_layer=1, n_embd=128, n_head=2, max_len=128,
                         configuration="rand_axial", corpus=corpus))
    demos = [boundaries.demo(rand.eval(), os.path.join(str(data), "code"), corpus) for _ in range(2)]
    assert demos[0] == demos[1] and demos[0]["d_eff_change_across_boundary"] == 0.0
    pooled = boundaries.boundary_pool(str(tmp_path / "out"), "train")
    rows = {r["config"]: r for r in boundaries.boundary_table(pooled, draws=200)}
    for blind in ("flat", "sent_axial", "rand_axial"):   # rand_axial: its labels, as in condition A
        assert rows[blind]["delta_B"] == 0.0 and rows[blind]["delta_C"] == 0.0
        assert rows[blind]["delta_B_lo"] == rows[blind]["delta_B_hi"] == 0.0
    assert rows["hrope_axial"]["delta_C"] != 0.0 and rows["hrope_axial"]["boundaries"] > 0
    analyze.main(["--boundary", str(tmp_path / "out"), "--split", "train", "--draws", "200"])
    out = capsys.readouterr().out
    boundaries.main([str(tmp_path / "out"), "--split", "train"])   # Table 1's own command (4,000 draws)
    table1 = capsys.readouterr().out
    assert table1.count("holds exactly") == 3 and out.endswith(table1)
    figures.figure_demo(statistics.load_runs(str(tmp_path / "out")), str(tmp_path))
    rows = open(tmp_path / "fig3_demo.csv").read().splitlines()[1:]
    assert (tmp_path / "fig3_demo.png").exists() and len(rows) == 4
    assert {r.split(",")[0]: float(r.split(",")[2]) == 0.0 for r in rows} == {
        "flat": True, "sent_axial": True, "hrope_axial": False, "rand_axial": True}
    assert out.count("holds exactly") == 3 and "| hrope_axial |" in out
    # Tables 5 and 9 from the two hrope_axial seeds (every baseline cell admitted at this size)
    reg = paragraph_depth.paragraph_regression(os.path.join(str(tmp_path / "out"), "code", "hrope_axial"),
                                           "train", gate=1)
    assert reg["runs"] == 2 and reg["paragraphs"] > 5 and reg["df"] == reg["paragraphs"] - 5
    # A.10, one window per document: the later windows' paragraphs are scored but left out
    assert reg["paragraphs"] < reg["paragraphs_every_window"] and reg["context"] == 128
    assert all(np.isfinite(reg[k]["b"]) and reg[k]["se"] > 0 for k in paragraph_depth.PREDICTORS)
    md = paragraph_depth.paragraph_markdown([reg, reg])
    capsys.readouterr()
    paragraph_depth.main([os.path.join(str(tmp_path / "out"), "code", "hrope_axial"), "--split", "train",
                          "--gate", "1"])                                      # Tables 5 and 9's own command
    assert capsys.readouterr().out.strip() == paragraph_depth.paragraph_markdown([reg]).strip()
    assert "| Embedding coherence |" in md and "STAND-IN" in reg["embedding"] and "| N documents |" in md
    # A.10's d-only pilot and the band decay over the 128-token window's 4 bands of 32
    assert (all(-1 <= reg["pilot"][k] <= 1 for k in ("r_d_only", "r_d_band"))
            and len(reg["band_decay"]["shift"]) == 4)
    assert "| d only (pilot) | code |" in md and "| code | " in md.split("Band-decay")[1]
    # rand_axial: compression-depth cells binned by the true p1 and by the labels its channel read
    run = train.main(["--corpus", "code", "--config", "rand_axial", "--data", str(data),
                      "--out", str(tmp_path / "out"), *tiny])
    res = evaluate.main([run, "--split", "train", "--max_docs", "8", "--interventions", "none",
                         "--attention", "--probe"])
    true, read = (np.load(os.path.join(run, f"depth{s}_train.npz"))["count"] for s in ("", "_read"))
    # Table 13 in its two passes: seed 1's pass 1 alone, then pass 2 on both (seed 0 runs its own
    # pass 1 first): one choice pooled over the two seeds, the pair-matched sets at their targets
    hub_runs = [os.path.join(str(tmp_path / "out"), "code", "hrope_axial", f"seed{s}") for s in (0, 1)]
    evaluate.main([hub_runs[1], "--split", "train", "--max_docs", "8", "--hub_contributions"])
    for r in hub_runs:
        evaluate.main([r, "--split", "train", "--max_docs", "8", "--interventions", "none", "--hubs"])
    summary = json.load(open(os.path.join(hub_runs[0], "hub_train.json")))
    conds = summary["conditions"]
    assert summary["pooled_from"] == ["seed0", "seed1"] and set(conds) == {
        "original", "hub", "freq", "random0", "random1", "random2", "pair_matched0", "pair_matched1",
        "pair_matched2", "sweep25", "sweep50", "sweep75"}
    assert all(conds[f"pair_matched{k}"]["target_pairs"] == conds["hub"]["blocked_pairs"] for k in range(3))
    assert all(c["difference"] == c["blocked_pairs"] - c["target_pairs"]
               for c in conds.values() if "target_pairs" in c)
    rows, sweep, draws, checks = table = hubs.hub_table(hub_runs, "train", gate=1, draws=50)
    capsys.readouterr()
    hubs.main(hub_runs + ["--split", "train", "--draws", "50"])    # Table 13's own command (gate 2000)
    assert "2 seed(s) pooled by document (paper 004 Table 13)" in capsys.readouterr().out
    assert [r["condition"] for r in rows] == ["original", "hub", "freq", "random", "pair_matched"]
    # CIs where the paper brackets them
    assert [r["ci"] is None for r in rows] == [False, False, False, True, True]
    assert [s["percent"] for s in sweep] == [25, 50, 75, 100] and np.isfinite(rows[0]["U1"])
    assert np.array_equal([sweep[-1]["U"], sweep[-1]["U1"]], [rows[-1]["U"], rows[-1]["U1"]], equal_nan=True)
    assert "mass sweep" in hubs.hub_markdown(table, "t")
    # App. E's checks on a real model: the masked passes blocked exactly pass 1's pairs, the softmax
    # renormalised over the keys left, same-paragraph pairs untouched; pair-matched removes the hubs' share
    by = {c["condition"]: c for c in checks}
    assert set(by) == set(conds) and all(c["blocked"] == c["expected"] == conds[k]["blocked_pairs"]
                                         for k, c in by.items())
    assert all(c["row_sum_error"] < 1e-4 and c["blocked_attention"] == 0 and c["same_paragraph_kept"]
               for c in checks)
    assert by["hub"]["blocked"] > 0 and by["original"]["blocked"] == 0
    assert by["pair_matched0"]["blocked"] == by["hub"]["blocked"] + conds["pair_matched0"]["difference"]
    layers = res["probe"]["layers"]
    assert ([layer["layer"] for layer in layers] == [0, 1]
            and all(0 <= layer["auroc"] <= 1 for layer in layers))
    assert 0 < res["probe"]["boundary_share"] < 0.5 and res["probe"]["test_documents"] >= 1
    assert true.sum() > 0 and read.sum() > 0 and not np.array_equal(true, read)


def test_substitutions_reach_every_p1_reading_channel():
    """p1_sub replaces what the p1 channel reads: the true p1 for hrope_axial, the grid
    floor(t/L) for period_axial, the random labels for rand_axial. Feeding period_axial its own
    grid changes nothing; feeding it the true p1 (the reverse substitution) does."""
    from rotary import coordinate
    pos = torch.arange(8)[None]
    p = torch.tensor([[[0, 0, 0]] * 3 + [[1, 0, 0]] * 5])
    b = {"pos": pos, "p": p, "p1_period": 3, "p1_density": 0.25}
    assert coordinate(b, "period_p1").tolist() == [[0, 0, 0, 1, 1, 1, 2, 2]]
    own = dict(b)
    evaluate.period(own, None)
    assert torch.equal(coordinate(own, "period_p1"), coordinate(b, "period_p1"))   # a no-op on its own grid
    true = dict(b)
    evaluate.real(true, None)
    assert coordinate(true, "period_p1").tolist() == [[0, 0, 0, 1, 1, 1, 1, 1]]
    assert (coordinate(true, "rand_p1").tolist() == coordinate(true, "p1").tolist()
            == [[0, 0, 0, 1, 1, 1, 1, 1]])
    assert (evaluate.default_interventions(["period_p1", "p2", "p3"])[-4:]
            == ["real", "period", "rand", "const0"])
    assert "real" not in evaluate.default_interventions(["p1", "p2", "p3"])


def test_paragraph_cells_by_hand():
    """App. A.10 sums on six tokens, p1 = 0 0 0 1 1 2, bands of 2 tokens, log Ā(i, j) = 10 i + j.
    Δp1 = 0 pairs (query i, key j): (1,0) d1 b0, (2,0) d2 b1, (2,1) d1 b1, (4,3) d1 b2. Δp1 = 1
    pairs: (3,0) (3,1) (3,2) (4,0) (4,1) (4,2) with key paragraph 0, (5,3) (5,4) with key paragraph 1."""
    i, j = np.indices((6, 6))
    base_sum, base_n, rows, sums, counts = paragraph_depth.paragraph_cells(
        (10.0 * i + j), np.array([0, 0, 0, 1, 1, 2]), d_max=4, band=2)
    assert base_n.shape == (5, 3) and base_n.sum() == 4
    assert {(d, b): base_sum[d, b] for d, b in zip(*np.nonzero(base_n))} == {
        (1, 0): 10, (2, 1): 20, (1, 1): 21, (1, 2): 43}
    got = {tuple(r): (s, c) for r, s, c in zip(rows.tolist(), sums, counts)}
    assert got == {(0, 3, 1): (30, 1), (0, 2, 1): (31, 1), (0, 1, 1): (32, 1), (0, 4, 2): (40, 1),
                   (0, 3, 2): (41, 1), (0, 2, 2): (42, 1), (1, 2, 2): (53, 1), (1, 1, 2): (54, 1)}
    # d_max caps both: at d_max = 2 the pairs at d 3 and 4 are gone
    _, base_n, rows, _, _ = paragraph_depth.paragraph_cells((10.0 * i + j), np.array([0, 0, 0, 1, 1, 2]),
                                                        d_max=2, band=2)
    assert base_n.shape == (3, 3) and rows[:, 1].max() == 2 and len(rows) == 5


def test_probe_on_a_planted_signal():
    """A rare positive class (about 5%) that one feature separates: balanced accuracy, macro-F1
    and AUROC near 1 on held-out rows; labels unrelated to the features: balanced accuracy and
    AUROC near 0.5."""
    g = torch.Generator().manual_seed(0)
    X = torch.randn(4000, 8, generator=g)
    y = X[:, 3] > 1.65
    good = boundaries.logistic_probe(X[:3000], y[:3000], X[3000:], y[3000:])
    # macro-F1 lower: balancing costs precision
    assert good["balanced_accuracy"] > 0.95 and good["auroc"] > 0.99 and good["macro_f1"] > 0.75
    noise = torch.rand(4000, generator=g) < 0.05
    bad = boundaries.logistic_probe(X[:3000], noise[:3000], X[3000:], noise[3000:])
    assert abs(bad["balanced_accuracy"] - 0.5) < 0.1 and abs(bad["auroc"] - 0.5) < 0.1


def test_hub_sets_by_hand():
    """Six token types. Types with cross-paragraph pairs: 0 1 2 3 5, so 5% of them rounds to one
    type. Hub: the most negative aggregate (type 3, -10, 20 pairs); freq-matched: the most frequent
    type (4) whatever its pairs; random: one non-hub type; pair-matched: non-hub types blocking
    exactly 20 pairs: here all four others (10 + 5 + 4 + 1)."""
    contrib = np.array([-5.0, -1, 3, -10, 0, 2])
    pairs = np.array([10.0, 5, 4, 20, 0, 1])
    freq = np.array([100, 5, 50, 30, 200, 1])
    s, targets = hubs.hub_sets(contrib, pairs, freq, draws=3)
    assert s["hub"][0].tolist() == [3] and s["freq"][0].tolist() == [4]
    assert all(len(r) == 1 and r[0] in (0, 1, 2, 5) for r in s["random"])
    assert all(sorted(p.tolist()) == [0, 1, 2, 5] for p in s["pair_matched"])
    # the mass sweep: non-hub types blocking exactly 25/50/75% of the hubs' 20 pairs (5: 5 or 4 + 1;
    # 10: 10 or 5 + 4 + 1; 15: 10 + 5 or 10 + 4 + 1)
    assert targets == {"pair_matched": 20, "sweep25": 5, "sweep50": 10, "sweep75": 15}
    for pct in (25, 50, 75):
        (t,) = s[f"sweep{pct}"]
        assert 3 not in t and pairs[t].sum() == pct / 100 * 20


def test_pair_matched_sets_match_exactly_or_the_nearest():
    """Hubs' pairs 10, the other types' 7, 5, 3, 2: in every one of the 24 random orders the set
    blocks exactly 10 (7 + 3 or 5 + 3 + 2; filling until at least 10 gives 12 after 7, 5 or 5, 7
    and 14 after 2, 5, 7). Others 4, 4, 9 can make 0, 4, 8, 9, 13, 17: against 7 the nearest is 8
    (4 + 4, difference +1), against 6 it is 4 or 8, the smaller kept (-2)."""
    pairs = np.array([10, 7, 5, 3, 2])
    for order in itertools.permutations([1, 2, 3, 4]):
        t = hubs.match_pairs(np.array(order), pairs, 10)
        assert pairs[t].sum() == 10 and len(set(t.tolist())) == len(t) and 0 not in t
    pairs = np.array([0, 4, 4, 9])
    for order in itertools.permutations([1, 2, 3]):
        assert sorted(hubs.match_pairs(np.array(order), pairs, 7).tolist()) == [1, 2]
        assert pairs[hubs.match_pairs(np.array(order), pairs, 6)].sum() == 4
    # counts pooled over 3 seeds are multiples of 3: a target of 10 is met as nearly as 9 or 12 allow
    pairs = np.array([0, 3, 6, 9])
    assert pairs[hubs.match_pairs(np.array([3, 2, 1]), pairs, 10)].sum() == 9


def plant_contributions(root, seed, contrib, pairs, records=(0,)):
    """Pass 1's file for root/hrope_axial/seed<k>; returns the run folder."""
    run = os.path.join(root, "hrope_axial", f"seed{seed}")
    os.makedirs(run, exist_ok=True)
    np.savez(os.path.join(run, "hub_contrib_test.npz"), contrib=np.array(contrib, float),
             pairs=np.array(pairs, float), records=np.array(records))
    return run


def plant_tokens(data_dir, train, test):
    os.makedirs(data_dir, exist_ok=True)
    np.save(os.path.join(data_dir, "train_tokens.npy"), np.array(train, np.int64))
    np.save(os.path.join(data_dir, "test_tokens.npy"), np.array(test, np.int64))


def test_hubs_chosen_on_contributions_pooled_over_seeds(tmp_path):
    """Four types, one pair each, so one hub. Seed 0's aggregates -5 -4 0 2 pick type 0, seed 1's
    3 -1 -2 0 pick type 2; pooled, -2 -5 -2 2 picks type 1, for both seeds."""
    plant_tokens(str(tmp_path / "data"), [0, 1, 2, 3], [0, 1, 2, 3])
    runs = [plant_contributions(str(tmp_path), 0, [-5, -4, 0, 2], [1, 1, 1, 1]),
            plant_contributions(str(tmp_path), 1, [3, -1, -2, 0], [1, 1, 1, 1])]
    for run in runs:
        sets, targets, pairs, seeds = hubs.choose_hubs(run, "test", str(tmp_path / "data"), 4)
        assert sets["hub"][0].tolist() == [1] and seeds == ["seed0", "seed1"]
        assert pairs.tolist() == [2, 2, 2, 2] and targets["pair_matched"] == 2


def test_freq_matched_counts_the_training_split(tmp_path):
    """Freq-matched is the most frequent type of the training split (type 2: 3 of 6 tokens), not of
    the scored test records (type 0: 3 of 6)."""
    plant_tokens(str(tmp_path / "data"), [2, 2, 2, 1, 0, 3], [0, 0, 0, 1, 2, 3])
    run = plant_contributions(str(tmp_path), 0, [-1, 0, 0, 0], [1, 1, 1, 1])
    sets = hubs.choose_hubs(run, "test", str(tmp_path / "data"), 4)[0]
    assert sets["freq"][0].tolist() == [2] and sets["hub"][0].tolist() == [0]


def plant_cells(run, cond, docs, scale, seeds=("seed0",)):
    """hub_<cond>_test.npz: per document a well U(Δp1) = s ((Δp1 - 3)^2 - 9) / 10 at d = 1, 2
    (one pair a cell, value 0 at Δp1 = 0), s the document's scale."""
    k = np.arange(6)
    v = np.array(scale, float)[:, None, None] * ((k - 3.0) ** 2 - 9)[None, None, :] / 10 * np.ones((1, 3, 1))
    n = np.ones_like(v)
    np.savez(os.path.join(run, f"hub_{cond}_test.npz"), docs=np.array(docs), sum=v, sumsq=v * v, count=n)


def plant_choice(run, conditions, checks=None, cross=100):
    """hub_test.json as write_hubs leaves it; checks default to masks that did what was intended."""
    checks = checks or {c: {"blocked": v["blocked_pairs"], "expected": v["blocked_pairs"],
                            "row_sum_error": 1e-7, "blocked_attention": 0.0} for c, v in conditions.items()}
    json.dump({"pooled_from": ["seed0", "seed1"], "conditions": conditions, "cross_pairs": cross,
               "checks": checks}, open(os.path.join(run, "hub_test.json"), "w"))


def test_hub_contributions_count_every_pair_the_mask_blocks():
    """Tokens 5 6 7, p1 = 0 1 1: type 5 keys (1, 0) at d = 1 and (2, 0) at d = 2; the only
    same-paragraph pair, (2, 1), gives a baseline at d = 1 alone. Type 5's contribution is
    log A(1, 0) - log A(2, 1) = log 0.5 - log 0.3, but masking it blocks both pairs: 2 counted."""
    att = torch.tensor([[1, 0, 0], [.5, .5, 0], [.2, .3, .5]])[None, None]
    row = {"p": torch.tensor([[0, 0, 0], [1, 0, 0], [1, 1, 0]]), "tokens": torch.tensor([5, 6, 7])}
    contrib, pairs = hubs.hub_contributions(lambda attention: attention(0, row, att), 8)
    assert (pairs.tolist() == [0, 0, 0, 0, 0, 2, 0, 0]
            and contrib[5] == pytest.approx(math.log(.5) - math.log(.3)))
    assert contrib[6] == 0                                      # (2, 1) is same-paragraph: no contribution


def test_mask_check_by_hand():
    """Three tokens, p1 = 0 0 1, key tokens 0 and 2 masked: the one causal cross-paragraph pair to a
    masked key is (2, 0); (0, 2) and (1, 2) are masked too but lie in the future (not counted).
    Attention renormalised over the keys left: rows sum to 1, nothing on (2, 0). Zeroed after the
    softmax instead (row 2 keeps 0.3 + 0.5): the row-sum error is 0.2; left on (2, 0): 0.2 leaks."""
    blocked = hubs.cross_paragraph_block(torch.tensor([[0, 0, 1]]), torch.tensor([[True, False, True]]))[0]
    assert blocked.nonzero().tolist() == [[0, 2], [1, 2], [2, 0]]
    good = torch.tensor([[1, 0, 0], [.5, .5, 0], [0, .375, .625]])[None, None]
    assert hubs.mask_check(blocked, good) == (1, 0.0, 0.0)
    zeroed = torch.tensor([[1, 0, 0], [.5, .5, 0], [0, .3, .5]])[None, None]
    n, err, leak = hubs.mask_check(blocked, zeroed)
    assert n == 1 and err == pytest.approx(0.2) and leak == 0
    left = torch.tensor([[1, 0, 0], [.5, .5, 0], [.2, .3, .5]])[None, None]
    assert hubs.mask_check(blocked, left)[2] == pytest.approx(0.2)


def full_cells(docs, ks):
    """Per document a well v(Δp1) = ((Δp1 - 3)^2 - 9) / 10 (U* = -0.9 at Δp1 = 3) at d = 1, 2, one
    pair a cell, only at the displacements ks[doc] (0 included: the baseline)."""
    k = np.arange(6)
    n = np.zeros((len(docs), 3, 6))
    for i, kk in enumerate(ks):
        n[i, 1:, kk] = 1
    v = n * ((k - 3.0) ** 2 - 9) / 10
    return dict(docs=np.array(docs), sum=v, sumsq=v * v, count=n)


def test_hub_checks_and_the_dagger_fallback_by_hand(tmp_path):
    """Two seeds, three documents, the seeds' cells summed per document (2 pairs a cell), gate 4.
    original and hub: every document has Δp1 = 0..5, so 6 pairs a cell, a direct fit U* = -0.9 and
    10 surviving cells (d = 1, 2 x Δp1 = 1..5). freq: documents B and C lack Δp1 = 3..5, whose cells
    hold 2 pairs (under the gate): only Δp1 = 1, 2 survive (4 cells), too few for a degree-2 fit, so
    U* is Table 13's †: the bootstrap mean, over the draws that drew document A at least twice
    (its cells then reach 4 pairs and the exact parabola gives -0.9); P = 7/27 < 1/2, so no CI.
    Checks: hubs key 30 + 20 of 200 cross-paragraph pairs (25%), pair_matched0 removes 50 (25%);
    freq blocked 50 where pass 1 counted 51; pair_matched0 lost a same-paragraph pair in document C."""
    runs = [str(tmp_path / f"seed{s}") for s in (0, 1)]
    cond = {"original": 0, "hub": 50, "freq": 50, "pair_matched0": 50}
    conditions = {c: {"types": [], "blocked_pairs": n} for c, n in cond.items()}
    full = [range(6)] * 3
    for s, run in enumerate(runs):
        os.makedirs(run)
        for c, ks in {"original": full, "hub": full, "freq": [range(6), range(3), range(3)],
                      "pair_matched0": full}.items():
            cells = full_cells([3, 5, 8], ks)
            if c == "pair_matched0" and s == 1:
                cells["count"][2, 1, 0] = 0
            np.savez(os.path.join(run, f"hub_{c}_test.npz"), **cells)
        per_seed = {"original": 0, "hub": 30 - 10 * s, "freq": 25, "pair_matched0": 20 + 10 * s}
        checks = {c: {"blocked": n, "expected": n + (c == "freq" and s == 1),
                      "row_sum_error": 1e-7 * (1 + 2 * s), "blocked_attention": 0.0}
                  for c, n in per_seed.items()}
        plant_choice(run, conditions, checks)
    table = hubs.hub_table(runs, gate=4, draws=300)
    rows, _, draws, checks = table
    by = {r["condition"]: r for r in rows}
    assert by["original"]["U"] == pytest.approx(-0.9) and by["original"]["fallback"] is None
    assert by["freq"]["U"] == pytest.approx(-0.9) and 0 < by["freq"]["fallback"] < draws / 2
    assert by["freq"]["ci"] == draws - by["freq"]["fallback"] and by["freq"]["removed"] == pytest.approx(0)
    c = {k["condition"]: k for k in checks}
    assert [c[k]["cells"] for k in cond] == [10, 10, 4, 10]
    assert [(c[k]["blocked"], c[k]["expected"]) for k in cond] == [(0, 0), (50, 50), (50, 51), (50, 50)]
    assert c["hub"]["share"] == c["pair_matched0"]["share"] == 0.25 and c["original"]["share"] == 0
    assert [c[k]["same_paragraph_kept"] for k in cond] == [True, True, True, False]
    assert c["hub"]["row_sum_error"] == pytest.approx(3e-7)
    md = hubs.hub_markdown(table, "t")
    assert ("| freq | -0.900† | not identifiable" in md
            and f"freq: over the {by['freq']['fallback']} of 300 draws" in md)
    assert "| freq | 50 | 51 | **NO** |" in md and "| 25.00% | **NO** | 10 |" in md
    assert "hubs key 25.00% of the cross-paragraph pairs; Pair-matched random removes 25.00%" in md
    assert "hub / freq / pair-matched: 10 / 4 / 10" in md


def test_hub_table_clusters_are_documents(tmp_path):
    """Two seeds that scored the same six documents with identical cells: the document-cluster
    bootstrap resamples six documents, as for one seed, so the 95% CI is the same (were each seed's
    documents clusters of their own, twelve clusters would narrow it). A seed masked with other
    sets is refused."""
    runs = [str(tmp_path / f"seed{s}") for s in (0, 1)]
    choice = {"pooled_from": ["seed0", "seed1"],
              "conditions": {"original": {"types": [], "blocked_pairs": 0},
                             "pair_matched0": {"types": [4, 7], "blocked_pairs": 11, "target_pairs": 10,
                                               "difference": 1}}}
    for run in runs:
        os.makedirs(run)
        for cond in ("original", "pair_matched0"):
            plant_cells(run, cond, [3, 5, 8, 13, 21, 34], [1, 2, 3, 4, 5, 6])
        plant_choice(run, choice["conditions"])
    one = hubs.hub_table(runs[:1], gate=1, draws=400)
    two = hubs.hub_table(runs, gate=1, draws=400)
    lo, hi = one[0][0]["ci"]
    assert hi - lo > 0.1 and two[0][0]["ci"] == pytest.approx((lo, hi))
    assert two[0][0]["U"] == pytest.approx(-0.9 * 3.5)                     # the mean scale's vertex
    assert two[0][1]["difference"] == [1] and "| 11 (+1) |" in hubs.hub_markdown(two, "t")
    choice["conditions"]["pair_matched0"]["types"] = [4, 8]
    plant_choice(runs[1], choice["conditions"])
    with pytest.raises(SystemExit, match="other sets"):
        hubs.hub_table(runs, gate=1, draws=10)


def test_depth_cells_leave_out_blocked_pairs():
    """Three tokens, p1 = 0 0 1: pairs (1,0) in one paragraph, (2,0) and (2,1) across; blocking
    (2,0) removes exactly that pair from its cell (d = 2, Δp1 = 1)."""
    att = torch.tensor([[1, 0, 0], [.5, .5, 0], [.2, .3, .5]])[None, None]
    p1 = torch.tensor([0, 0, 1])
    blocked = torch.zeros(3, 3, dtype=torch.bool)
    blocked[2, 0] = True
    _, _, all_pairs = compression.depth_cells(att, p1, 4, 3)
    _, _, kept = compression.depth_cells(att, p1, 4, 3, exclude=blocked)
    assert all_pairs[2, 1] == 1 and kept[2, 1] == 0
    assert (np.delete(all_pairs.ravel(), 2 * 3 + 1) == np.delete(kept.ravel(), 2 * 3 + 1)).all()


def test_the_two_corpus_model_is_scored_per_corpus(tmp_path):
    """Appendix §2's two-corpus precursor reports web pages and spreadsheets apart: evaluate.py
    splits every score by the record's source (real pages of python3-doc, real workbooks)."""
    import glob
    import shutil
    pages = sorted(glob.glob("/usr/share/doc/python3-doc/html/library/*.html"))[:40]
    shared = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared")
    books = sorted(glob.glob(os.path.join(shared, "data", "workbooks", "*.xlsx")))[:40]
    if len(pages) < 40 or len(books) < 40:
        pytest.skip("needs python3-doc and ../shared/data/workbooks")
    for sub, files in (("web", pages), ("sheets", books)):
        os.makedirs(tmp_path / sub)
        for f in files:
            shutil.copy(f, tmp_path / sub)
    out = str(tmp_path / "data")
    prepare.main(["web_sheets", "--src", str(tmp_path / "web"), "--src", str(tmp_path / "sheets"),
                  "--out", out, "--vocab", "400", "--workers", "1"])
    run = train.main(["--corpus", "web_sheets", "--config", "two_corpus_shared", "--data", out,
                      "--out", str(tmp_path / "out"), "--steps=1", "--val_docs=2", "--test_docs=8",
                      "--compile=0", "--bf16=0"])
    kinds = evaluate.main([run, "--interventions", "none", "--max_docs", "40"])["kinds"]
    web, sheets = kinds["corpus: web pages"], kinds["corpus: spreadsheets"]
    assert web["tokens"] > 0 and sheets["tokens"] > 0
    assert web["tokens"] + sheets["tokens"] == kinds["all"]["tokens"]
    mean = (web["nll"] * web["tokens"] + sheets["nll"] * sheets["tokens"]) / kinds["all"]["tokens"]
    assert mean == pytest.approx(kinds["all"]["nll"], rel=1e-5)


def test_layer1_copies_share_one_batch_shape(tmp_path):
    """H0(1) is exact only if condition A and every site's copy go through the same kernels: each
    record's copies fill micro-batches of one shape (condition A padded in), so a p1-blind model
    computes them identically even where results differ across batch sizes (cuBLAS)."""
    d = os.path.join(str(code_corpus(tmp_path, 128)), "code")
    meta, corpus = corpus_stats(d)
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=meta["tokenizer"]["vocab"], n_layer=1, n_embd=128, n_head=2,
                          max_len=128, configuration="hrope_axial", corpus=corpus)).eval()
    split = batches.Split(d, "train", 128)
    cfg, shapes = {"device": "cpu", "mb_tokens": 300}, []
    model.register_forward_pre_hook(lambda m, a: shapes[-1].append(tuple(a[0].shape)) if shapes else None)

    def score(rec, change=None, **kw):
        shapes.append([]) if change is not None else None      # one list per record's copies
        return evaluate.score(model, split, rec, cfg, corpus, change=change, **kw)
    ids = np.arange(min(6, len(split)))
    boundaries.write_boundary(score, split, ids, corpus["p_max"][0], str(tmp_path / "b.npz"), 300)
    assert len(shapes) == len(ids) and all(len(s) >= 1 for s in shapes)
    assert all(len(set(s)) == 1 for s in shapes), shapes        # one shape per record: A among its sites
