"""Corpus-only candidates for the compression depth (paragraph-boundaries paper §6.1-6.3, App. A.4-A.5).

    python -m treerope.hrope.candidates data/prose data/code       # Table 4 (and Table 6)
    python -m treerope.hrope.candidates data/prose --ustar -0.48   # with the model's U* per corpus
    python -m treerope.hrope.candidates --cutoffs data/prose data/code data/webtext   # Table 14

No model is involved. Paragraphs are read from a prepared paragraph corpus (prepare.py prose/code):
the records of one document, in order, give its sequence of paragraphs, and each paragraph's
lexical distribution q_p is the histogram of its BPE tokens. Quantities (this repository's
readings are marked):
  S(δ)        mean Jensen-Shannon similarity 1 - JS(q_p, q_{p+δ}) (base 2) over paragraph pairs δ apart
  S_exc(δ)    S_real(δ) - S_shuffle(δ); the control shuffles paragraph order within each document
  λ_struct    the fit S_exc(δ) = S_inf + A exp(-δ/λ), δ = 1..15; document bootstrap median and 95% CI
  δ_1/2       λ_struct ln 2
  λ_local     reading: -1 / slope of ln S_exc(δ) over δ = 1, 2, 3
  L_int       Σ_{δ=1..10} R(δ), R(δ) = (S_exc(δ) - S_inf) / A (reading: the fit's decay curve, on
              the empirical S_exc)
  δ_zero      the first δ whose bootstrap 95% CI of S_exc includes 0 (> 15: none in range)
  length      median paragraph length in tokens
  coherence   mean cosine of adjacent paragraphs minus that of random pairs of paragraphs, and the
              half-life in paragraphs of the curve cos(δ) - baseline (reading: exponential fit)
Table 14 (App. F, cited in §6.3: λ_struct's ordering "unchanged at every tested cutoff"): λ_struct
recomputed with each q_p restricted to the corpus's K most frequent token types. Our copy of the
paper does not list the cut-offs or how they apply; readings: K = 256, 512, 1,024, 2,048 and the
full vocabulary (powers of two of the 4,096-type BPE vocabulary), frequency counted over the
paragraphs analysed, the other types dropped from every histogram (not merged into one
out-of-vocabulary type, which would make paragraphs alike by their rare tokens), and a pair with a
paragraph left empty not counted.
The paper embeds paragraphs with all-MiniLM-L6-v2, which cannot be downloaded here. With
`--embedder FOLDER` (a sentence-embedding model saved on disk, e.g. all-MiniLM-L6-v2) paragraphs are
embedded by it through the sentence-transformers package, when installed; otherwise the embedding
is a STAND-IN built from the corpus itself: TF-IDF of the tokens, truncated to 64 dimensions by SVD.
"""
import argparse
import json
import math
import os
import sys
import warnings

import numpy as np
from scipy import optimize, sparse, stats
from scipy.sparse.linalg import svds

from treerope import tokenizer
from treerope.prepared import load_split
from treerope.settings import Parser, at_least_one

D_MAX = 15          # displacements fitted (paragraphs)
CUTOFFS = (256, 512, 1024, 2048)   # Table 14's cut-offs (a reading, docstring), then the full vocabulary
EMBED_DIM = 64      # the stand-in embedding's dimension


def segment(a, true_paragraphs=False):
    """Token-level paragraph labels of a loaded split: (tokens, record of each token, paragraph of
    each token, first token of each paragraph). A paragraph starts where p1 or the record changes
    (the paragraphs the model tells apart); with true_paragraphs also where code's p1 stays at its
    cap (App. C.1) over a real block boundary: (p2, p3) = (0, 0)."""
    tokens, p = np.asarray(a["tokens"]).astype(np.int64), np.asarray(a["p"])
    rec = np.repeat(np.arange(len(a["record_doc"])), np.diff(np.asarray(a["doc_start"])))
    new = np.r_[True, (p[1:, 0] != p[:-1, 0]) | (rec[1:] != rec[:-1])]
    if true_paragraphs:
        new |= (p[:, 1] == 0) & (p[:, 2] == 0)
    return tokens, rec, np.cumsum(new) - 1, np.flatnonzero(new)


def texts(data_dir, tokens, first):
    """Each paragraph's text, decoded from its tokens (for a sentence-embedding model)."""
    enc = tokenizer.load(data_dir)
    return [enc.decode(tokens[s:e].tolist()) for s, e in zip(first, np.r_[first[1:], len(tokens)])]


def paragraphs(data_dir, split="train", min_paragraphs=3, with_texts=False):
    """(Q, doc): a sparse (paragraphs, vocabulary) token-count matrix and each paragraph's
    document, documents with at least `min_paragraphs` paragraphs, in reading order; with
    `with_texts`, also the paragraphs' texts."""
    a = load_split(data_dir, split)
    if "p" not in a:
        sys.exit(f"error: {data_dir} has no paragraph coordinates (prepare.py prose or code)")
    tokens, rec, par, first = segment(a, true_paragraphs=True)   # corpus-only: the cap does not merge blocks
    par_doc = np.asarray(a["record_doc"])[rec[first]]
    Q = sparse.csr_matrix((np.ones(len(tokens)), (par, tokens)), shape=(len(first), int(tokens.max()) + 1))
    keep = np.bincount(par_doc)[par_doc] >= min_paragraphs
    if with_texts:
        return Q[keep], par_doc[keep], [t for t, k in zip(texts(data_dir, tokens, first), keep) if k]
    return Q[keep], par_doc[keep]


def _entropy_rows(M):
    """Shannon entropy (bits) of each row of a row-stochastic sparse matrix."""
    d = M.data
    return -np.add.reduceat(np.where(d > 0, d * np.log2(np.maximum(d, 1e-300)), 0.0),
                            M.indptr[:-1]) * (np.diff(M.indptr) > 0)


def js_similarity(P, R):
    """1 - JS(P_i, R_i) row by row (base 2: in [0, 1]); P, R row-stochastic sparse matrices."""
    return 1 - (_entropy_rows((P + R) * 0.5) - 0.5 * (_entropy_rows(P) + _entropy_rows(R)))


def pairs_apart(doc, dlt):
    """Indices a of paragraphs whose paragraph a + dlt is in the same document."""
    return np.flatnonzero(np.r_[doc[dlt:] == doc[:-dlt], np.zeros(dlt, bool)])


def similarity_sums(Q, doc, order=None, d_max=D_MAX):
    """Per document and displacement: (sum of S, pair count), arrays (docs, d_max). `order`
    permutes paragraphs within documents (the shuffled control). A pair with an empty paragraph
    (all its tokens cut by a vocabulary cut-off) has no q_p and is not counted."""
    size = Q.sum(1).A1
    Qn = sparse.diags(1 / np.maximum(size, 1)) @ Q
    idx = np.arange(Q.shape[0]) if order is None else order
    docs = np.unique(doc)
    sums, counts = np.zeros((len(docs), d_max)), np.zeros((len(docs), d_max))
    u = np.searchsorted(docs, doc)
    for dlt in range(1, d_max + 1):
        a = pairs_apart(doc, dlt)
        a = a[(size[idx[a]] > 0) & (size[idx[a + dlt]] > 0)]
        if not len(a):
            continue
        s = js_similarity(Qn[idx[a]], Qn[idx[a + dlt]])
        sums[:, dlt - 1] = np.bincount(u[a], s, len(docs))
        counts[:, dlt - 1] = np.bincount(u[a], minlength=len(docs))
    return sums, counts


def shuffled_order(doc, seed=0):
    """A permutation of paragraphs that shuffles them within each document."""
    rng = np.random.default_rng(seed)
    key = doc + rng.random(len(doc))                 # sort by document, random inside it
    return np.argsort(key, kind="stable")


def fit_decay(s_exc):
    """(S_inf, A, λ) of S_exc(δ) = S_inf + A exp(-δ/λ) over δ = 1..len(s_exc), or NaNs."""
    dl = np.arange(1, len(s_exc) + 1, dtype=float)
    ok = np.isfinite(s_exc)
    try:
        (s_inf, amp, lam), _ = optimize.curve_fit(
            lambda x, s, a, lam: s + a * np.exp(-x / lam), dl[ok], s_exc[ok],
            p0=(s_exc[ok][-1], s_exc[ok][0] - s_exc[ok][-1], 2.0), bounds=([-1, -1, 0.05], [1, 1, 100]),
            maxfev=5000)
    except (RuntimeError, ValueError):
        return np.nan, np.nan, np.nan
    return s_inf, amp, lam


def lexical(Q, doc, draws=1000, seed=0):
    """The lexical-persistence candidates with a document bootstrap."""
    real = similarity_sums(Q, doc)
    shuf = similarity_sums(Q, doc, shuffled_order(doc, seed))

    def summary(w):
        with np.errstate(invalid="ignore", divide="ignore"):
            def S(sc):   # NaN where no document has pairs this far apart
                return (w @ sc[0]) / (w @ sc[1])
            s_exc = S(real) - S(shuf)
        s_inf, amp, lam = fit_decay(s_exc)
        with np.errstate(invalid="ignore", divide="ignore"):
            slope = np.polyfit(np.arange(1, 4), np.log(s_exc[:3]), 1)[0] if (s_exc[:3] > 0).all() else np.nan
        return s_exc, lam, -1 / slope if slope < 0 else np.nan, ((s_exc[:10] - s_inf) / amp).sum()

    n = len(real[0])
    s_exc, lam, lam_local, l_int = summary(np.ones(n))
    rng = np.random.default_rng(seed)
    boot = [summary(rng.multinomial(n, np.full(n, 1 / n)).astype(float)) for _ in range(draws)]
    curves = np.array([b[0] for b in boot])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        lo, hi = np.nanpercentile(curves, [2.5, 97.5], 0)
    zero = np.flatnonzero((lo <= 0) & (hi >= 0))
    def q(k):   # bootstrap median and 95% interval; NaN where every draw is NaN (no fit)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            return [float(x) for x in np.nanpercentile([b[k] for b in boot], [50, 2.5, 97.5])]
    lam_med, lam_lo, lam_hi = q(1)
    return {"S_exc": s_exc.tolist(), "lambda_struct": lam_med, "lambda_struct_ci": [lam_lo, lam_hi],
            "lambda_struct_point": float(lam), "delta_half": lam_med * math.log(2),
            "lambda_local": float(lam_local), "lambda_local_ci": q(2)[1:],
            "L_int": float(l_int), "L_int_ci": q(3)[1:],
            "delta_zero": int(zero[0]) + 1 if len(zero) else None,
            "lambda_struct_se": _se([b[1] for b in boot]), "lambda_local_se": _se([b[2] for b in boot])}


def vocabulary_cut(Q, k):
    """Q's columns of the k most frequent token types (over Q's paragraphs); k None: all of Q."""
    if k is None:
        return Q
    freq = Q.sum(0).A1
    return Q[:, np.sort(np.argsort(-freq, kind="stable")[:k])]


def vocabulary_robustness(data_dirs, cutoffs=CUTOFFS, draws=1000, seed=0):
    """Paper 004 Table 14: per cut-off (None last: the full vocabulary) and corpus, λ_struct
    (document-bootstrap median, 95% CI) with q_p over the K most frequent types, the share of
    tokens those types keep and the paragraphs left empty."""
    corpora = [(os.path.basename(os.path.normpath(d)), *paragraphs(d)) for d in data_dirs]
    rows = []
    for k in (*cutoffs, None):
        row = {"cutoff": k, "corpora": []}
        for name, Q, doc in corpora:
            Qk = vocabulary_cut(Q, k)
            lex = lexical(Qk, doc, draws, seed)
            row["corpora"].append({"corpus": name, "lambda_struct": lex["lambda_struct"],
                                   "ci": lex["lambda_struct_ci"], "token_share": float(Qk.sum() / Q.sum()),
                                   "empty": int((Qk.sum(1).A1 == 0).sum())})
        rows.append(row)
    return rows


def ordering(values, names):
    """'a > b > c' by value, largest first; None where a value is NaN (no fit)."""
    if not all(np.isfinite(values)):
        return None
    return " > ".join(names[i] for i in np.argsort(values, kind="stable")[::-1])


def table14(rows):
    """Table 14 as markdown: λ_struct [95% CI] (share of tokens kept) per cut-off and corpus, the
    corpora ordered by λ_struct, and whether that order is the full vocabulary's (§6.3's check)."""
    names = [c["corpus"] for c in rows[0]["corpora"]]
    full = ordering([c["lambda_struct"] for c in rows[-1]["corpora"]], names)
    lines = [f"| vocabulary | {' | '.join(names)} | ordering by λ_struct | same as the full vocabulary? |",
             "| --- |" + " ---: |" * len(names) + " --- | --- |"]
    for r in rows:
        order = ordering([c["lambda_struct"] for c in r["corpora"]], names)
        cells = [f"{c['lambda_struct']:.2f} [{c['ci'][0]:.2f}, {c['ci'][1]:.2f}] "
                 f"({100 * c['token_share']:.0f}% of tokens"
                 + (f", {c['empty']} paragraph{'s' * (c['empty'] != 1)} empty)" if c["empty"] else ")")
                 for c in r["corpora"]]
        label = "full" if r["cutoff"] is None else f"top {r['cutoff']:,} types"
        same = ("—" if r["cutoff"] is None else "n/a" if order is None or full is None
                else "yes" if order == full else "no")
        lines.append(f"| {label} | {' | '.join(cells)} | {order or 'no fit'} | {same} |")
    return "\n".join(lines)


def _ci(values):
    values = np.asarray(values, float)
    return (np.percentile(values[np.isfinite(values)], [2.5, 97.5]).tolist() if np.isfinite(values).any()
            else [np.nan] * 2)


def _se(values):
    values = np.asarray(values, float)
    return float(values[np.isfinite(values)].std()) if np.isfinite(values).sum() > 1 else float("nan")


def embedding_label(embedder=None):
    return (f"{os.path.basename(os.path.normpath(embedder))} (sentence-transformers, local folder)"
            if embedder else
            f"STAND-IN: TF-IDF + truncated SVD ({EMBED_DIM} dimensions), not all-MiniLM-L6-v2")


def folder_embed(folder, paragraph_texts):
    """Unit-length embeddings from a sentence-embedding model saved in `folder` (the paper's
    all-MiniLM-L6-v2, where the user has it), through sentence-transformers."""
    if not os.path.isdir(folder):
        sys.exit(f"error: --embedder {folder}: no such folder")
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError:
        sys.exit("error: --embedder needs the sentence-transformers package "
                 "(pip install sentence-transformers); without --embedder the stand-in embedding is used")
    model = SentenceTransformer(folder, device="cpu")
    return np.asarray(model.encode(paragraph_texts, batch_size=64, normalize_embeddings=True), np.float64)


def embed(Q, dim=EMBED_DIM, seed=0, fit=None):
    """The STAND-IN paragraph embedding: TF-IDF rows, truncated SVD to `dim`, unit length. The IDF
    and the SVD are learned on `fit` (another count matrix, e.g. the train split; default Q)."""
    fit = Q if fit is None else fit
    V = max(Q.shape[1], fit.shape[1])
    Q, fit = (sparse.csr_matrix((M.data, M.indices, M.indptr), shape=(M.shape[0], V)) for M in (Q, fit))
    idf = np.log((1 + fit.shape[0]) / (1 + np.bincount(fit.indices, minlength=V))) + 1

    def tfidf(M):
        return sparse.diags(1 / np.maximum(M.sum(1).A1, 1)) @ M @ sparse.diags(idf)
    k = min(dim, min(fit.shape) - 1)
    _, _, vt = svds(tfidf(fit).astype(np.float64), k=k, random_state=seed)
    e = tfidf(Q) @ vt.T
    return e / np.maximum(np.linalg.norm(e, axis=1, keepdims=True), 1e-12)


def coherence(e, doc, draws=1000, seed=0, d_max=10):
    """Aggregate coherence (adjacent cosine minus random pairs of the unit embeddings `e`) and the
    half-life of the coherence curve, with a document bootstrap."""
    rng = np.random.default_rng(seed)
    docs = np.unique(doc)
    u = np.searchsorted(docs, doc)
    sums, counts = np.zeros((len(docs), d_max)), np.zeros((len(docs), d_max))
    for dlt in range(1, d_max + 1):
        a = pairs_apart(doc, dlt)
        sums[:, dlt - 1] = np.bincount(u[a], (e[a] * e[a + dlt]).sum(1), len(docs))
        counts[:, dlt - 1] = np.bincount(u[a], minlength=len(docs))
    i, j = rng.integers(0, len(e), (2, 20000))
    baseline = float((e[i] * e[j]).sum(1).mean())

    def summary(w):
        c = (w @ sums) / np.maximum(w @ counts, 1) - baseline
        ok = c > 0
        tau = -1 / np.polyfit(np.flatnonzero(ok) + 1, np.log(c[ok]), 1)[0] if ok.sum() >= 2 else np.nan
        return c[0], tau * math.log(2) if tau > 0 else np.nan

    agg, half = summary(np.ones(len(docs)))
    boot = np.array([summary(rng.multinomial(len(docs), np.full(len(docs), 1 / len(docs))).astype(float))
                     for _ in range(draws)])
    return {"coherence": float(agg), "coherence_ci": _ci(boot[:, 0]),
            "coherence_se": _se(boot[:, 0]), "half_life": float(half),
            "half_life_ci": _ci(boot[:, 1]), "half_life_se": _se(boot[:, 1])}


def candidates(data_dir, draws=1000, seed=0, embedder=None):
    Q, doc, *txt = paragraphs(data_dir, with_texts=bool(embedder))
    out = {"corpus": os.path.basename(os.path.normpath(data_dir)), "paragraphs": int(Q.shape[0]),
           "documents": int(len(np.unique(doc))), "median_length": float(np.median(Q.sum(1).A1)),
           "embedding": embedding_label(embedder)}
    out.update(lexical(Q, doc, draws, seed))
    out.update(coherence(folder_embed(embedder, txt[0]) if embedder else embed(Q, seed=seed), doc, draws,
                         seed))
    return out


def paragraph_predictors(data_dir, split, max_len, embedder=None):
    """Paper 004 App. A.10's predictors for every paragraph of a split, keyed as the model sees it:
    `record` (numbered as batches.Split numbers records) and `p1` (counted in its document). Arrays:
    length (tokens), ttr (distinct tokens / tokens: lexical diversity over BPE tokens, a reading),
    coherence (mean embedding cosine with the adjacent paragraphs of the document; the stand-in
    fitted on the train split, or the `embedder` folder's model),
    position, truncated and first_window.
    Our reading of "a paragraph is dropped if its document was truncated by the window": one window
    per document, its first record (first_window); the paragraph that window cuts is dropped.
    Position is A.10's "fractional position in the document, pos/N_p": the paragraph's index (from
    0, our reading) over the paragraphs of its whole document, not of the window.
    Truncated: a paragraph the model does not see whole. A record of exactly the prepared
    max_len was cut where no paragraph boundary fell (or cropped), so its last paragraph is
    truncated and so is the first paragraph of the document's next record (a paragraph of exactly
    max_len tokens is taken as cut too: the stored coordinates cannot tell); so is a paragraph
    running past the model's window `max_len`."""
    a = load_split(data_dir, split)
    if "p" not in a:
        sys.exit(f"error: {data_dir} has no paragraph coordinates (prepare.py prose or code)")
    with open(os.path.join(data_dir, "meta.json")) as f:
        cut_len = json.load(f)["settings"]["max_len"]
    full, rec_doc, p1 = (np.diff(np.asarray(a["doc_start"])), np.asarray(a["record_doc"]),
                         np.asarray(a["p"][:, 0]))
    tokens, rec, par, first = segment(a)
    offset = np.arange(len(rec)) - np.repeat(np.asarray(a["doc_start"])[:-1], full)
    n = len(first)
    length = np.bincount(par, minlength=n)
    types = np.bincount(np.unique(par * (tokens.max() + 1) + tokens) // (tokens.max() + 1), minlength=n)
    last = np.r_[first[1:], len(rec)] - 1
    cut = (full == cut_len) & np.r_[rec_doc[1:] == rec_doc[:-1], False]    # record cut inside a paragraph
    opens = np.r_[True, rec[first[1:]] != rec[first[:-1]]]              # first paragraph of its record
    truncated = (full == cut_len)[rec[last]] & np.r_[opens[1:], True]
    cont = opens & np.r_[False, cut][rec[first]]                        # continues a cut paragraph
    truncated |= cont | (offset[last] >= max_len)
    doc = rec_doc[rec[first]]
    index = np.cumsum(~cont) - 1                                          # a cut paragraph's pieces share it
    doc_first = np.r_[0, np.flatnonzero(doc[1:] != doc[:-1]) + 1]
    count = np.r_[doc_first[1:], n] - doc_first
    start_index = np.repeat(index[doc_first], count)
    in_window = np.r_[True, rec_doc[1:] != rec_doc[:-1]][rec[first]]    # in its document's first record
    n_doc = np.repeat(np.maximum.reduceat(index, doc_first) + 1, count) - start_index    # N_p
    Q = sparse.csr_matrix((np.ones(len(tokens)), (par, tokens)), shape=(n, int(tokens.max()) + 1))
    if embedder:
        e = folder_embed(embedder, texts(data_dir, tokens, first))
    else:
        e = embed(Q, fit=paragraphs(data_dir, "train", min_paragraphs=1)[0] if split != "train" else Q)
    cos = (e[1:] * e[:-1]).sum(1)
    same = doc[1:] == doc[:-1]
    nb_sum = np.r_[0, np.where(same, cos, 0)] + np.r_[np.where(same, cos, 0), 0]
    nb_n = np.r_[0, same] + np.r_[same, 0]
    kept = full >= 2                                                      # records batches.Split keeps
    split_id = np.where(kept, np.cumsum(kept) - 1, -1)
    with np.errstate(invalid="ignore"):
        return {"record": split_id[rec[first]], "p1": p1[first], "length": length.astype(float),
                "ttr": types / length, "coherence": nb_sum / nb_n,
                "position": (index - start_index) / n_doc,                  # A.10: pos/N_p
                "truncated": truncated, "first_window": in_window, "document": doc}


ROWS = [("λ_struct", "lambda_struct", "lambda_struct_se"), ("δ_1/2", "delta_half", None),
        ("λ_local", "lambda_local", "lambda_local_se"), ("L_int", "L_int", None),
        ("δ_zero", "delta_zero", None),
        ("median paragraph length (tokens)", "median_length", None),
        ("coherence: aggregate", "coherence", "coherence_se"),
        ("coherence half-life (paragraphs)", "half_life", "half_life_se")]


def table4(results, ustar=None):
    """Paper 004 Table 4: one row per candidate, one column per corpus; 'ordering matches U*?'
    (deeper U* = more negative against a larger candidate) and the pairwise separations at
    p < 0.05 under the candidate's own bootstrap SE (two-sided z)."""
    names = [r["corpus"] for r in results]
    lines = [f"| candidate | {' | '.join(names)} | ordering matches U*? | sep. pairs |",
             "| --- |" + " ---: |" * len(names) + " --- | --- |"]
    if ustar:
        lines.append(f"| U* (reference) | {' | '.join(f'{u:+.3f}' for u in ustar)} | — | descriptive |")
    for label, key, se in ROWS:
        vals = [r[key] if r[key] is not None else float("nan") for r in results]
        match = "n/a"
        if ustar and len(vals) > 1 and all(np.isfinite(vals)):
            match = "yes" if list(np.argsort(vals)[::-1]) == list(np.argsort(ustar)) else "no"
        sep = "n/a"
        if se and len(results) > 1:
            pairs = [(a, b) for a in range(len(results)) for b in range(a + 1, len(results))]
            z = [abs(vals[a] - vals[b]) / math.hypot(results[a][se], results[b][se]) for a, b in pairs]
            sep = f"{sum(2 * stats.norm.sf(x) < 0.05 for x in z)}/{len(pairs)}"
        shown = [f"> {D_MAX}" if key == "delta_zero" and r[key] is None else f"{v:.3g}"
                 for r, v in zip(results, vals)]
        lines.append(f"| {label} | {' | '.join(shown)} | {match} | {sep} |")
    return "\n".join(lines)


def main(argv=None):
    ap = Parser(prog="python -m treerope.hrope.candidates", description=(
        "Paper 004 Table 4 (Layer III; Table 6 beside it, Table 14 with --cutoffs): corpus-only candidates "
        "for the compression depth, from prepared paragraph corpora; no model. Each quantity and its "
        "reading: this module's docstring."),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("data", nargs="+", help="prepared paragraph corpora: data/prose data/code ...")
    ap.add_argument("--ustar", type=float, nargs="+",
                    help="the model's compression depth U* per corpus, in order")
    ap.add_argument("--draws", type=at_least_one, default=1000, help="document-bootstrap draws")
    ap.add_argument("--embedder", default=None,
                    help="a local sentence-embedding model folder; none: the stand-in")
    ap.add_argument("--cutoffs", action="store_true",
                    help="Table 14 instead: λ_struct at the vocabulary cut-offs (App. F)")
    args = ap.parse_args(argv)
    if args.ustar and len(args.ustar) != len(args.data):
        ap.error("give one --ustar value per corpus")
    if args.cutoffs:
        rows = vocabulary_robustness(args.data, draws=args.draws)
        print(f"### λ_struct under vocabulary cut-offs (paper 004 App. F, Table 14); {args.draws} "
              f"document-bootstrap draws, cut-offs a reading (candidates.py)\n")
        print(table14(rows))
        return rows
    results = [candidates(d, args.draws, embedder=args.embedder) for d in args.data]
    for r in results:
        print(f"{r['corpus']}: {r['paragraphs']} paragraphs in {r['documents']} documents; "
              f"λ_struct {r['lambda_struct']:.2f} "
              f"[{r['lambda_struct_ci'][0]:.2f}, {r['lambda_struct_ci'][1]:.2f}] (Table 6); S_exc(1..5) "
              + " ".join(f"{x:+.4f}" for x in r["S_exc"][:5]))
    print(f"\n### Corpus-only candidates (paper 004 Table 4); coherence embedding: "
          f"{results[0]['embedding']}\n")
    print(table4(results, args.ustar))
    return results


if __name__ == "__main__":
    main()
