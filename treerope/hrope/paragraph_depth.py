"""Paragraph-level compression, paper 004 Tables 5 and 9 (§6.4, App. A.10): per paragraph, how much
less attention crosses its boundary than distance predicts (U_p, the paragraph's own compression
depth), regressed on the paragraph's predictors (candidates.py); then A.10's d-only pilot and the
band-decay diagnostic (our reading). The other measure, compression depth U* over (d, Δp1) cells,
is compression.py.

    evaluate.py RUN --paragraphs  per-paragraph sums (paragraph_<split>.npz)
    python -m treerope.hrope.paragraph_depth out/prose/hrope_axial out/code/hrope_axial   # Tables 5, 9
"""
import argparse
import glob
import math
import os

import numpy as np
from scipy import stats

from treerope.files import replacing
from treerope.hrope import candidates
from treerope.runs import folder_is_run, read_config
from treerope.settings import Parser, at_least_one

# Paper 004 §6.4 / App. A.10: a Δp1 = 1 pair is scored against same-paragraph pairs at its d and query
# band b(i) = i // P_BAND (the width is our reading: the paper gives none); d <= 256 as in A.10.
P_BAND, P_DMAX = 32, 256


def paragraph_cells(logA, p1, d_max=P_DMAX, band=P_BAND):
    """One record's App. A.10 sums from log Ā (n, n) and p1 (n,): the Δp1 = 0 baseline per
    (d, b(i)) as (sum, count) arrays of shape (d_max + 1, bands), and the Δp1 = 1 pairs as rows
    (key paragraph p1(j), d, b(i), sum, count). The query's paragraph is p1(j) + 1."""
    n = logA.shape[0]
    i, j = np.tril_indices(n, -1)
    d, b, k = i - j, i // band, p1[i] - p1[j]
    y = logA[i, j]
    bands = -(-n // band)
    base = (d <= d_max) & (k == 0)
    cell = d[base] * bands + b[base]
    shape = (d_max + 1, bands)
    base_sum = np.bincount(cell, y[base], shape[0] * shape[1]).reshape(shape)
    base_n = np.bincount(cell, minlength=shape[0] * shape[1]).reshape(shape)
    one = (d <= d_max) & (k == 1)
    if not one.any():
        return base_sum, base_n, np.zeros((0, 3), np.int64), np.zeros(0), np.zeros(0, np.int64)
    key = np.stack([p1[j[one]], d[one], b[one]], 1)
    rows, inv = np.unique(key, axis=0, return_inverse=True)
    sums = np.bincount(inv.ravel(), y[one], len(rows))
    return base_sum, base_n, rows, sums, np.bincount(inv.ravel(), minlength=len(rows))


def write_paragraphs(score, split, max_len, path):
    """Every scored record's A.10 sums (paragraph_cells), saved for analyze.py --paragraphs.
    score(attention=): evaluate.score on the records; max_len: the model's context."""
    if "p" not in split.a:
        raise SystemExit("error: --paragraphs needs paragraph coordinates (prepare.py prose/code)")
    bands = -(-max_len // P_BAND)
    base_sum, base_n = np.zeros((P_DMAX + 1, bands)), np.zeros((P_DMAX + 1, bands), np.int64)
    rows = []

    def keep(r, row, atts):
        logA = atts.mean((0, 1)).clamp_min(1e-30).log().double().numpy()
        s, c, key, sums, counts = paragraph_cells(logA, row["p"][:, 0].numpy())
        base_sum[:, :s.shape[1]] += s
        base_n[:, :c.shape[1]] += c
        rows.append(np.c_[np.full(len(key), r), key, sums, counts])

    score(attention=keep)
    rows = np.concatenate(rows) if rows else np.zeros((0, 6))
    with replacing(path) as tmp:
        np.savez_compressed(tmp, base_sum=base_sum, base_n=base_n, record=rows[:, 0].astype(np.int64),
                            p1=rows[:, 1].astype(np.int64), d=rows[:, 2].astype(np.int64),
                            band=rows[:, 3].astype(np.int64), sum=rows[:, 4],
                            count=rows[:, 5].astype(np.int64), max_len=max_len)


# python -m treerope.hrope.paragraph_depth (analyze.py --paragraphs): Tables 5 and 9 from those sums
PREDICTORS = ("length", "ttr", "coherence", "position")


PREDICTOR_NAMES = {"length": "Length", "ttr": "Type–token ratio", "coherence": "Embedding coherence",
                   "position": "Position (control)"}


def pooled_base(paths):
    """The runs' Δp1 = 0 baseline sums and pair counts per (d, band), added up."""
    zs = [np.load(p) for p in paths]
    return sum(z["base_sum"] for z in zs), sum(z["base_n"] for z in zs)


def paragraph_depth(paths, gate=400, by_band=True):
    """Per-paragraph depth U_p (paper 004 Eqs. A.2-A.3), the runs (seeds) pooled: base(d, b) is the
    mean log Ā of the Δp1 = 0 pairs in its (d, band) cell, used only where the cell holds at least
    `gate` pairs over all runs; a Δp1 = 1 pair scores D_eff,1 = log Ā - base(d, b(i)); U_p is the
    mean over the pairs incident to paragraph p (reading: as the key's paragraph or as the query's),
    its weight the number of those pairs. by_band=False: A.10's d-only pilot, base(d) over all
    bands. Returns {record, p1, U, weight} and the usable cells."""
    zs = [np.load(p) for p in paths]
    base_sum, base_n = pooled_base(paths)
    if not by_band:
        base_sum, base_n = base_sum.sum(1, keepdims=True), base_n.sum(1, keepdims=True)
    base = np.where(base_n >= gate, base_sum / np.maximum(base_n, 1), np.nan)
    rec, p1, d, b, s, c = (np.concatenate([z[k] for z in zs])
                           for k in ("record", "p1", "d", "band", "sum", "count"))
    b = b if by_band else np.zeros_like(b)
    ok = np.isfinite(base[d, b])
    excess = s[ok] - c[ok] * base[d[ok], b[ok]]
    width = int(p1.max(initial=0)) + 2
    key = np.r_[rec[ok], rec[ok]] * width + np.r_[p1[ok], p1[ok] + 1]    # the key's and the query's paragraph
    uniq, inv = np.unique(key, return_inverse=True)
    weight = np.bincount(inv, np.r_[c[ok], c[ok]])
    U = np.bincount(inv, np.r_[excess, excess]) / weight
    return ({"record": uniq // width, "p1": uniq % width, "U": U, "weight": weight},
            int((base_n >= gate).sum()))


def band_decay(base_sum, base_n, gate=400):
    """The band-decay diagnostic: this repository's reading (App. A.10 names it, §6.4 of our copy
    does not define it). At one token distance d, how much lower the same-paragraph log Ā is for
    queries later in the window: per band b, the pair-weighted mean over d of base(d, b) - base(d),
    base(d) pooling every band, over the (d, b) cells with >= gate pairs. It is exactly the shift a
    d-only baseline adds to a pair whose query sits in band b (D_eff,d-only - D_eff,(d,b)), which
    later paragraphs' pairs carry: the spurious position term of A.10's pilot. Returns (shift per
    band, NaN where no cell passes; pairs per band; slope per band of a weighted line through them)."""
    pooled = base_sum.sum(1, keepdims=True) / np.maximum(base_n.sum(1, keepdims=True), 1)
    w = np.where(base_n >= gate, base_n, 0)
    dev = base_sum / np.maximum(base_n, 1) - pooled
    n = w.sum(0)
    shift = np.divide((w * dev).sum(0), n, out=np.full(len(n), np.nan), where=n > 0)
    ok = n > 0
    slope = (np.polyfit(np.flatnonzero(ok), shift[ok], 1, w=np.sqrt(n[ok]))[0] if ok.sum() >= 2
             else float("nan"))
    return shift, n, float(slope)


def weighted_r(x, y, w):
    """Weighted Pearson correlation (the univariate fit's R² is its square)."""
    mx, my = (w * x).sum() / w.sum(), (w * y).sum() / w.sum()
    return (w * (x - mx) * (y - my)).sum() / math.sqrt((w * (x - mx) ** 2).sum() * (w * (y - my) ** 2).sum())


def wls(X, y, w):
    """Weighted least squares of y on X with an intercept (App. A.10): coefficients, classical
    standard errors (residual variance from the weighted residuals on N - k - 1 df), two-sided t
    p-values, weighted R². Row 0 of each array is the intercept."""
    X1 = np.c_[np.ones(len(y)), X]
    XtW = X1.T * w
    cov = np.linalg.inv(XtW @ X1)
    coef = cov @ (XtW @ y)
    e = y - X1 @ coef
    df = len(y) - X1.shape[1]
    s2 = (w * e * e).sum() / df
    se = np.sqrt(np.diag(cov) * s2)
    ybar = (w * y).sum() / w.sum()
    return {"coef": coef, "se": se, "p": 2 * stats.t.sf(np.abs(coef / se), df), "df": df,
            "r2": 1 - (w * e * e).sum() / (w * (y - ybar) ** 2).sum()}


def paragraph_regression(config_dir, split="test", gate=400, embedder=None):
    """Tables 5 and 9 for one corpus: U_p of the pooled seeds of `config_dir` (out/<corpus>/
    hrope_axial) regressed on the paragraph's predictors (candidates.paragraph_predictors), WLS
    weighted by incident pair count; paragraphs outside their document's first window, truncated by
    it, or without a usable pair are dropped."""
    paths = sorted(glob.glob(os.path.join(config_dir, "seed*", f"paragraph_{split}.npz")))
    if not paths:
        raise SystemExit(f"error: no seed*/paragraph_{split}.npz under {config_dir}; "
                         "run evaluate.py RUN --paragraphs first")
    for p in paths:   # a copied seed would be pooled twice
        folder_is_run(os.path.dirname(p), read_config(os.path.dirname(p), "delete that run's folder")["run"])
    cfg = read_config(os.path.dirname(paths[0]), "delete that run's folder")["run"]
    depth, cells = paragraph_depth(paths, gate)
    context = int(np.load(paths[0])["max_len"])
    pred = candidates.paragraph_predictors(os.path.join(cfg["data"], cfg["corpus"]), split, context, embedder)
    width = int(max(pred["p1"].max(), depth["p1"].max(initial=0))) + 1
    at = {k: i for i, k in enumerate(pred["record"] * width + pred["p1"])}
    idx = np.array([at.get(k, -1) for k in depth["record"] * width + depth["p1"]], np.int64)
    X = np.stack([pred[k][idx] for k in PREDICTORS], 1)
    usable = (idx >= 0) & ~pred["truncated"][idx] & np.isfinite(X).all(1) & (depth["weight"] > 0)
    keep = usable & pred["first_window"][idx]                  # one window per document (A.10, our reading)
    X, y, w = X[keep], depth["U"][keep], depth["weight"][keep]
    if len(y) <= len(PREDICTORS) + 1:
        raise SystemExit(f"error: {config_dir}: {len(y)} paragraphs left after the gates; evaluate more "
                         "(--docs, --max_docs)" + (f" or lower --gate (now {gate})" if gate > 1 else ""))
    fit = wls(X, y, w)
    sd = X.std(0)
    # A.10's d-only pilot on the same paragraphs: U_p against base(d) pooled over the bands
    # (a paragraph's d-only pairs include any its (d, band) cells gated out)
    d_only = paragraph_depth(paths, gate, by_band=False)[0]
    at = {k: i for i, k in enumerate(d_only["record"] * width + d_only["p1"])}
    y_d = d_only["U"][[at[k] for k in (depth["record"] * width + depth["p1"])[keep]]]
    pos = X[:, PREDICTORS.index("position")]
    shift, band_pairs, slope = band_decay(*pooled_base(paths), gate)
    return {"corpus": cfg["corpus"], "runs": len(paths), "cells": cells, "paragraphs": len(y),
            "documents": len(np.unique(pred["document"][idx[keep]])),
            "paragraphs_every_window": int(usable.sum()),
            "context": context,
            "embedding": candidates.embedding_label(embedder), "mean_weight": float(w.mean()),
            "mean_coherence": float(X[:, 2].mean()), "r2": float(fit["r2"]), "df": fit["df"],
            **{k: {"b": float(fit["coef"][i + 1]), "se": float(fit["se"][i + 1]), "p": float(fit["p"][i + 1]),
                   "std": float(fit["coef"][i + 1] * sd[i])} for i, k in enumerate(PREDICTORS)},
            "pilot": {"r_d_only": float(weighted_r(pos, y_d, w)), "r_d_band": float(weighted_r(pos, y, w))},
            "band_decay": {"shift": shift.tolist(), "pairs": band_pairs.tolist(), "slope": slope}}


def paragraph_markdown(results):
    """Table 5 (standardized coefficients, pairwise |z| of raw slopes with the Bonferroni threshold
    over predictors x corpus pairs) and Table 9 (raw slopes with standard errors)."""
    names = [r["corpus"] for r in results]
    pairs = [(a, b) for a in range(len(results)) for b in range(a + 1, len(results))]

    def star(p):
        return "***" if p < 0.001 else "**" if p < 0.01 else "*" if p < 0.05 else ""
    def row(cells):
        return "| " + " | ".join(cells) + " |"
    lines = ["### Paragraph-level compression regression of U_p, WLS within each corpus (paper 004 Table 5)",
             "", row(["predictor"] + names + [f"{names[a]}–{names[b]} \\|z\\|" for a, b in pairs]),
             row(["---"] + ["---:"] * (len(names) + len(pairs)))]
    for k in PREDICTORS:
        z = [abs(results[a][k]["b"] - results[b][k]["b"])
             / math.hypot(results[a][k]["se"], results[b][k]["se"]) for a, b in pairs]
        lines.append(row([PREDICTOR_NAMES[k]] + [f"{r[k]['std']:+.3f}{star(r[k]['p'])}" for r in results]
                         + [f"{x:.2f}" for x in z]))
    lines += [row([f"N {k}"] + [f"{r[k]:,}" for r in results] + [""] * len(pairs))
              for k in ("paragraphs", "documents")]
    lines.append(row(["weighted R²"] + [f"{r['r2']:.3f}" for r in results] + [""] * len(pairs)))
    m = len(PREDICTORS) * len(pairs)
    lines += ["", "Standardized coefficient = raw slope × the corpus's SD of the predictor; * p < 0.05, "
              "** < 0.01, *** < 0.001 (t on N − 5 df). "
              + (f"|z| > {stats.norm.isf(0.05 / (2 * m)):.2f} is significant after Bonferroni over {m} "
                 f"comparisons (paper, 12 comparisons: 2.87). " if pairs
                 else "One corpus: no slope comparison. ")
              + "One window per document, its first (A.10's truncation rule, our reading): "
              + "; ".join(f"{r['corpus']} {r['paragraphs']:,} of the {r['paragraphs_every_window']:,} usable "
                          f"paragraphs of every window, context {r['context']}" for r in results) + ". "
              + f"Coherence embedding: {results[0]['embedding']}. Seeds pooled: "
              + "; ".join(f"{r['corpus']} {r['runs']} run(s), {r['cells']} usable (d, band) cells, "
                          f"mean weight {r['mean_weight']:,.0f} pairs" for r in results) + ".", "",
              "### Raw slopes, classical WLS standard errors in parentheses (paper 004 Table 9)", "",
              row(["corpus"] + [PREDICTOR_NAMES[k] for k in PREDICTORS]),
              row(["---"] + ["---:"] * len(PREDICTORS))]
    lines += [row([r["corpus"]] + [f"{r[k]['b']:+.3g} ({r[k]['se']:.2g})" for k in PREDICTORS])
              for r in results]
    lines += ["", "### App. A.10's d-only pilot: univariate position term of U_p, baseline matched on "
              "d only vs on (d, band)", "",
              "(paper, a WikiText-2 subset, d only: r ≈ -0.96, R² ≈ 0.9; same paragraphs and weights as "
              "Table 5)", "", row(["baseline", "corpus", "weighted r (U_p, position)", "R²"]),
              row(["---", "---", "---:", "---:"])]
    lines += [row([label, r["corpus"], f"{r['pilot'][k]:+.3f}", f"{r['pilot'][k] ** 2:.3f}"])
              for label, k in (("d only (pilot)", "r_d_only"), ("(d, band) (Table 5)", "r_d_band"))
              for r in results]
    bands = max(len(r["band_decay"]["shift"]) for r in results)
    lines += ["", "### Band-decay diagnostic (this repository's reading): same-paragraph log Ā in query band "
              f"b(i) = i // {P_BAND} minus the band-pooled baseline at the same d", "",
              "(pair-weighted over d; the shift a d-only baseline adds to a pair whose query is in band b; "
              "— : no baseline cell passes the gate)", "",
              row(["corpus"] + [f"b = {b}" for b in range(bands)] + ["slope per band"]),
              row(["---"] + ["---:"] * (bands + 1))]

    def fmt(x):
        return "—" if math.isnan(x) else f"{x:+.3f}"
    lines += [row([r["corpus"]] + [fmt(x) for x in r["band_decay"]["shift"]]
                  + ["—"] * (bands - len(r["band_decay"]["shift"])) + [fmt(r["band_decay"]["slope"])])
              for r in results]
    return "\n".join(lines)


def main(argv=None):
    """Tables 5 and 9 and A.10's pilot from the sums evaluate.py RUN --paragraphs wrote."""
    ap = Parser(prog="python -m treerope.hrope.paragraph_depth", description=(
        "Paper 004 Tables 5 and 9 (§6.4, App. A.10): each paragraph's compression depth regressed on its "
        "predictors, from the sums `evaluate.py RUN --paragraphs` writes."),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("config_dirs", nargs="+", metavar="CONFIG_DIR",
                    help="one out/<corpus>/hrope_axial per corpus, its seeds pooled")
    ap.add_argument("--split", default="test", help="the split evaluate.py scored")
    ap.add_argument("--gate", type=at_least_one, default=400, help="pairs a baseline cell needs (A.10)")
    ap.add_argument("--embedder", default=None,
                    help="a local sentence-embedding model folder; none: the stand-in embedding")
    args = ap.parse_args(argv)
    results = [paragraph_regression(d, args.split, args.gate, args.embedder) for d in args.config_dirs]
    print(paragraph_markdown(results))
    return results


if __name__ == "__main__":
    main()
