"""Paired statistics, figures and compression depth.

    python analyze.py out/python                       # tables: every config vs seq_only
    python analyze.py out/python --baseline seq_tree --figures figs
    python analyze.py --depth hrope.npz rand.npz       # compression depth U*, paired bootstrap
    python analyze.py --tokens RUN_A RUN_B             # two runs paired token by token
    python analyze.py --boundary out/code              # paper 004 Table 1 (evaluate.py --boundary)
    python analyze.py --candidates data/prose data/code  # paper 004 Table 4 (corpus only: candidates.py)
    python analyze.py --paragraphs out/prose/hrope_axial out/code/hrope_axial   # Tables 5, 9

Runs are paired by seed within a setting (corpus + model size + context + steps) and compared
only at milestones both reached (depth-perception appendix §1). Compression depth follows the
paragraph-boundaries paper §5.1 and App. A.3/A.6: the exact-distance estimator.
"""
import argparse
import csv
import glob
import json
import math
import os
import warnings
from collections import defaultdict

import numpy as np
from scipy import stats

import trees
from data import replacing


# ------------------------------------------------------------------------ paired statistics ----
def sign_test(wins, n):
    """Exact two-sided sign test: P(a fair coin gives a split at least this uneven)."""
    return float(stats.binomtest(wins, n, 0.5).pvalue) if n else float("nan")


def paired(deltas):
    """Per-seed Δ = configuration − baseline (nats/token; negative = better) -> the paper's row."""
    d = np.asarray(deltas, float)
    n = len(d)
    mean = d.mean()
    se = d.std(ddof=1) / math.sqrt(n) if n > 1 else float("nan")
    t = mean / se if n > 1 and se > 0 else float("nan")
    p = 2 * stats.t.sf(abs(t), n - 1) if n > 1 and se > 0 else float("nan")
    half = stats.t.ppf(0.975, n - 1) * se if n > 1 else float("nan")
    wins, ties = int((d < 0).sum()), int((d == 0).sum())
    return {"n": n, "delta": mean, "se": se, "t": t, "p": p, "ci_lo": mean - half, "ci_hi": mean + half,
            "won": wins, "sign_p": sign_test(wins, n - ties), "ppl_reduction": ppl_reduction(mean)}


def ppl_reduction(delta):
    """100 (1 − e^Δ): percent lower perplexity than the baseline (positive = better)."""
    return 100 * (1 - math.exp(delta))


def bh(pvalues):
    """Benjamini–Hochberg adjusted q-values over one family of comparisons."""
    p = np.asarray(pvalues, float)
    q = np.full_like(p, np.nan)
    ok = ~np.isnan(p)
    if ok.any():
        q[ok] = stats.false_discovery_control(p[ok], method="bh")
    return q


def final_val(run):
    """A run's validation loss at its end (final.json, else its last milestone)."""
    return run["final"]["val_loss"] if run.get("final") else run["log"][max(run["log"])]["val_loss"]


HROPE_VARIANTS = ("flat", "sent_axial", "hrope_axial", "rand_axial")


def table12(runs):
    """Paper 004 Table 12 per setting: validation loss mean ± std over seeds for each primary
    variant, and the seed-matched checks of App. D: for (rand_axial, hrope_axial) and
    (hrope_axial, flat), in how many shared seeds the first is higher, whether the seed ranges
    are disjoint, and the one-sided sign-test p of 'the first is higher in every seed'."""
    out = []
    for setting, configs in sorted(runs.items()):
        present = [v for v in HROPE_VARIANTS if v in configs]
        if len(present) < 2:
            continue
        stat = {v: np.array([final_val(configs[v][s]) for s in sorted(configs[v])]) for v in present}
        pairs = []
        for a, b in (("rand_axial", "hrope_axial"), ("hrope_axial", "flat")):
            seeds = sorted(set(configs.get(a, {})) & set(configs.get(b, {})))
            if seeds:
                d = np.array([final_val(configs[a][s]) - final_val(configs[b][s]) for s in seeds])
                va, vb = [final_val(configs[a][s]) for s in seeds], [final_val(configs[b][s]) for s in seeds]
                pairs.append({"a": a, "b": b, "n": len(seeds), "higher": int((d > 0).sum()), "mean": float(d.mean()),
                              "disjoint": max(va) < min(vb) or max(vb) < min(va),
                              "sign_p_one_sided": float(stats.binomtest(int((d > 0).sum()), len(seeds), 0.5,
                                                                        alternative="greater").pvalue)})
        out.append({"setting": setting, "stats": {v: (x.mean(), x.std(ddof=1) if len(x) > 1 else float("nan"), len(x))
                                                  for v, x in stat.items()}, "pairs": pairs})
    return out


def table8(runs):
    """Paper 004 Table 8: the same-paragraph probe's balanced accuracy per layer, mean over seeds,
    per model; and for hrope_axial against rand_axial, in how many shared seeds it is higher."""
    out = []
    for setting, configs in sorted(runs.items()):
        probes = {c: {s: r["eval"]["probe"] for s, r in seeds.items() if "probe" in r.get("eval", {})}
                  for c, seeds in configs.items()}
        probes = {c: p for c, p in probes.items() if p}
        if not probes:
            continue
        bacc = lambda p: np.array([l["balanced_accuracy"] for l in p["layers"]])
        rows = {c: np.mean([bacc(p) for p in ps.values()], 0) for c, ps in sorted(probes.items())}
        higher = None
        if {"hrope_axial", "rand_axial"} <= set(probes):
            common = sorted(set(probes["hrope_axial"]) & set(probes["rand_axial"]))
            higher = (sum(bacc(probes["hrope_axial"][s]) > bacc(probes["rand_axial"][s]) for s in common), len(common))
        out.append({"setting": setting, "rows": rows, "higher": higher})
    return out


def table8_markdown(t):
    L = len(next(iter(t["rows"].values())))
    lines = [f"### {t['setting'][0]}: same-paragraph probe, balanced accuracy by layer, mean over seeds "
             "(paper 004 Table 8)", "", "| model | " + " | ".join(f"L{l}" for l in range(L)) + " |",
             "| --- |" + " ---: |" * L]
    lines += [f"| {c} | " + " | ".join(f"{v:.3f}" for v in vals) + " |" for c, vals in t["rows"].items()]
    if t["higher"]:
        k, n = t["higher"]
        lines.append("| hrope_axial > rand_axial (seeds) | " + " | ".join(f"{int(x)}/{n}" for x in k) + " |")
    return "\n".join(lines)


def hub_table(run_dirs, split="test", gate=2000, draws=1000):
    """Paper 004 Table 13: U* (degree-2 vertex, exact-distance cells) under each masking
    condition, the runs' documents pooled (each seed's documents count as clusters of their own);
    random conditions as mean ± std over their draws; the share of the original well removed;
    document-cluster bootstrap 95% CIs for Original, Hub-masked and Freq-matched (as the paper
    brackets them), or how many draws had no well. Beside U*, the response at the shallowest
    displacement U(Δp1 = 1) (a descriptive number that exists where no well is identifiable, as at
    CPU scale). Then the pair-matched mass sweep: both against the share of the hubs' pairs removed
    (Pair-matched random is the 100% point)."""
    conds = defaultdict(list)
    for d in run_dirs:
        for path in sorted(glob.glob(os.path.join(d, f"hub_*_{split}.npz"))):
            name = os.path.basename(path)[4:-len(f"_{split}.npz")]
            conds[name].append(load_acc(path))
    pooled = {c: {k: np.concatenate([a[k] for a in accs]) for k in accs[0]} for c, accs in conds.items()}
    depth = {c: compression_depth(acc, gate) for c, acc in pooled.items()}
    u = {c: v[1] for c, v in depth.items()}
    u1 = {c: v[2][1] for c, v in depth.items()}
    share = lambda m, ref: 1 - m / ref["original"] if "original" in ref and ref["original"] else float("nan")
    rows = []
    for cond in ("original", "hub", "freq", "random", "pair_matched"):
        names = [c for c in u if c == cond or (c.startswith(cond) and c[len(cond):].isdigit())]
        if not names:
            continue
        vals = np.array([u[c] for c in names])
        m, m1 = float(np.mean(vals)), float(np.mean([u1[c] for c in names]))      # NaN where a draw has no well
        row = {"condition": cond, "U": m, "std": float(vals.std()) if len(names) > 1 and np.isfinite(m) else None,
               "removed": share(m, u), "U1": m1, "removed_U1": share(m1, u1), "ci": None}
        if cond in pooled and cond in ("original", "hub", "freq"):
            boot = bootstrap_depth(pooled[cond], draws=draws, gate=gate)[0]
            row["ci"] = ci(boot) if np.isnan(boot).sum() <= draws / 2 else int(np.isnan(boot).sum())
        rows.append(row)
    sweep = sorted((int(c[5:]), u[c], u1[c]) for c in u if c.startswith("sweep"))
    if sweep and rows and rows[-1]["condition"] == "pair_matched":
        sweep.append((100, rows[-1]["U"], rows[-1]["U1"]))
    return rows, [{"percent": p, "U": v, "removed": share(v, u), "U1": v1, "removed_U1": share(v1, u1)}
                  for p, v, v1 in sweep], draws


def hub_markdown(table, title):
    rows, sweep, draws = table
    fmt = lambda x: "no interior minimum" if math.isnan(x) else f"{x:+.3f}"
    pct = lambda x: "—" if math.isnan(x) else f"{100 * x:.0f}%"
    lines = [f"### {title}", "", "| condition | U* | 95% CI | share of the well removed | U(Δp1 = 1) | share of U(1) removed |",
             "| --- | ---: | --- | ---: | ---: | ---: |"]
    for r in rows:
        u = fmt(r["U"]) + (f" ± {r['std']:.3f}" if r["std"] is not None and not math.isnan(r["std"]) else "")
        band = ("—" if r["ci"] is None else f"not identifiable ({r['ci']} of {draws} draws without a well)"
                if isinstance(r["ci"], int) else f"[{r['ci'][0]:+.3f}, {r['ci'][1]:+.3f}]")
        first = r["condition"] == "original"
        lines.append(f"| {r['condition']} | {u} | {band} | {'—' if first else pct(r['removed'])} | {r['U1']:+.3f} | "
                     f"{'—' if first else pct(r['removed_U1'])} |")
    if sweep:
        lines += ["", "Pair-matched mass sweep (one draw per point; 100% is Pair-matched random, mean over its draws):", "",
                  "| hubs' cross-paragraph pairs removed | U* | share of the well removed | U(Δp1 = 1) | share of U(1) removed |",
                  "| ---: | ---: | ---: | ---: | ---: |"]
        lines += [f"| {s['percent']}% | {fmt(s['U'])} | {pct(s['removed'])} | {s['U1']:+.3f} | {pct(s['removed_U1'])} |"
                  for s in sweep]
    return "\n".join(lines)


# ----------------------------------------- Layer III: paragraph-level regression (§6.4) ----
PREDICTORS = ("length", "ttr", "coherence", "position")
PREDICTOR_NAMES = {"length": "Length", "ttr": "Type–token ratio", "coherence": "Embedding coherence",
                   "position": "Position (control)"}


def paragraph_depth(paths, gate=400):
    """Per-paragraph depth U_p (paper 004 Eqs. A.2-A.3), the runs (seeds) pooled: base(d, b) is the
    mean log Ā of the Δp1 = 0 pairs in its (d, band) cell, used only where the cell holds at least
    `gate` pairs over all runs; a Δp1 = 1 pair scores D_eff,1 = log Ā - base(d, b(i)); U_p is the
    mean over the pairs incident to paragraph p (reading: as the key's paragraph or as the query's),
    its weight the number of those pairs. Returns {record, p1, U, weight} and the usable cells."""
    zs = [np.load(p) for p in paths]
    base_n = sum(z["base_n"] for z in zs)
    base = np.where(base_n >= gate, sum(z["base_sum"] for z in zs) / np.maximum(base_n, 1), np.nan)
    rec, p1, d, b, s, c = (np.concatenate([z[k] for z in zs]) for k in ("record", "p1", "d", "band", "sum", "count"))
    ok = np.isfinite(base[d, b])
    excess = s[ok] - c[ok] * base[d[ok], b[ok]]
    width = int(p1.max(initial=0)) + 2
    key = np.r_[rec[ok], rec[ok]] * width + np.r_[p1[ok], p1[ok] + 1]    # the key's and the query's paragraph
    uniq, inv = np.unique(key, return_inverse=True)
    weight = np.bincount(inv, np.r_[c[ok], c[ok]])
    U = np.bincount(inv, np.r_[excess, excess]) / weight
    return {"record": uniq // width, "p1": uniq % width, "U": U, "weight": weight}, int((base_n >= gate).sum())


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
    weighted by incident pair count; paragraphs truncated by the window or without a usable pair
    are dropped."""
    import candidates
    paths = sorted(glob.glob(os.path.join(config_dir, "seed*", f"paragraph_{split}.npz")))
    if not paths:
        raise SystemExit(f"error: no seed*/paragraph_{split}.npz under {config_dir}; run evaluate.py RUN --paragraphs first")
    with open(os.path.join(os.path.dirname(paths[0]), "config.json")) as f:
        cfg = json.load(f)["run"]
    depth, cells = paragraph_depth(paths, gate)
    pred = candidates.paragraph_predictors(os.path.join(cfg["data"], cfg["corpus"]), split,
                                           int(np.load(paths[0])["max_len"]), embedder)
    width = int(max(pred["p1"].max(), depth["p1"].max(initial=0))) + 1
    at = {k: i for i, k in enumerate(pred["record"] * width + pred["p1"])}
    idx = np.array([at.get(k, -1) for k in depth["record"] * width + depth["p1"]], np.int64)
    X = np.stack([pred[k][idx] for k in PREDICTORS], 1)
    keep = (idx >= 0) & ~pred["truncated"][idx] & np.isfinite(X).all(1) & (depth["weight"] > 0)
    X, y, w = X[keep], depth["U"][keep], depth["weight"][keep]
    if len(y) <= len(PREDICTORS) + 1:
        raise SystemExit(f"error: {config_dir}: {len(y)} paragraphs left after the gates; evaluate more records "
                         f"(--max_docs) or lower --gate")
    fit = wls(X, y, w)
    sd = X.std(0)
    return {"corpus": cfg["corpus"], "runs": len(paths), "cells": cells, "paragraphs": len(y),
            "embedding": candidates.embedding_label(embedder),
            "mean_weight": float(w.mean()), "mean_coherence": float(X[:, 2].mean()), "r2": float(fit["r2"]), "df": fit["df"],
            **{k: {"b": float(fit["coef"][i + 1]), "se": float(fit["se"][i + 1]), "p": float(fit["p"][i + 1]),
                   "std": float(fit["coef"][i + 1] * sd[i])} for i, k in enumerate(PREDICTORS)}}


def paragraph_markdown(results):
    """Table 5 (standardized coefficients, pairwise |z| of raw slopes with the Bonferroni threshold
    over predictors x corpus pairs) and Table 9 (raw slopes with standard errors)."""
    names = [r["corpus"] for r in results]
    pairs = [(a, b) for a in range(len(results)) for b in range(a + 1, len(results))]
    star = lambda p: "***" if p < 0.001 else "**" if p < 0.01 else "*" if p < 0.05 else ""
    row = lambda cells: "| " + " | ".join(cells) + " |"
    lines = ["### Paragraph-level compression regression of U_p, WLS within each corpus (paper 004 Table 5)", "",
             row(["predictor"] + names + [f"{names[a]}–{names[b]} \\|z\\|" for a, b in pairs]),
             row(["---"] + ["---:"] * (len(names) + len(pairs)))]
    for k in PREDICTORS:
        z = [abs(results[a][k]["b"] - results[b][k]["b"]) / math.hypot(results[a][k]["se"], results[b][k]["se"])
             for a, b in pairs]
        lines.append(row([PREDICTOR_NAMES[k]] + [f"{r[k]['std']:+.3f}{star(r[k]['p'])}" for r in results]
                         + [f"{x:.2f}" for x in z]))
    lines.append(row(["N paragraphs"] + [f"{r['paragraphs']:,}" for r in results] + [""] * len(pairs)))
    lines.append(row(["weighted R²"] + [f"{r['r2']:.3f}" for r in results] + [""] * len(pairs)))
    m = len(PREDICTORS) * len(pairs)
    lines += ["", "Standardized coefficient = raw slope × the corpus's SD of the predictor; * p < 0.05, ** < 0.01, "
              "*** < 0.001 (t on N − 5 df). "
              + (f"|z| > {stats.norm.isf(0.05 / (2 * m)):.2f} is significant after Bonferroni over {m} comparisons "
                 f"(paper, 12 comparisons: 2.87). " if pairs else "One corpus: no slope comparison. ")
              + f"Coherence embedding: {results[0]['embedding']}. Seeds pooled: "
              + "; ".join(f"{r['corpus']} {r['runs']} run(s), {r['cells']} usable (d, band) cells, mean weight "
                          f"{r['mean_weight']:,.0f} pairs" for r in results) + ".", "",
              "### Raw slopes, classical WLS standard errors in parentheses (paper 004 Table 9)", "",
              row(["corpus"] + [PREDICTOR_NAMES[k] for k in PREDICTORS]), row(["---"] + ["---:"] * len(PREDICTORS))]
    lines += [row([r["corpus"]] + [f"{r[k]['b']:+.3g} ({r[k]['se']:.2g})" for k in PREDICTORS]) for r in results]
    return "\n".join(lines)


def table12_markdown(t):
    corpus = t["setting"][0]
    head = " | ".join(v for v in HROPE_VARIANTS if v in t["stats"])
    cells = " | ".join(f"{m:.4f} ± {s:.4f} (n={n})" for m, s, n in t["stats"].values())
    lines = [f"### {corpus}: validation loss by variant, mean ± std over seeds (paper 004 Table 12)", "",
             f"| corpus | {head} |", "| --- |" + " --- |" * len(t["stats"]), f"| {corpus} | {cells} |", "",
             "| comparison | seeds | first higher | mean Δ | ranges disjoint | one-sided sign p |",
             "| --- | ---: | ---: | ---: | --- | ---: |"]
    lines += [f"| {p['a']} vs {p['b']} | {p['n']} | {p['higher']}/{p['n']} | {p['mean']:+.4f} | "
              f"{'yes' if p['disjoint'] else 'no'} | {p['sign_p_one_sided']:.3g} |" for p in t["pairs"]]
    return "\n".join(lines)


# ------------------------------------------------------ Layer I: normalised boundary effect ----
def boundary_pool(root, split="test"):
    """{config: (fit[D, 5], sets[D, 7, 3], b_doc[k], b_sums[k, 3])} from evaluate.py --boundary,
    the seeds of a configuration pooled: sums added per document (the same test documents), the
    real boundaries of every seed kept (App. A.2: three seeds pooled per corpus)."""
    out = {}
    for path in sorted(glob.glob(os.path.join(root, "**", f"boundary_{split}.npz"), recursive=True)):
        with open(os.path.join(os.path.dirname(path), "config.json")) as f:
            r = json.load(f)["run"]
        z = np.load(path)
        out.setdefault(r.get("name") or r["config"], []).append(z)
    pooled = {}
    for config, zs in out.items():
        docs = np.unique(np.concatenate([z["doc"] for z in zs]))
        fit, sets = np.zeros((len(docs), 5)), np.zeros((len(docs), zs[0]["sets"].shape[1], 3))
        b_doc, b_sums = [], []
        for z in zs:
            u = np.searchsorted(docs, z["doc"])
            np.add.at(fit, u, z["fit"])
            np.add.at(sets, u, z["sets"])
            b_doc.append(u[z["b_doc"]])
            b_sums.append(z["b_sums"])
        pooled[config] = (fit, sets, np.concatenate(b_doc), np.concatenate(b_sums))
    return pooled


def boundary_effect(fit, sets, b_doc, b_sums, W):
    """The Table 1 quantities for each row of document weights W (R, D): the line, the anchors and
    every mean recomputed from the same weighted documents (App. A.2). Returns {name: (R,)}."""
    n, sd, sdd, sy, sdy = (W @ fit).T
    b1 = (n * sdy - sd * sy) / (n * sdd - sd ** 2)
    b0 = (sy - b1 * sd) / n
    S = np.einsum("rd,dkc->rkc", W, sets)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = (S[..., 2] - b0[:, None] * S[..., 0] - b1[:, None] * S[..., 1]) / S[..., 0]
        within, para = mean[:, 0], mean[:, 1]
        beta = (mean - within[:, None]) / (para - within)[:, None]
        mb = (b_sums[:, 2] - b0[:, None] * b_sums[:, 0] - b1[:, None] * b_sums[:, 1]) / b_sums[:, 0]
        beta_b = (mb - within[:, None]) / (para - within)[:, None]
        wb = W[:, b_doc]
        below = (beta_b < beta[:, 5:6]) + 0.5 * (beta_b == beta[:, 5:6])
        c_pct = 100 * (wb * below).sum(1) / wb.sum(1)
    return {"delta_B": beta[:, 3] - beta[:, 4], "delta_C": beta[:, 5] - beta[:, 6], "beta_B": beta[:, 3],
            "beta_C": beta[:, 5], "beta_sent": beta[:, 2], "paper_delta_B": beta[:, 3] - 1,
            "paper_delta_C": beta[:, 5] - beta[:, 2], "C_pct": c_pct}


def boundary_table(pooled, draws=4000, seed=0):
    """Point estimates and 95% document-cluster bootstrap CIs per configuration."""
    rows = []
    rng = np.random.default_rng(seed)
    for config, (fit, sets, b_doc, b_sums) in sorted(pooled.items()):
        D = len(fit)
        point = {k: float(v[0]) for k, v in boundary_effect(fit, sets, b_doc, b_sums, np.ones((1, D))).items()}
        boot = {k: [] for k in point}
        for start in range(0, draws, 500):     # chunks keep the (draws x boundaries) matrix small
            W = rng.multinomial(D, np.full(D, 1 / D), size=min(500, draws - start)).astype(np.float64)
            for k, v in boundary_effect(fit, sets, b_doc, b_sums, W).items():
                boot[k].append(v)
        row = {"config": config, "documents": D, "boundaries": len(b_doc),
               "estimable": bool(sets[:, 1, 0].sum() and sets[:, 3, 0].sum() and sets[:, 5, 0].sum())}
        for k, v in point.items():
            with warnings.catch_warnings():         # a draw without boundaries gives NaN: left out
                warnings.simplefilter("ignore", RuntimeWarning)
                lo, hi = np.nanpercentile(np.concatenate(boot[k]), [2.5, 97.5])
            row[k], row[k + "_lo"], row[k + "_hi"] = v, float(lo), float(hi)
        rows.append(row)
    return rows


def boundary_markdown(rows, title):
    f = lambda r, k, fmt="+.3f": f"{r[k]:{fmt}} [{r[k + '_lo']:{fmt}}, {r[k + '_hi']:{fmt}}]"
    lines = [f"### {title}", "",
             "| model | docs | Δ_B | Δ_C | β_C | C_pct % | β_B − 1 (paper) | β_C − β_A^sent (paper) | H0(1) Δ=0 | H0(2) β_C=1 |",
             "| --- | ---: | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        if not r["estimable"]:
            lines.append(f"| {r['config']} | {r['documents']} | not estimable: the scored records hold no real paragraph "
                         "boundary or no intervened pair | | | | | | | |")
            continue
        exact = r["delta_B"] == 0 and r["delta_C"] == 0
        h1 = "holds exactly" if exact else ("rejected" if not (r["delta_B_lo"] <= 0 <= r["delta_B_hi"]
                                                             and r["delta_C_lo"] <= 0 <= r["delta_C_hi"]) else "not rejected")
        h2 = "—" if exact else ("rejected" if not r["beta_C_lo"] <= 1 <= r["beta_C_hi"] else "not rejected")
        lines.append(f"| {r['config']} | {r['documents']} | {f(r, 'delta_B')} | {f(r, 'delta_C')} | "
                     f"{f(r, 'beta_C', '.3f')} | {f(r, 'C_pct', '.1f')} | {f(r, 'paper_delta_B')} | "
                     f"{f(r, 'paper_delta_C')} | {h1} | {h2} |")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------- runs ----
def load_runs(root, finished=False):
    """{setting: {config: {seed: run}}} from out/<corpus>/<config>/seed<k>/; with `finished`, only
    runs that wrote final.json (a seed still training would hold every pair to its milestone)."""
    runs = defaultdict(lambda: defaultdict(dict))
    for cfg_path in glob.glob(os.path.join(root, "**", "config.json"), recursive=True):
        d = os.path.dirname(cfg_path)
        with open(cfg_path) as f:
            c = json.load(f)
        log_path = os.path.join(d, "log.jsonl")
        if not os.path.exists(log_path):
            continue
        log = []
        with open(log_path) as f:
            for i, line in enumerate(f, 1):
                try:
                    log += [json.loads(line)] if line.strip() else []
                except json.JSONDecodeError:
                    raise SystemExit(f"error: {log_path} line {i} is not JSON (a damaged log: "
                                     "delete that run or train it again with --resume=0)")
        final = None
        if os.path.exists(os.path.join(d, "final.json")):
            with open(os.path.join(d, "final.json")) as f:
                final = json.load(f)
        if finished and final is None:
            continue
        m, r = c["model"], c["run"]
        setting = (r["corpus"], m["n_layer"], m["n_embd"], m["n_head"], m["max_len"], r["steps"])
        run = {"log": {e["step"]: e for e in log}, "final": final, "dir": d}
        for key, name in (("eval", "eval_test.json"), ("attention", "attention_test.json")):
            if os.path.exists(os.path.join(d, name)):   # written by evaluate.py
                with open(os.path.join(d, name)) as f:
                    run[key] = json.load(f)
        runs[setting][r.get("name") or r["config"]][r["seed"]] = run   # --name: a variant of a config
    return runs


def compare(runs, baseline, metric="val"):
    """One row per configuration against `baseline`, at the last milestone every pair reached
    (metric 'val'), or on the final test scores (metric 'test')."""
    rows = []
    for setting, configs in sorted(runs.items()):
        if baseline not in configs:
            continue
        base = configs[baseline]
        for name, seeds in sorted(configs.items()):
            if name == baseline:
                continue
            common = sorted(set(seeds) & set(base))
            if metric == "test":
                pairs = [(seeds[s]["final"], base[s]["final"]) for s in common]
                deltas = [a["test_loss"] - b["test_loss"] for a, b in pairs if a and b]
                step = "final"
            else:
                steps = set.intersection(*[set(seeds[s]["log"]) & set(base[s]["log"]) for s in common]) if common else set()
                if not steps:
                    continue
                step = max(steps)
                deltas = [seeds[s]["log"][step]["val_loss"] - base[s]["log"][step]["val_loss"] for s in common]
            if not deltas:
                continue
            rows.append({"setting": setting, "config": name, "baseline": baseline, "step": step,
                         "base_loss": float(np.mean([base[s]["log"][max(base[s]["log"])]["val_loss"] for s in common])),
                         **paired(deltas)})
    q = bh([r["p"] for r in rows])
    for r, qi in zip(rows, q):
        r["q"] = qi
    return rows


def _with_bh(rows):
    for r, q in zip(rows, bh([r["p"] for r in rows])):
        r["q"] = q
    return rows


def evaluated_pairs(runs, baseline, key="eval"):
    """(setting, configuration, its seeds, the baseline's seeds, seeds both have `key` for) for
    every configuration other than the baseline with at least one such seed."""
    for setting, configs in sorted(runs.items()):
        base = configs.get(baseline, {})
        for name, seeds in sorted(configs.items()):
            common = [s for s in sorted(set(seeds) & set(base)) if key in seeds[s] and key in base[s]]
            if name != baseline and common:
                yield setting, name, seeds, base, common


def compare_kinds(runs, baseline):
    """Where the gain lands (appendix §2, Fig. 5): per token kind, the paired test-split Δ of
    each configuration against the baseline, from evaluate.py's eval_test.json."""
    rows = []
    for setting, name, seeds, base, common in evaluated_pairs(runs, baseline):
        kinds = set.intersection(*[set(seeds[s]["eval"]["kinds"]) & set(base[s]["eval"]["kinds"]) for s in common])
        for kind in sorted(kinds, key=lambda k: (k != "all", k)):
            d = [seeds[s]["eval"]["kinds"][kind]["nll"] - base[s]["eval"]["kinds"][kind]["nll"] for s in common]
            rows.append({"setting": setting, "config": name, "kind": kind, "step": "test",
                         "tokens": seeds[common[0]]["eval"]["kinds"][kind]["tokens"], **paired(d)})
    return _with_bh(rows)


def interventions(runs):
    """How the structure is used (appendix §2): per configuration and intervention, the mean
    over seeds of test NLL under the intervention minus the real score, the perplexity
    ratio, and in how many seeds the intervention hurt."""
    rows = []
    for setting, configs in sorted(runs.items()):
        for name, seeds in sorted(configs.items()):
            evals = [seeds[s]["eval"] for s in sorted(seeds) if "eval" in seeds[s]]
            if not evals:
                continue
            for t in evals[0].get("interventions", {}):
                for kind in evals[0]["interventions"][t]:
                    d = np.array([e["interventions"][t][kind]["nll"] - e["kinds"][kind]["nll"] for e in evals])
                    rows.append({"setting": setting, "config": name, "intervention": t, "kind": kind, "n": len(d),
                                 "real": float(np.mean([e["kinds"][kind]["nll"] for e in evals])),
                                 "delta": float(d.mean()), "ppl_ratio": float(np.exp(d.mean())),
                                 "hurt": int((d > 0).sum())})
    return rows


def compare_intervened(runs, baseline):
    """A configuration scored with its structure shuffled or removed against the baseline scored
    as it is, paired by seed on the same test records (the depth-perception appendix's "with depth /
    without depth" rows, e.g. depth dropout's −0.42% without depth): one row per (configuration,
    intervention), BH across them."""
    rows = []
    for setting, name, seeds, base, common in evaluated_pairs(runs, baseline):
        for t in ("shuffle", "remove"):
            if all(t in seeds[s]["eval"]["interventions"] for s in common):
                d = [seeds[s]["eval"]["interventions"][t]["all"]["nll"] - base[s]["eval"]["kinds"]["all"]["nll"]
                     for s in common]
                rows.append({"setting": setting, "config": f"{name}, {t}", "baseline": baseline, **paired(d)})
    return _with_bh(rows)


def substitution(rows):
    """Paper 004 Table 2: p1 substitution on one checkpoint (all tokens): mean NLL per
    condition and in how many seeds real < period < rand < const0 holds."""
    out = []
    by = defaultdict(dict)
    for r in rows:
        if r["kind"] == "all" and r["intervention"] in ("period", "rand", "const0"):
            by[(r["setting"], r["config"])][r["intervention"]] = r
    reads_labels = {(r["setting"], r["config"]) for r in rows if r["intervention"] == "real"}
    for (setting, config), conds in sorted(by.items()):
        if len(conds) == 3 and (setting, config) not in reads_labels:   # Table 2 is for models reading p1
            out.append({"setting": setting, "config": config, "real": conds["period"]["real"],
                        **{k: conds[k]["real"] + conds[k]["delta"] for k in ("period", "rand", "const0")}})
    return out


def substitution_order(runs, setting, config):
    """Seeds in which real < period < rand < const0 (paper 004 §4.3)."""
    ok = 0
    seeds = runs[setting][config]
    for s in seeds.values():
        e = s.get("eval")
        if e and all(k in e["interventions"] for k in ("period", "rand", "const0")):
            v = [e["kinds"]["all"]["nll"]] + [e["interventions"][k]["all"]["nll"] for k in ("period", "rand", "const0")]
            ok += all(a < b for a, b in zip(v, v[1:]))
    return ok, sum("eval" in s for s in seeds.values())


def compare_attention(runs, baseline):
    """Attention moves where the gain lands (appendix §2): per share, the paired difference
    (configuration − baseline, percentage points, averaged over heads) across seeds."""
    rows = []
    for setting, name, seeds, base, common in evaluated_pairs(runs, baseline, "attention"):
        for key, v in seeds[common[0]]["attention"].items():
            if "mean_over_heads" not in v or not isinstance(v["mean_over_heads"], float):
                continue
            a = [100 * seeds[s]["attention"][key]["mean_over_heads"] for s in common]
            b = [100 * base[s]["attention"][key]["mean_over_heads"] for s in common]
            r = paired(np.subtract(b, a))       # Δ < 0 counts as "won": the share grew
            rows.append({"setting": setting, "config": name, "share": key, "base": float(np.mean(b)),
                         "value": float(np.mean(a)), "points": -r["delta"], "higher": r["won"], "n": r["n"],
                         "p": r["p"], "sign_p": r["sign_p"]})
    return _with_bh(rows)


def _md(title, header, rows, cell):
    """A markdown table: header '| a | b |' with right-aligned numbers (names left)."""
    cols = header.count("|") - 1
    align = "| --- | " + " | ".join(["---:"] * (cols - 1)) + " |"
    return "\n".join([f"### {title}", "", header, align] + [cell(r) for r in rows])


def kinds_markdown(rows, title):
    return _md(title, "| configuration: kind | tokens | Δ nats/token | 95% CI | won | sign p | q | ppl reduction % |", rows,
               lambda r: f"| {r['config']}: {r['kind']} | {r['tokens']} | {r['delta']:+.4f} | [{r['ci_lo']:+.4f}, "
                         f"{r['ci_hi']:+.4f}] | {r['won']}/{r['n']} | {r['sign_p']:.3g} | {r['q']:.3g} | "
                         f"{r['ppl_reduction']:+.2f} |")


def interventions_markdown(rows, title):
    return _md(title, "| configuration: intervention (kind) | real nats/token | Δ nats/token | perplexity × | hurt |", rows,
               lambda r: f"| {r['config']}: {r['intervention']} ({r['kind']}) | {r['real']:.4f} | {r['delta']:+.4f} | "
                         f"{r['ppl_ratio']:.3f} | {r['hurt']}/{r['n']} |")


def attention_markdown(rows, title):
    return _md(title, "| configuration: attention share | baseline % | configuration % | Δ points | higher | sign p | q |",
               rows, lambda r: f"| {r['config']}: {r['share']} | {r['base']:.2f} | {r['value']:.2f} | "
                               f"{r['points']:+.2f} | {r['higher']}/{r['n']} | {r['sign_p']:.3g} | {r['q']:.3g} |")


KEY_KINDS = ("after_close", "new_block", "row_end", "copied_above", "cell_ref")
COLUMNS = ["config", "n", "delta", "se", "t", "p", "ci_lo", "ci_hi", "won", "sign_p", "q", "ppl_reduction"]


def markdown(rows, title):
    return _md(title, "| configuration | Δ nats/token | SE | t | p | 95% CI | won | sign p | q | ppl reduction % |", rows,
               lambda r: f"| {r['config']} | {r['delta']:+.4f} | {r['se']:.4f} | {r['t']:.2f} | {r['p']:.3g} | "
                         f"[{r['ci_lo']:+.4f}, {r['ci_hi']:+.4f}] | {r['won']}/{r['n']} | {r['sign_p']:.3g} | "
                         f"{r['q']:.3g} | {r['ppl_reduction']:+.2f} |")


def write_csv_rows(rows, path):
    with replacing(path) as tmp, open(tmp, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def write_csv(rows, path):
    with replacing(path) as tmp, open(tmp, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["setting", "step", "baseline", "base_loss"] + COLUMNS)
        w.writeheader()
        for r in rows:
            w.writerow({k: r[k] for k in w.fieldnames})


# ------------------------------------------------------------------------------- figures ----
def figure_gap(runs, baseline, out_dir):
    """Fig. 3: perplexity reduction against the baseline at every milestone, 95% band."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    for setting, configs in runs.items():
        if baseline not in configs:
            continue
        fig, ax = plt.subplots(figsize=(7, 4))
        table = []
        for name, seeds in sorted(configs.items()):
            if name == baseline:
                continue
            common = sorted(set(seeds) & set(configs[baseline]))
            if not common:
                continue
            steps = sorted(set.intersection(*[set(seeds[s]["log"]) & set(configs[baseline][s]["log"]) for s in common]))
            means, los, his = [], [], []
            for st in steps:
                r = paired([seeds[s]["log"][st]["val_loss"] - configs[baseline][s]["log"][st]["val_loss"] for s in common])
                means.append(ppl_reduction(r["delta"]))
                los.append(ppl_reduction(r["ci_hi"]) if r["n"] > 1 else means[-1])
                his.append(ppl_reduction(r["ci_lo"]) if r["n"] > 1 else means[-1])
                table.append((name, st, means[-1], los[-1], his[-1]))
            ax.plot(steps, means, marker="o", label=name)
            ax.fill_between(steps, los, his, alpha=0.15)
        ax.axhline(0, color="grey", lw=0.8)
        ax.set_xlabel("step")
        ax.set_ylabel(f"perplexity reduction vs {baseline} (%)")
        ax.set_title(f"{setting[0]}: gap to {baseline} (mean over seeds, 95% CI)")
        ax.legend(fontsize=7)
        name = f"fig3_gap_{setting[0]}"
        fig.tight_layout()
        save_figure(fig, os.path.join(out_dir, name + ".png"))
        plt.close(fig)
        _table(os.path.join(out_dir, name + ".csv"), ["config", "step", "ppl_reduction", "ci_lo", "ci_hi"], table)


def figure_planes(rows, out_dir, planes):
    """Fig. 4: gain against the number of extra rotary planes (log scale)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6, 4))
    table = []
    for r in rows:
        extra = planes.get(r["config"], 0) - 16
        if extra <= 0:
            continue
        lo, hi = ppl_reduction(r["ci_hi"]), ppl_reduction(r["ci_lo"])
        ax.errorbar([extra], [r["ppl_reduction"]], yerr=[[r["ppl_reduction"] - lo], [hi - r["ppl_reduction"]]],
                    fmt="o", capsize=3)
        ax.annotate(r["config"], (extra, r["ppl_reduction"]), fontsize=7)
        table.append((r["config"], extra, r["ppl_reduction"], lo, hi))
    ax.set_xscale("log")
    ax.axhline(0, color="grey", lw=0.8)
    ax.set_xlabel("extra rotary planes")
    ax.set_ylabel("perplexity reduction (%)")
    fig.tight_layout()
    save_figure(fig, os.path.join(out_dir, "fig4_planes.png"))
    plt.close(fig)
    _table(os.path.join(out_dir, "fig4_planes.csv"), ["config", "extra_planes", "ppl_reduction", "ci_lo", "ci_hi"], table)


def figure_kinds(rows, out_dir):
    """Fig. 5: perplexity reduction against the baseline on each kind of token, test split;
    marker = mean over seeds, line = 95% CI, shaded row = all tokens."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    by = defaultdict(list)
    for r in rows:
        by[r["setting"]].append(r)
    for setting, rs in by.items():
        fig, ax = plt.subplots(figsize=(6, 0.35 * len(rs) + 1.2))
        table = []
        for y, r in enumerate(rs):
            lo, hi = ppl_reduction(r["ci_hi"]), ppl_reduction(r["ci_lo"])
            if r["kind"] == "all":
                ax.axhspan(y - 0.5, y + 0.5, color="grey", alpha=0.15)
            ax.errorbar([r["ppl_reduction"]], [y], xerr=[[r["ppl_reduction"] - lo], [hi - r["ppl_reduction"]]]
                        if r["n"] > 1 else None, fmt="o", capsize=3, color=f"C{sorted({x['config'] for x in rs}).index(r['config'])}")
            table.append((r["config"], r["kind"], r["ppl_reduction"], lo, hi, r["won"], r["n"]))
        ax.set_yticks(range(len(rs)), [f"{r['config']}: {r['kind']}" for r in rs], fontsize=7)
        ax.axvline(0, color="grey", lw=0.8)
        ax.set_xlabel(f"perplexity reduction vs {rs[0]['baseline'] if 'baseline' in rs[0] else 'baseline'} (%), test")
        ax.set_title(f"{setting[0]}: gain by kind of token")
        fig.tight_layout()
        name = f"fig5_kinds_{setting[0]}"
        save_figure(fig, os.path.join(out_dir, name + ".png"))
        plt.close(fig)
        _table(os.path.join(out_dir, name + ".csv"), ["config", "kind", "ppl_reduction", "ci_lo", "ci_hi", "won", "n"], table)


def figure_columns(runs, out_dir):
    """Fig. 6: attention of the average head from a spreadsheet cell to cells in the same row
    and in the rows above, by column offset (mean over seeds), test split."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    for setting, configs in runs.items():
        curves = {}
        for name, seeds in sorted(configs.items()):
            att = [s["attention"] for s in seeds.values() if "same_row_by_column_offset" in s.get("attention", {})]
            if att:
                curves[name] = {reg: np.mean([a[reg + "_by_column_offset"]["mean_over_heads"] for a in att], 0)
                                for reg in ("same_row", "rows_above")}
                offsets = att[0]["same_row_by_column_offset"]["offsets"]
        if not curves:
            continue
        fig, axes = plt.subplots(1, 2, figsize=(9, 3.5), sharey=True)
        table = []
        for ax, reg in zip(axes, ("same_row", "rows_above")):
            for name, c in curves.items():
                ax.plot(offsets, 100 * c[reg], marker="o", label=name)
                table += [(name, reg, o, 100 * v) for o, v in zip(offsets, c[reg])]
            ax.set_title(reg.replace("_", " "))
            ax.set_xlabel("column offset (key − query)")
        axes[0].set_ylabel("attention (%)")
        axes[0].legend(fontsize=7)
        fig.tight_layout()
        name = f"fig6_columns_{setting[0]}"
        save_figure(fig, os.path.join(out_dir, name + ".png"))
        plt.close(fig)
        _table(os.path.join(out_dir, name + ".csv"), ["config", "region", "column_offset", "attention_pct"], table)


def figure_demo(runs, out_dir):
    """Paper 004 Fig. 1/3 from evaluate.py --demo: Ā under Cond. A (real) and Cond. B (fake-split)
    and B − A for the first model that reads p1, then B − A for every other model (zero for
    flat and sent_axial). Lowest seed of each; the numbers go to fig3_demo.csv."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    demos = {name: seeds[min(s for s in seeds if "demo" in seeds[s].get("eval", {}))]["eval"]["demo"]
             for configs in runs.values() for name, seeds in sorted(configs.items())
             if any("demo" in s.get("eval", {}) for s in seeds.values())}
    if not demos:
        return
    diff = {k: np.array(d["fake_split"]["attention"]) - np.array(d["real"]["attention"]) for k, d in demos.items()}
    lead = next((k for k in demos if np.abs(diff[k]).max() > 0), next(iter(demos)))
    panels = [(f"{lead}: Cond. A (real)", np.array(demos[lead]["real"]["attention"]), "viridis"),
              (f"{lead}: Cond. B (fake-split)", np.array(demos[lead]["fake_split"]["attention"]), "viridis")]
    panels += [(f"{k}: B − A (max |Δ| {np.abs(diff[k]).max():.2g})", diff[k], "coolwarm") for k in [lead] + sorted(set(demos) - {lead})]
    fig, axes = plt.subplots(1, len(panels), figsize=(3.2 * len(panels), 3.4))
    ticks = demos[lead]["tokens"]
    for ax, (title, m, cmap) in zip(np.atleast_1d(axes), panels):
        lim = np.abs(m).max() or 1.0
        ax.imshow(m, cmap=cmap, vmin=-lim if cmap == "coolwarm" else 0, vmax=lim)
        ax.set_title(title, fontsize=8)
        ax.set_xticks(range(len(ticks)), ticks, rotation=90, fontsize=6)
        ax.set_yticks(range(len(ticks)), ticks, fontsize=6)
    fig.tight_layout()
    save_figure(fig, os.path.join(out_dir, "fig3_demo.png"))
    plt.close(fig)
    _table(os.path.join(out_dir, "fig3_demo.csv"), ["config", "d_eff_change_across_boundary", "max_abs_map_change"],
           [[k, d["d_eff_change_across_boundary"], float(np.abs(diff[k]).max())] for k, d in demos.items()])


def save_figure(fig, path):
    with replacing(path) as tmp:
        fig.savefig(tmp, dpi=120)


def _table(path, header, rows):
    with replacing(path) as tmp, open(tmp, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)


# --------------------------------------------------------------------- compression depth ----
# Input: per-document cell accumulators of log attention, each an array (n_docs, D + 1, K + 1)
# over token distance d = 0..D and paragraph displacement Δp1 = 0..K: 'sum', 'sumsq', 'count'
# (evaluate.py writes them; layers and heads pooled).
def distance_fit(S, N):
    """β0, β1 of log Ā = β0 + β1 d by pair-weighted least squares over all cells (Eq. 3.2)."""
    d = np.arange(S.shape[-2])[:, None] * np.ones(S.shape[-1])
    n = N.sum(axis=tuple(range(N.ndim - 2))) if N.ndim > 2 else N
    s = S.sum(axis=tuple(range(S.ndim - 2))) if S.ndim > 2 else S
    w = n.ravel()
    x = d.ravel()
    y = np.divide(s.ravel(), w, out=np.zeros_like(w, dtype=float), where=w > 0)
    X = np.stack([np.ones_like(x), x], 1)
    beta = np.linalg.lstsq(X * np.sqrt(w)[:, None], y * np.sqrt(w), rcond=None)[0]
    return beta


def response(S, Q, N, gate=2000, weights="pairs", d_max=1024):
    """Exact-distance response U(Δp1), Δp1 = 0..K, from pooled cells S, Q, N of shape
    (..., D + 1, K + 1): for each d the contrast mean(d, Δp1) − mean(d, 0), kept where both
    cells hold >= gate pairs, combined across d with pair-count ('pairs'), inverse-variance
    ('ivar') or uniform weights. The linear distance term of D_eff cancels inside each d.
    Returns (U, total weight per Δp1); U is NaN where no d survives the gate."""
    S, Q, N = (a[..., 1:d_max + 1, :].astype(float) for a in (S, Q, N))   # d >= 1
    mean = np.divide(S, N, out=np.zeros_like(S), where=N > 0)
    var = np.divide(Q, N, out=np.zeros_like(Q), where=N > 0) - mean ** 2
    contrast = mean - mean[..., :1]
    keep = (N >= gate) & (N[..., :1] >= gate)
    if weights == "pairs":
        w = N
    elif weights == "ivar":
        se2 = np.divide(var, N, out=np.full_like(var, np.inf), where=N > 0) + \
            np.divide(var[..., :1], N[..., :1], out=np.full_like(var[..., :1], np.inf), where=N[..., :1] > 0)
        w = np.divide(1.0, se2, out=np.zeros_like(se2), where=se2 > 0)
    else:
        w = np.ones_like(N)
    w = np.where(keep, w, 0.0)
    tot = w.sum(-2)
    U = np.divide((w * contrast).sum(-2), tot, out=np.full_like(tot, np.nan), where=tot > 0)
    return U, tot


def well(U, tot, degree=2):
    """Weighted polynomial fit to U(Δp1) over Δp1 >= 1 with data; the interior minimum
    (Δp1*, U*) or (nan, nan) when the fit is monotonic / has no minimum inside the range."""
    k = np.arange(U.shape[-1], dtype=float)
    ok = ~np.isnan(U) & (k >= 1) & (tot > 0)
    if ok.sum() < degree + 1:
        return float("nan"), float("nan")
    c = np.polyfit(k[ok], U[ok], degree, w=np.sqrt(tot[ok] / tot[ok].max()))
    lo, hi = k[ok].min(), k[ok].max()
    roots = np.roots(np.polyder(c))
    cands = [r.real for r in roots if abs(r.imag) < 1e-9 and lo < r.real < hi and np.polyval(np.polyder(c, 2), r.real) > 0]
    if not cands:
        return float("nan"), float("nan")
    x = min(cands, key=lambda r: np.polyval(c, r))
    return float(x), float(np.polyval(c, x))


def _well2_batch(U, tot):
    """Vectorised degree-2 `well` over a batch of curves (B, K + 1)."""
    k = np.arange(U.shape[-1], dtype=float)
    ok = ~np.isnan(U) & (k >= 1) & (tot > 0)
    w = np.where(ok, tot / np.maximum(tot.max(-1, keepdims=True), 1e-12), 0.0)   # weights (sqrt^2)
    X = np.stack([k ** 2, k, np.ones_like(k)], -1)                                 # (K+1, 3)
    Uz = np.where(ok, U, 0.0)
    A = np.einsum("bk,ki,kj->bij", w, X, X)
    y = np.einsum("bk,ki,bk->bi", w, X, Uz)
    good = ok.sum(-1) >= 3
    A[~good] = np.eye(3)
    c = np.linalg.solve(A, y[..., None])[..., 0]
    a, b, c0 = c[:, 0], c[:, 1], c[:, 2]
    x = -b / np.where(a != 0, 2 * a, np.nan)
    lo = np.where(ok, k, np.inf).min(-1)
    hi = np.where(ok, k, -np.inf).max(-1)
    interior = good & (a > 0) & (x > lo) & (x < hi)
    return np.where(interior, x, np.nan), np.where(interior, a * x ** 2 + b * x + c0, np.nan)


def compression_depth(acc, gate=2000, weights="pairs", degree=2):
    """(Δp1*, U*, U curve) pooled over all documents of one model's accumulators."""
    S, Q, N = (acc[k].sum(0) for k in ("sum", "sumsq", "count"))
    U, tot = response(S, Q, N, gate, weights)
    x, u = well(U, tot, degree)
    return x, u, U


def resample_weights(rng, draws, n):
    """(draws, n) multiplicities of n clusters resampled with replacement, one row per draw."""
    W = np.zeros((draws, n))
    np.add.at(W, (np.arange(draws)[:, None], rng.integers(0, n, size=(draws, n))), 1.0)
    return W


def bootstrap_depth(acc_a, acc_b=None, draws=2000, gate=2000, seed=0, chunk=100):
    """Paired document-cluster bootstrap (App. A.3): each draw resamples documents with
    replacement and applies the same draw to both models. Returns U* draws for A (and B, and
    the gap A − B)."""
    rng = np.random.default_rng(seed)
    n_docs = acc_a["count"].shape[0]
    shape = acc_a["count"].shape[1:]
    flat = lambda acc, k: acc[k].reshape(n_docs, -1).astype(float)
    mats = [[flat(a, k) for k in ("sum", "sumsq", "count")] for a in ([acc_a] + ([acc_b] if acc_b else []))]
    out = [[] for _ in mats]
    for start in range(0, draws, chunk):
        m = min(chunk, draws - start)
        W = resample_weights(rng, m, n_docs)
        for j, (S, Q, N) in enumerate(mats):
            Sb, Qb, Nb = ((W @ X).reshape(m, *shape) for X in (S, Q, N))
            U, tot = response(Sb, Qb, Nb, gate)
            out[j].append(_well2_batch(U, tot)[1])
    res = [np.concatenate(o) for o in out]
    if acc_b:
        res.append(res[0] - res[1])
    return res


def ci(x, level=0.95):
    x = x[~np.isnan(x)]
    if not len(x):
        return float("nan"), float("nan")
    return tuple(np.percentile(x, [50 * (1 - level), 50 * (1 + level)]))


def binned_response(S, N, bins):
    """The superseded estimator (App. A.6): pool all pairs inside each distance bin, contrast
    each Δp1 with the bin's own Δp1 = 0 mean, combine bins by pair count. Kept to show the
    artifact: inside a wide bin the Δp1 groups sit at different typical distances."""
    U = np.zeros(S.shape[-1])
    tot = np.zeros(S.shape[-1])
    lo = 1
    for hi in bins:
        s, n = S[lo:hi + 1].sum(0), N[lo:hi + 1].sum(0)
        mean = np.divide(s, n, out=np.zeros_like(s, dtype=float), where=n > 0)
        U += n * (mean - mean[0])
        tot += n
        lo = hi + 1
    return np.divide(U, tot, out=np.full_like(U, np.nan), where=tot > 0)


def load_acc(path):
    """Cell accumulators of one model; 'a.npz,b.npz' pools seeds scored on the same documents."""
    accs = [np.load(p) for p in path.split(",")]
    return {k: sum(z[k] for z in accs) for k in ("sum", "sumsq", "count")}


def token_gap(run_a, run_b, draws=2000, seed=0, split="test"):
    """Two runs scored on the same tokens (evaluate.py's eval_<split>_tokens.npz), paired token
    by token: mean Δ = a − b nats/token per kind, with a document-cluster bootstrap 95% CI."""
    za, zb = (np.load(os.path.join(r, f"eval_{split}_tokens.npz")) for r in (run_a, run_b))
    if not (np.array_equal(za["record"], zb["record"]) and np.array_equal(za["kind"], zb["kind"])):
        raise SystemExit("error: the two runs were not scored on the same tokens (same data, split, --max_docs)")
    d = za["nll"].astype(float) - zb["nll"].astype(float)
    docs, doc_of = np.unique(za["doc"], return_inverse=True)
    rng = np.random.default_rng(seed)
    W = resample_weights(rng, draws, len(docs))
    out = {}
    kinds = [(n, (za["kind"] & f) > 0) for f, n in trees.KIND_NAMES.items()]
    for name, mask in [("all", np.ones(len(d), bool))] + kinds:
        if not mask.any():
            continue
        s = np.bincount(doc_of[mask], d[mask], len(docs))
        c = np.bincount(doc_of[mask], minlength=len(docs)).astype(float)
        n = W @ c
        boot = np.divide(W @ s, n, out=np.full(draws, np.nan), where=n > 0)   # NaN: no such token drawn
        lo, hi = ci(boot)
        out[name] = {"delta": float(d[mask].mean()), "ci_lo": lo, "ci_hi": hi, "tokens": int(mask.sum()),
                     "documents": int((c > 0).sum())}
    return out


def _label(path):
    """out/code/hrope_axial/seed0/depth_test.npz,... -> 'hrope_axial (3 files)'."""
    parts = path.split(",")
    name = os.path.basename(os.path.dirname(os.path.dirname(os.path.abspath(parts[0])))) or parts[0]
    return f"{name} ({len(parts)} file{'s' if len(parts) > 1 else ''})"


def depth_report(path_a, path_b=None, draws=2000, gates=(200, 1000, 2000, 3000)):
    a = load_acc(path_a)
    b = load_acc(path_b) if path_b else None
    lines = ["| model | gate | Δp1* (deg 2) | U* (deg 2) | Δp1* (deg 3) | U* (deg 3) |", "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for name, acc in [(path_a, a)] + ([(path_b, b)] if b else []):
        for g in gates:
            x2, u2, _ = compression_depth(acc, g, degree=2)
            x3, u3, _ = compression_depth(acc, g, degree=3)
            fmt = lambda v: "no interior minimum" if math.isnan(v) else f"{v:.3f}"
            lines.append(f"| {_label(name)} | {g} | {fmt(x2)} | {fmt(u2)} | {fmt(x3)} | {fmt(u3)} |")
    res = bootstrap_depth(a, b, draws)
    lines.append("")
    lines.append(f"paired document-cluster bootstrap, {draws} draws, gate 2000:")
    names = [_label(path_a)] + ([_label(path_b), "gap (first − second)"] if b else [])
    for n, r in zip(names, res):
        missing = int(np.isnan(r).sum())
        if missing > draws / 2:   # a CI from the few draws that happen to curve would mislead
            lines.append(f"  {n}: not identifiable ({missing} of {draws} draws without an interior minimum)")
        else:
            lo, hi = ci(r)
            lines.append(f"  {n}: U* 95% CI [{lo:.3f}, {hi:.3f}] ({missing} draws without an interior minimum)")
    lines.append("")
    lines.append("response U(Δp1) at gate 2000, Δp1 = 1..8 (NaN: no cell passed the gate):")
    for name, acc in [(path_a, a)] + ([(path_b, b)] if b else []):
        U = compression_depth(acc, 2000)[2]
        lines.append(f"  {_label(name)}: " + " ".join(f"{u:+.3f}" for u in U[1:9]))
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("root", nargs="?", help="out/<corpus> (or out/)")
    ap.add_argument("--baseline", default=None, help="default: seq_only (flat for hRoPE runs)")
    ap.add_argument("--figures", default=None, help="write PNG figures + their numbers here")
    ap.add_argument("--finished", action="store_true", help="only finished runs (final.json): for a study still running")
    ap.add_argument("--depth", nargs="+", metavar="NPZ", help="cell accumulators: model [control]")
    ap.add_argument("--tokens", nargs=2, metavar="RUN", help="pair two runs token by token (evaluate.py npz)")
    ap.add_argument("--draws", type=int, default=2000)
    ap.add_argument("--boundary", metavar="ROOT", help="paper 004 Table 1 from evaluate.py --boundary sums under ROOT")
    ap.add_argument("--split", default="test", help="with --boundary: the split evaluate.py scored")
    ap.add_argument("--hubs", nargs="+", metavar="RUN", help="paper 004 Table 13 from evaluate.py --hubs (runs pooled)")
    ap.add_argument("--paragraphs", nargs="+", metavar="CONFIG_DIR", help="paper 004 Tables 5 and 9 from "
                    "evaluate.py --paragraphs: one out/<corpus>/hrope_axial per corpus, its seeds pooled")
    ap.add_argument("--gate", type=int, default=400, help="with --paragraphs: pairs a baseline cell needs (A.10: 400)")
    ap.add_argument("--embedder", default=None, help="with --paragraphs / --candidates: a local sentence-embedding "
                    "model folder (default: the stand-in embedding)")
    ap.add_argument("--candidates", nargs="+", metavar="DATA", help="paper 004 Table 4 for prepared paragraph "
                    "corpora (candidates.py; no model)")
    args = ap.parse_args(argv)
    if args.hubs:
        print(hub_markdown(hub_table(args.hubs, args.split, draws=args.draws),
                           f"compression depth under hub masking, {len(args.hubs)} run(s) pooled (paper 004 Table 13)"))
        return
    if args.paragraphs:
        print(paragraph_markdown([paragraph_regression(d, args.split, args.gate, args.embedder) for d in args.paragraphs]))
        return
    if args.candidates:
        import candidates
        extra = ["--embedder", args.embedder] if args.embedder else []
        return candidates.main(args.candidates + ["--draws", str(max(args.draws, 1000))] + extra)
    if args.boundary:
        pooled = boundary_pool(args.boundary, args.split)
        if not pooled:
            raise SystemExit(f"error: no boundary_{args.split}.npz under {args.boundary}; run evaluate.py RUN --boundary first")
        print(boundary_markdown(boundary_table(pooled, max(args.draws, 4000)),
                                f"{args.boundary}: normalised boundary effect, seeds pooled, 95% document-cluster "
                                f"bootstrap CIs (paper 004 Table 1)"))
        return
    if args.tokens:
        print(f"### token-paired Δ = {args.tokens[0]} − {args.tokens[1]} (nats/token, document-cluster bootstrap)\n")
        print("| kind | tokens | documents | Δ | 95% CI |\n| --- | ---: | ---: | ---: | --- |")
        for k, r in token_gap(*args.tokens, draws=args.draws).items():
            print(f"| {k} | {r['tokens']} | {r['documents']} | {r['delta']:+.4f} | [{r['ci_lo']:+.4f}, {r['ci_hi']:+.4f}] |")
        return
    if args.depth:
        print(depth_report(args.depth[0], args.depth[1] if len(args.depth) > 1 else None, args.draws))
        return
    if not args.root:
        ap.error("give out/<corpus> or --depth")
    runs = load_runs(args.root, args.finished)
    if not runs:
        raise SystemExit(f"no runs under {args.root}")
    if args.figures:
        os.makedirs(args.figures, exist_ok=True)
    names = {c for s in runs.values() for c in s}
    baseline = args.baseline or ("seq_only" if "seq_only" in names else "flat")
    for metric in ("val", "test"):
        rows = compare(runs, baseline, metric)
        if not rows:
            continue
        by_setting = defaultdict(list)
        for r in rows:
            by_setting[r["setting"]].append(r)
        for setting, rs in by_setting.items():
            corpus, L, E, H, T, steps = setting
            print(markdown(rs, f"{corpus} ({L} layers, d={E}, {H} heads, context {T}, {steps} steps): "
                               f"{metric} Δ vs {baseline} at step {rs[0]['step']}"))
            print()
        if args.figures:
            write_csv(rows, os.path.join(args.figures, f"table_{metric}.csv"))
    kinds = compare_kinds(runs, baseline)
    for setting in sorted({r["setting"] for r in kinds}):
        print(kinds_markdown([r for r in kinds if r["setting"] == setting],
                             f"{setting[0]}: test Δ vs {baseline} by kind of token (Fig. 5)"))
        print()
    intervened = compare_intervened(runs, baseline)
    for setting in sorted({r["setting"] for r in intervened}):
        print(markdown([r for r in intervened if r["setting"] == setting],
                       f"{setting[0]}: test Δ vs {baseline} as it is, with the configuration's structure shuffled or removed"))
        print()
    inter = interventions(runs)
    for setting in sorted({r["setting"] for r in inter}):
        print(interventions_markdown([r for r in inter if r["setting"] == setting and r["kind"] in ("all",) + KEY_KINDS],
                                     f"{setting[0]}: coordinate interventions on the test split (mean over seeds)"))
        print()
    for r in substitution(inter):
        ok, n = substitution_order(runs, r["setting"], r["config"])
        print(f"### {r['setting'][0]}: p1 substitution on {r['config']} (paper 004 Table 2), test nats/token\n\n"
              f"| real | period | rand | const0 | real < period < rand < const0 |\n| ---: | ---: | ---: | ---: | ---: |\n"
              f"| {r['real']:.4f} | {r['period']:.4f} | {r['rand']:.4f} | {r['const0']:.4f} | {ok}/{n} seeds |\n")
    for r in inter:    # the reverse substitution: true p1 fed to a model trained on generated labels
        if r["intervention"] == "real" and r["kind"] == "all":
            print(f"### {r['setting'][0]}: true p1 fed to {r['config']} (paper 004 §4.3 reverse substitution; "
                  f"paper, period_axial: +0.015 to +0.040 nats)\n\n| own coordinate | true p1 | Δ nats/token | "
                  f"higher in |\n| ---: | ---: | ---: | ---: |\n| {r['real']:.4f} | {r['real'] + r['delta']:.4f} | "
                  f"{r['delta']:+.4f} | {r['hurt']}/{r['n']} seeds |\n")
    for t in table12(runs):
        print(table12_markdown(t))
        print()
    for t in table8(runs):
        print(table8_markdown(t))
        print()
    att = compare_attention(runs, baseline)
    for setting in sorted({r["setting"] for r in att}):
        print(attention_markdown([r for r in att if r["setting"] == setting],
                                 f"{setting[0]}: attention shares vs {baseline}, mean over heads (test)"))
        print()
    if args.figures:
        if kinds:
            figure_kinds(kinds, args.figures)
            write_csv_rows(kinds, os.path.join(args.figures, "table_kinds.csv"))
        if inter:
            write_csv_rows(inter, os.path.join(args.figures, "table_interventions.csv"))
        figure_columns(runs, args.figures)
        figure_demo(runs, args.figures)
        from rotary import Rotary
        figure_gap(runs, baseline, args.figures)
        rows = compare(runs, baseline, "val")
        planes = {}
        for r in rows:
            try:
                planes[r["config"]] = max(p for L in Rotary(r["config"], 128, r["setting"][1]).count()[0] for p in L)
            except (ValueError, KeyError):
                pass
        figure_planes(rows, args.figures, planes)
        print(f"figures written to {args.figures}")


if __name__ == "__main__":
    main()
