"""Corpus-only candidates (hrope/candidates.py; paper 004 §6.1-6.3, App. A.4-A.5): Jensen-Shannon
similarity by hand, λ recovered from a planted curve, the within-document shuffle, and the
whole table on a planted corpus whose paragraphs share vocabulary with their neighbours, and
Table 14 (λ_struct under vocabulary cut-offs): the cut and its empty paragraphs by hand, the
ordering column on planted values, the full-vocabulary row equal to Table 4's λ_struct.
Run: pytest tests/test_candidates.py
"""
import math
import sys
import types

import numpy as np
import pytest
from scipy import sparse

import prepare
from treerope import prepared
from treerope.hrope import candidates


def test_js_similarity_by_hand():
    """P = (1/2, 1/2, 0), R = (0, 1/2, 1/2): M = (1/4, 1/2, 1/4), H(M) = 1.5 bits, H(P) = H(R) = 1,
    JS = 0.5, similarity 0.5; identical rows 1, disjoint rows 0."""
    P = sparse.csr_matrix([[0.5, 0.5, 0], [0.3, 0.7, 0], [1, 0, 0]])
    R = sparse.csr_matrix([[0, 0.5, 0.5], [0.3, 0.7, 0], [0, 1, 0]])
    assert candidates.js_similarity(P, R) == pytest.approx([0.5, 1.0, 0.0])


def test_lambda_recovered_from_a_planted_curve():
    dl = np.arange(1, 16)
    s_inf, amp, lam = candidates.fit_decay(0.01 + 0.1 * np.exp(-dl / 4.0))
    assert (s_inf, amp, lam) == pytest.approx((0.01, 0.1, 4.0), rel=1e-4)
    assert 4.0 * math.log(2) == pytest.approx(2.7726, abs=1e-4)                # δ_1/2 by hand


def test_vocabulary_cut_and_empty_paragraphs_by_hand():
    """One document of three paragraphs over four types; corpus counts 4 2 1 1, so the top-2 cut
    keeps types 0 and 1 and empties paragraph 2. δ = 1: only (0, 1) is left, P = (1, 0), R = (1/3,
    2/3), M = (2/3, 1/3): JS = H(M) - H(R) / 2 = H / 2 with H = log2 3 - 2/3, similarity 1 - H / 2;
    δ = 2: (0, 2) has an empty paragraph, no pair. With every type both pairs at δ = 1 count."""
    Q = sparse.csr_matrix([[3, 0, 0, 1], [1, 2, 0, 0], [0, 0, 1, 0]], dtype=float)
    doc = np.zeros(3, int)
    cut = candidates.vocabulary_cut(Q, 2)
    assert cut.toarray().tolist() == [[3, 0], [1, 2], [0, 0]] and candidates.vocabulary_cut(Q, None) is Q
    sums, counts = candidates.similarity_sums(cut, doc, d_max=2)
    assert counts.tolist() == [[1, 0]] and sums[0] == pytest.approx([1 - (math.log2(3) - 2 / 3) / 2, 0])
    assert candidates.similarity_sums(Q, doc, d_max=2)[1].tolist() == [[2, 1]]


def test_table14_ordering_by_hand():
    """Planted λ_struct: at the full vocabulary code 4.0 > web 3.5 > prose 3.0; the top-256 cut
    swaps web and prose ('no'), top-512 keeps the order ('yes'), a failed fit prints 'no fit'."""
    def row(k, lams):
        return {"cutoff": k, "corpora": [{"corpus": n, "lambda_struct": lam, "ci": [lam - 1, lam + 1],
                                          "token_share": 0.5, "empty": 0}
                                         for n, lam in zip(("prose", "code", "web"), lams)]}
    t = candidates.table14([row(256, [3.6, 4.0, 3.5]), row(512, [3.1, 4.2, 3.3]),
                            row(1024, [3.0, float("nan"), 3.3]), row(None, [3.0, 4.0, 3.5])]).splitlines()
    assert t[2].endswith("| code > prose > web | no |") and t[3].endswith("| code > web > prose | yes |")
    assert t[4].endswith("| no fit | n/a |") and t[5].endswith("| code > web > prose | — |")
    assert "| top 256 types | 3.60 [2.60, 4.60] (50% of tokens) |" in t[2]


def test_shuffle_stays_inside_documents():
    doc = np.repeat(np.arange(4), [3, 5, 2, 6])
    order = candidates.shuffled_order(doc, seed=1)
    assert sorted(order.tolist()) == list(range(16)) and (doc[order] == doc).all()
    assert (order != np.arange(16)).any()


def test_candidates_on_a_planted_corpus(tmp_path, capsys, monkeypatch):
    """Each document walks through topics: paragraph k draws its words from topics k..k+2, so
    paragraphs 1 or 2 apart share words and paragraphs 3 or more apart share none: S_exc falls
    from δ = 1 to 3 and is then below the shuffled control (which mixes near and far pairs),
    displacements past the documents' 12 paragraphs have no pairs (NaN, not 0), λ_struct is
    finite, and the table labels the stand-in embedding."""
    rng = np.random.default_rng(0)
    topics = [[chr(97 + t % 26) + chr(97 + t // 26) + chr(97 + i) + "q" for i in range(12)]
              for t in range(40)]
    src = tmp_path / "src"
    src.mkdir()
    for d in range(12):
        paras = []
        for k in range(12):
            words = [w for t in range(k + d, k + d + 3) for w in topics[t % 40]]
            paras.append(" ".join(rng.choice(words, 40)).capitalize() + ".")
        (src / f"doc{d}.txt").write_text("\n\n".join(paras))
    d = prepare.main(["prose", "--src", str(src), "--out", str(tmp_path / "data"), "--vocab", "400",
                      "--max_len", "256", "--workers", "1"])
    r = candidates.candidates(d, draws=100)
    s = np.array(r["S_exc"])
    assert s[0] > s[1] > 0 > s[2] and np.isnan(s[11:]).all() and 0.3 < r["lambda_struct"] < 15
    assert r["median_length"] > 20 and r["delta_zero"] is not None
    assert r["coherence"] > 0                                                      # neighbours are alike
    candidates.main([d, "--draws", "50", "--ustar", "-0.5"])
    assert "STAND-IN" in capsys.readouterr().out
    # Table 14: the full-vocabulary row is Table 4's λ_struct; a cut keeps the top types' share of tokens
    rows = candidates.main(["--cutoffs", d, "--draws", "50"])
    Q, doc = candidates.paragraphs(d)
    assert [r["cutoff"] for r in rows] == [256, 512, 1024, 2048, None] and \
        "Table 14" in capsys.readouterr().out
    assert rows[-1]["corpora"][0]["lambda_struct"] == candidates.lexical(Q, doc, 50)["lambda_struct"]
    assert rows[-1]["corpora"][0]["token_share"] == 1
    # the planted corpus uses < 256 types
    top = candidates.vocabulary_robustness([d], cutoffs=(40,), draws=50)[0]["corpora"][0]
    assert top["token_share"] == pytest.approx(np.sort(Q.sum(0).A1)[::-1][:40].sum() / Q.sum()) \
        and top["token_share"] < 1
    assert top["lambda_struct"] != rows[-1]["corpora"][0]["lambda_struct"]
    (tmp_path / "MiniLM").mkdir()
    fake_sentence_transformers(monkeypatch, [])
    r = candidates.main([d, "--draws", "20", "--embedder", str(tmp_path / "MiniLM")])[0]
    assert "MiniLM (sentence-transformers" in capsys.readouterr().out and np.isfinite(r["coherence"])


def fake_sentence_transformers(monkeypatch, seen):
    """A stand-in for the sentence-transformers package: its model embeds a text as (1, 0) if it
    mentions 'ho', else (0, 1), and records the texts it was given."""
    class SentenceTransformer:
        def __init__(self, folder, device):
            seen.append(folder)

        def encode(self, texts, batch_size, normalize_embeddings):
            seen.extend(texts)
            return np.array([[1.0, 0.0] if " ho " in f" {t.lower()} " else [0.0, 1.0] for t in texts])
    monkeypatch.setitem(sys.modules, "sentence_transformers",
                        types.SimpleNamespace(SentenceTransformer=SentenceTransformer))


def test_paragraph_predictors_on_a_planted_corpus(tmp_path, monkeypatch):
    """App. A.10's predictors, keyed as the model sees paragraphs. Document a: three paragraphs,
    the middle one a single word repeated (its type-token ratio the lowest); positions 0, 1/3, 2/3.
    Document b: a short paragraph, then one of ~600 words without a sentence break, which
    prepare.py must cut at max_len: every piece of it is flagged truncated; the paragraphs around it
    are whole. A.10's one window per document: b's first record holds the short paragraph alone.
    Document c: eight short paragraphs, of which its first record (window) holds k < 8: positions
    pos/N_p of the document, 0, 1/8, ... (over the window they would be 0, 1/k, ...)."""
    words = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu".split()
    rng = np.random.default_rng(0)
    def para(n):
        return " ".join(rng.choice(words, n)).capitalize() + "."
    src = tmp_path / "src"
    src.mkdir()
    (src / "c.txt").write_text("\n\n".join([para(30), "Ho " + "ho " * 10 + "ho.", para(30)]))
    (src / "b.txt").write_text("\n\n".join([para(20), " ".join(rng.choice(words, 600)), para(20)]))
    (src / "d.txt").write_text("\n\n".join(para(25) for _ in range(8)))
    d = prepare.main(["prose", "--src", str(src), "--out", str(tmp_path / "data"), "--vocab", "300",
                      "--max_len", "128", "--workers", "1"])
    r = candidates.paragraph_predictors(d, "train", 128)
    by_doc = {}
    for k in range(len(r["record"])):
        by_doc.setdefault(r["document"][k], []).append(k)
    c = by_doc.pop(max(by_doc, key=lambda k: (len(by_doc[k]), not r["truncated"][by_doc[k]].any())))
    a, b = sorted(by_doc.values(), key=len)
    win = [k for k in c if r["first_window"][k]]
    assert len(c) == 8 and 1 < len(win) < 8 and win == c[:len(win)] and not r["truncated"][c].any()
    assert r["position"][c].tolist() == pytest.approx(np.arange(8) / 8)
    assert r["position"][a].tolist() == pytest.approx([0, 1 / 3, 2 / 3]) and not r["truncated"][a].any()
    assert r["ttr"][a[1]] < min(r["ttr"][a[0]], r["ttr"][a[2]]) and np.isfinite(r["coherence"][a]).all()
    assert r["length"].sum() == sum(prepared.load_split(d, "train")["doc_start"][-1:])
    mid = b[1:-1]                                                 # the long paragraph's pieces
    assert len(mid) >= 4 and r["truncated"][mid].all() and not r["truncated"][[b[0], b[-1]]].any()
    assert r["first_window"][a].all() and r["first_window"][b].tolist() == [True] + [False] * (len(b) - 1)
    # p1 in the document; the last piece shares a record
    assert (r["p1"][mid] == 1).all() and len(set(r["record"][b])) == len(b) - 1
    # --embedder: a local model folder embeds the decoded paragraphs. Document a's middle paragraph
    # alone says 'ho', so every pair of neighbours there has cosine 0; in document b all have 1.
    folder = tmp_path / "MiniLM"
    folder.mkdir()
    seen = []
    fake_sentence_transformers(monkeypatch, seen)
    m = candidates.paragraph_predictors(d, "train", 128, embedder=str(folder))
    assert seen[0] == str(folder) and len(seen) == 1 + len(m["record"]) \
        and sum("ho ho" in t for t in seen[1:]) == 1
    assert m["coherence"][a].tolist() == [0, 0, 0] and (m["coherence"][b] == 1).all()
    assert {k: m[k].tolist() for k in ("length", "ttr", "position")} == \
        {k: r[k].tolist() for k in ("length", "ttr", "position")}
    with pytest.raises(SystemExit, match="no such folder"):
        candidates.paragraph_predictors(d, "train", 128, embedder=str(tmp_path / "missing"))
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)          # not installed
    with pytest.raises(SystemExit, match="pip install sentence-transformers"):
        candidates.paragraph_predictors(d, "train", 128, embedder=str(folder))
