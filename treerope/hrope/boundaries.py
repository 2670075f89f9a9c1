"""Paragraph boundaries, paper 004 Layer I: does attention follow where the model is told a
paragraph begins? What evaluate.py and analyze.py run for it, in one place:

    fake_merge, fake_split    the boundary interventions (§4.3), among evaluate.py's for every p1 model
    evaluate.py RUN --boundary   per-document sums -> python -m treerope.hrope.boundaries ROOT (or
                                 analyze.py --boundary): Table 1, the normalised boundary effect
                                 (§3.2-3.3, App. A.1-A.2)
    evaluate.py RUN --probe      the same-paragraph probe per layer (App. A.9) -> Table 8 in analyze.py
    evaluate.py RUN --demo       Fig. 1 on one example -> analyze.py --figures draws it

compression.py holds the rest of the paper (compression depth, paragraph regression), hubs.py hub masking.
"""
import argparse
import glob
import os
import warnings

import numpy as np
import torch

from treerope import tokenizer
from treerope.batches import by_length, coords_for, record_docs
from treerope.corpora import paragraphs
from treerope.fields import token_coords
from treerope.files import replacing
from treerope.hrope.compression import MIN_CLUSTERS
from treerope.runs import folder_is_run, read_config
from treerope.settings import Parser, at_least_one


# ---------------------------------------------------------------------------- interventions ----
# Layer I's sites, our reading where §4.3 is silent (REFERENCE.md): both only where p1 is under the C.1 cap
def merge_sites(p, cap):
    """Real paragraph boundaries b of one record's (n, 3) coordinates with p1(b) < cap."""
    p1 = p[:, 0]
    return torch.nonzero((p1[1:] != p1[:-1]) & (p1[1:] < cap)).flatten() + 1


def split_sites(p, cap):
    """Sentence starts s inside a paragraph with p1(s) < cap (so p1 + 1 stays <= cap). Past the cap,
    clipped paragraphs share one p1 and a "sentence start" may be a real paragraph boundary the
    model cannot see."""
    p1, p2 = p[:, 0], p[:, 1]
    return torch.nonzero((p1[1:] == p1[:-1]) & (p2[1:] != p2[:-1]) & (p1[1:] < cap)).flatten() + 1


def fake_merge(b, g):
    """One real paragraph boundary per record removed: from it on, p1 - 1 (the paragraph after it
    takes the p1 of the one before; later paragraphs move down by one)."""
    _move_p1(b, g, merge_sites, -1)


def fake_split(b, g):
    """A new boundary at one sentence start inside a paragraph: p1 + 1 from there on."""
    _move_p1(b, g, split_sites, +1)


def _move_p1(b, g, sites, step):
    b["p"] = b["p"].clone()
    cap = b.get("p_max", [torch.iinfo(torch.int64).max])[0]
    for j, n in enumerate(b["len"].tolist()):
        at = sites(b["p"][j, :n], cap)
        if len(at):
            s = int(at[torch.randint(len(at), (1,), generator=g, device=g.device)])
            b["p"][j, s:n, 0] += step


# --------------------------------------------------------------- normalised boundary effect ----
# Paper 004 §3.2-3.3, App. A.1-A.2 (the reading: boundary_effect), as per-document sums analyze.py resamples
BOUNDARY_SETS = ("within", "para", "sent", "merge_obs", "split_obs", "sent_half", "split_obs_half")


def site_pairs(p, s, level):
    """(a, s, e): the paragraph (level 1) or sentence (level 2) ending at s is [a, s), the one
    starting at s is [s, e), in one record's (n, 3) coordinates (numpy)."""
    key = p[:, :level]
    cuts = np.r_[0, np.flatnonzero((key[1:] != key[:-1]).any(1)) + 1, len(p)]
    k = np.searchsorted(cuts, s)
    return int(cuts[k - 1]), int(s), int(cuts[k + 1])


def half_paragraph_pairs(p, s):
    """(a, s, e): keys from the start of the paragraph holding the sentence start s to s, queries
    from s to its end; beside M_C, the other pair set that satisfies the identities (our reading)."""
    cuts = np.r_[0, np.flatnonzero(p[1:, 0] != p[:-1, 0]) + 1, len(p)]
    k = np.searchsorted(cuts, s, side="right")
    return int(cuts[k - 1]), int(s), int(cuts[k])


def _block(att, a, s, e):
    """(count, Σd, Σy) over keys [a, s) and queries [s, e) of one (n, n) attention."""
    y = np.log(np.maximum(att[s:e, a:s], 1e-30))
    d = np.arange(s, e)[:, None] - np.arange(a, s)[None, :]
    return np.array([y.size, d.sum(), y.sum()], np.float64)


def boundary_sums(A, p, merged, split, cap):
    """One record: condition A's attention (n, n), its coordinates (n, 3), and the attention
    observed after each site's own intervention ({b: (n, n)} fake-merge, {s: (n, n)} fake-split)
    -> (fit[5], sets[7, 3] in BOUNDARY_SETS order, boundaries[k, 3]: A over each M_B(b))."""
    n = A.shape[0]
    i, j = np.tril_indices(n, -1)
    d = (i - j).astype(np.float64)
    y = np.log(np.maximum(A[i, j], 1e-30))
    same = p[i, 0] == p[j, 0]
    fit = [float(len(d)), d.sum(), (d * d).sum(), y.sum(), (d * y).sum()]
    tp = torch.as_tensor(p)
    mb = [site_pairs(p, int(s), 1) for s in merge_sites(tp, cap)]
    mc = [site_pairs(p, int(s), 2) for s in split_sites(tp, cap)]
    mh = [half_paragraph_pairs(p, int(s)) for s in split_sites(tp, cap)]
    bounds = [_block(A, *m) for m in mb]

    def total(blocks):
        return np.sum(blocks, 0) if blocks else np.zeros(3)
    sets = [[same.sum(), d[same].sum(), y[same].sum()], total(bounds), total([_block(A, *m) for m in mc]),
            total([_block(merged[m[1]], *m) for m in mb]), total([_block(split[m[1]], *m) for m in mc]),
            total([_block(A, *m) for m in mh]), total([_block(split[m[1]], *m) for m in mh])]
    return fit, np.asarray(sets, np.float64), bounds


def write_boundary(score, split, ids, cap, path, mb_tokens):
    """Score each record under real p1 and under every site's own intervention (fake-merge at each
    real boundary, fake-split at each sentence start), as copies in micro-batches of one shape
    (condition A padded in), so a model that does not read p1 computes every copy identically
    whatever the kernels (H0(1) exact, not to rounding); save per-document boundary sums.
    score(ids, change=, attention=): evaluate.score; cap: the C.1 cap (p_max[0])."""
    if "p" not in split.a:
        raise SystemExit("error: --boundary needs paragraph coordinates (prepare.py prose/code/webtext)")
    seen = {}     # a first pass for each record's coordinates and the labels a rand/period model reads
    score(ids, attention=lambda r, row, atts: seen.__setitem__(r, (row["p"].numpy(), row.get("p1_read"))))
    docs = record_docs(split, np.arange(len(split.len)))
    uniq = np.unique(docs[ids])
    fit = np.zeros((len(uniq), 5))
    sets = np.zeros((len(uniq), len(BOUNDARY_SETS), 3))
    b_doc, b_sums = [], []
    for r, (p, read) in seen.items():
        tp = torch.as_tensor(p)
        todo = ([(0, 0)] + [(-1, int(s)) for s in merge_sites(tp, cap)]
                + [(+1, int(s)) for s in split_sites(tp, cap)])
        per_batch = max(1, mb_tokens // int(split.len[r]))   # copies in a micro-batch (batches.pack)
        todo += [(0, 0)] * (-len(todo) % per_batch)          # every micro-batch full: one shape
        observed = {0: {}, -1: {}, +1: {}}

        def change(b, g):      # copy k moves p1 from its own site on (the first copy: condition A)
            b["p"] = b["p"].clone()
            for k in range(len(b["rec"])):
                step, s = todo.pop()
                b["p"][k, s:, 0] += step
            if read is not None:   # rand/period_axial read their own labels, the same in every copy
                b["p1_sub"] = torch.full_like(b["pos"], -1)
                b["p1_sub"][:, :len(read)] = read.to(b["pos"].device)

        def keep(_, row, atts):
            moved = torch.nonzero(row["p"][:, 0] - tp[:, 0]).flatten()
            s = int(moved[0]) if len(moved) else 0
            observed[int(row["p"][s, 0] - tp[s, 0])][s] = atts.mean((0, 1)).numpy()
        score(np.full(len(todo), r), change=change, attention=keep)
        f, st, bs = boundary_sums(observed[0][0], p, observed[-1], observed[+1], cap)
        u = np.searchsorted(uniq, docs[r])
        fit[u] += f
        sets[u] += st
        b_doc += [u] * len(bs)
        b_sums += bs
    with replacing(path) as tmp:
        np.savez_compressed(tmp, doc=uniq, fit=fit, sets=sets, b_doc=np.asarray(b_doc, np.int64),
                            b_sums=np.asarray(b_sums, np.float64).reshape(-1, 3))


# python -m treerope.hrope.boundaries (analyze.py --boundary): Table 1 from those sums
def boundary_pool(root, split="test"):
    """{config: (fit[D, 5], sets[D, 7, 3], b_doc[k], b_sums[k, 3])} from evaluate.py --boundary,
    the seeds of a configuration pooled: sums added per document (the same test documents), the
    real boundaries of every seed kept (App. A.2: three seeds pooled per corpus)."""
    out = {}
    for path in sorted(glob.glob(os.path.join(root, "**", f"boundary_{split}.npz"), recursive=True)):
        r = read_config(os.path.dirname(path), "delete that run's folder")["run"]
        folder_is_run(os.path.dirname(path), r)   # a copied seed would be pooled twice
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
    every mean recomputed from the same weighted documents (App. A.2). Returns {name: (R,)};
    beta_para is β_unm(M_B), 1 by construction (kept so a test can see it stay 1).

    The reading (§3.2-3.3, App. A.1-A.2), the one where all of the paper's identities hold:
     - Ā(i, j): attention averaged over layers and heads; y = log Ā on causal pairs j < i (d = i - j).
     - D_eff = y - b0 - b1 d: one line per model fitted by least squares on every causal pair of the
       unmanipulated condition A (real p1) of the scored records.
     - M_B(b): pairs with the key in the paragraph ending at the site b and the query in the one
       starting there; M_C(s): the same for the sentences around s (our reading: the half-paragraph
       set, keys from the paragraph start to s, satisfies the identities too: Δ_C_half beside Δ_C).
       Each site is intervened on alone (its own forward pass), its observed y read on its own pairs.
     - anchors from condition A: within = every Δp1 = 0 pair; para = ∪ M_B (so β_A^para ≡ 1 in every
       resample, A.2); β_A^sent = β(∪ M_C).
     - β(S) = (mean D_eff over S - within) / (para - within). Δ = β_observed - β_unmanipulated (§3.3)
       on the same pairs is then Δ_B = β_B - 1 and Δ_C = β_C - β_A^sent (A.2), β_observed = 1 + Δ_B
       (§4.2), and exactly 0 for a model that does not read p1 (H0(1)).
     - C_pct: β_C's percentile among the real boundaries, each with β_A over its own M_B(b).
    The sums per document: count, Σd, Σy; Σd², Σdy for the fit."""
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
        below = (beta_b < beta[:, 4:5]) + 0.5 * (beta_b == beta[:, 4:5])
        c_pct = 100 * (wb * below).sum(1) / wb.sum(1)
    return {"delta_B": beta[:, 3] - beta[:, 1], "delta_C": beta[:, 4] - beta[:, 2], "beta_B": beta[:, 3],
            "beta_C": beta[:, 4], "beta_sent": beta[:, 2], "beta_para": beta[:, 1], "C_pct": c_pct,
            "delta_C_half": beta[:, 6] - beta[:, 5]}


def boundary_table(pooled, draws=4000, seed=0):
    """Point estimates and 95% document-cluster bootstrap CIs per configuration. Δ_C's CI is
    A.2's [lo(β_C) - hi(β_A^sent), hi(β_C) - lo(β_A^sent)]; the percentile interval of the
    per-draw Δ_C is kept beside it (delta_C_draw_lo/hi)."""
    rows = []
    rng = np.random.default_rng(seed)
    for config, (fit, sets, b_doc, b_sums) in sorted(pooled.items()):
        D = len(fit)
        point = {k: float(v[0])
                 for k, v in boundary_effect(fit, sets, b_doc, b_sums, np.ones((1, D))).items()}
        boot = {k: [] for k in point}
        for start in range(0, draws, 500):     # chunks keep the (draws x boundaries) matrix small
            W = rng.multinomial(D, np.full(D, 1 / D), size=min(500, draws - start)).astype(np.float64)
            for k, v in boundary_effect(fit, sets, b_doc, b_sums, W).items():
                boot[k].append(v)
        row = {"config": config, "documents": D, "boundaries": len(b_doc),
               "sentence_sites_pairs": int(sets[:, 2, 0].sum()),
               "estimable": bool(sets[:, 1, 0].sum() and sets[:, 2, 0].sum()),
               "identifiable": D >= MIN_CLUSTERS}
        for k, v in point.items():
            with warnings.catch_warnings():         # a draw without boundaries gives NaN: left out
                warnings.simplefilter("ignore", RuntimeWarning)
                lo, hi = np.nanpercentile(np.concatenate(boot[k]), [2.5, 97.5])
            row[k], row[k + "_lo"], row[k + "_hi"] = v, float(lo), float(hi)
        row["delta_C_draw_lo"], row["delta_C_draw_hi"] = row["delta_C_lo"], row["delta_C_hi"]
        row["delta_C_lo"] = row["beta_C_lo"] - row["beta_sent_hi"]
        row["delta_C_hi"] = row["beta_C_hi"] - row["beta_sent_lo"]
        rows.append(row)
    return rows


def boundary_markdown(rows, title):
    def f(r, k, fmt="+.3f"):
        return f"{r[k]:{fmt}} [{r[k + '_lo']:{fmt}}, {r[k + '_hi']:{fmt}}]"
    lines = [f"### {title}", "",
             "| model | docs | boundaries | Δ_B = β_B − 1 | Δ_C = β_C − β_A^sent (A.2 CI) | Δ_C per-draw CI "
             "| β_A^sent | β_C | C_pct % | H0(1) Δ=0 | H0(2) β_C=1 | Δ_C, half-paragraph set (per-draw CI) |",
             "| --- | ---: | ---: | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        if not r["estimable"]:
            lines.append(f"| {r['config']} | {r['documents']} | {r['boundaries']} | not estimable: the "
                         "scored records hold no real paragraph boundary or no sentence start inside a "
                         "paragraph | | | | | | | | |")
            continue
        if not r.get("identifiable", True):
            lines.append(f"| {r['config']} | {r['documents']} | {r['boundaries']} | {r['delta_B']:+.3f}, "
                         f"not identifiable: {r['documents']} document(s), a document-cluster bootstrap "
                         f"needs at least {MIN_CLUSTERS} | | | | | | | | |")
            continue
        exact = r["delta_B"] == 0 and r["delta_C"] == 0
        h1 = "holds exactly" if exact else ("rejected" if not (r["delta_B_lo"] <= 0 <= r["delta_B_hi"]
                                                             and r["delta_C_lo"] <= 0 <= r["delta_C_hi"])
                                            else "not rejected")
        h2 = "—" if exact else ("rejected" if not r["beta_C_lo"] <= 1 <= r["beta_C_hi"] else "not rejected")
        lines.append(f"| {r['config']} | {r['documents']} | {r['boundaries']} | {f(r, 'delta_B')} | "
                     f"{f(r, 'delta_C')} | [{r['delta_C_draw_lo']:+.3f}, {r['delta_C_draw_hi']:+.3f}] | "
                     f"{f(r, 'beta_sent')} | {f(r, 'beta_C', '.3f')} | {f(r, 'C_pct', '.1f')} | "
                     f"{h1} | {h2} | {f(r, 'delta_C_half')} |")
    return "\n".join(lines)


# --------------------------------------------------------------------- same-paragraph probe ----
def logistic_probe(Xtr, ytr, Xte, yte, l2=1e-3, steps=100):
    """Paper 004 App. A.9: a logistic-regression probe on standardised features, classes
    weighted to balance (the boundary class is rare), fitted by L-BFGS; scored on held-out
    documents by balanced accuracy and macro-F1 at p = 0.5, and AUROC."""
    mu, sd = Xtr.mean(0), Xtr.std(0) + 1e-6
    Xtr, Xte = (Xtr - mu) / sd, (Xte - mu) / sd
    w = torch.zeros(Xtr.shape[1], requires_grad=True)
    b = torch.zeros(1, requires_grad=True)
    pos = ytr.float().mean().clamp(1e-6, 1 - 1e-6)
    weight = torch.where(ytr > 0, 0.5 / pos, 0.5 / (1 - pos))
    opt = torch.optim.LBFGS([w, b], max_iter=steps, line_search_fn="strong_wolfe")

    def loss():
        opt.zero_grad()
        out = (torch.nn.functional.binary_cross_entropy_with_logits(Xtr @ w + b, ytr.float(), weight=weight)
               + l2 * (w * w).sum())
        out.backward()
        return out
    opt.step(loss)
    with torch.no_grad():
        score = Xte @ w + b
    pred, y = score > 0, yte > 0
    tpr, tnr = (pred & y).sum() / max(y.sum(), 1), (~pred & ~y).sum() / max((~y).sum(), 1)
    f1 = [2 * (pred == c)[y == c].sum() / max((pred == c).sum() + (y == c).sum(), 1) for c in (True, False)]
    ranks = torch.empty(len(score))
    ranks[score.argsort()] = torch.arange(1, len(score) + 1, dtype=torch.float32)
    n_pos, n_neg = int(y.sum()), int((~y).sum())
    auroc = (ranks[y].sum() - n_pos * (n_pos + 1) / 2) / max(n_pos * n_neg, 1)
    return {"balanced_accuracy": float((tpr + tnr) / 2), "macro_f1": float(sum(f1) / 2),
            "auroc": float(auroc)}


@torch.no_grad()
def probe(model, split, ids, cfg, corpus, test_share=0.3):
    """Residual stream after each layer -> per-layer probe of 'token i starts a new paragraph'
    (p1(i) != p1(i - 1)), train/test split by document (no document in both)."""
    if "p" not in split.a:
        raise SystemExit("error: --probe needs paragraph coordinates (prepare.py prose/code)")
    hidden = []
    hooks = [blk.register_forward_hook(lambda m, i, o: hidden.append(o[0])) for blk in model.blocks]
    feats, labels, docs = [], [], []
    all_docs = record_docs(split, np.arange(len(split.len)))
    try:
        for group in by_length(split.len[ids], cfg["mb_tokens"]):
            rec = ids[group]
            b = split.batch(rec, cfg["device"])
            hidden.clear()
            model(b["tokens"],
                  coords_for(model, b, corpus, torch.Generator(device=cfg["device"]).manual_seed(0)))
            H = torch.stack(hidden, 1)                                    # (B, L, T, E)
            for j, r in enumerate(rec):
                n = int(split.len[r])
                p1 = b["p"][j, :n, 0]
                feats.append(H[j, :, 1:n].float().cpu())
                labels.append((p1[1:] != p1[:-1]).cpu())
                docs.append(np.full(n - 1, all_docs[r]))
    finally:
        for h in hooks:
            h.remove()
    X, y, docs = torch.cat(feats, 1), torch.cat(labels), np.concatenate(docs)
    uniq = np.unique(docs)
    if len(uniq) < MIN_CLUSTERS:
        held = len(np.unique(all_docs))
        raise SystemExit(f"error: --probe scored {len(uniq)} document(s) of the split's {held}; a probe "
                         f"split by document needs at least {MIN_CLUSTERS}" + (
                             " (raise --docs or --max_docs)" if held >= MIN_CLUSTERS else
                             ": this split is too small to say (prepare more documents)"))
    test_docs = np.random.default_rng(0).permutation(uniq)[:max(1, int(round(test_share * len(uniq))))]
    te = torch.from_numpy(np.isin(docs, test_docs))
    if y[~te].sum() == 0 or y[te].sum() == 0:
        raise SystemExit("error: --probe found no paragraph boundary in the training or test documents; "
                         "score more (--docs, --max_docs)")
    layers = [{"layer": layer, **logistic_probe(X[layer][~te], y[~te], X[layer][te], y[te])}
              for layer in range(X.shape[0])]
    return {"layers": layers, "boundary_share": float(y.float().mean()),
            "train_documents": len(uniq) - len(test_docs), "test_documents": len(test_docs),
            "tokens": int(len(y))}


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

        def bacc(p):
            return np.array([layer["balanced_accuracy"] for layer in p["layers"]])
        rows = {c: np.mean([bacc(p) for p in ps.values()], 0) for c, ps in sorted(probes.items())}
        higher = None
        if {"hrope_axial", "rand_axial"} <= set(probes):
            common = sorted(set(probes["hrope_axial"]) & set(probes["rand_axial"]))
            higher = (sum(bacc(probes["hrope_axial"][s]) > bacc(probes["rand_axial"][s]) for s in common),
                      len(common))
        out.append({"setting": setting, "rows": rows, "higher": higher})
    return out


def table8_markdown(t):
    L = len(next(iter(t["rows"].values())))
    lines = [f"### {t['setting'][0]}: same-paragraph probe, balanced accuracy by layer, mean over seeds "
             "(paper 004 Table 8)", "", "| model | " + " | ".join(f"L{layer}" for layer in range(L)) + " |",
             "| --- |" + " ---: |" * L]
    lines += [f"| {c} | " + " | ".join(f"{v:.3f}" for v in vals) + " |" for c, vals in t["rows"].items()]
    if t["higher"]:
        k, n = t["higher"]
        lines.append("| hrope_axial > rand_axial (seeds) | " + " | ".join(f"{int(x)}/{n}" for x in k) + " |")
    return "\n".join(lines)


# --------------------------------------------------------------------- one example (Fig. 1) ----
def demo(model, data_dir, corpus, text="This is what I love. You are the reason."):
    """Paper 004 Fig. 1 and Fig. 3, one example: Cond. A (real: one paragraph) and Cond. B
    (fake-split: the second sentence a paragraph of its own); tokens identical, only p1 changes.
    Reports the attention from the second sentence's first token back to the first sentence,
    and the change of D_eff across the boundary: the mean over the pairs that straddle it (query
    in the second sentence, key in the first) of log Ā under B minus under A. One line serves both
    conditions, so the line cancels (a raw change, as the paper says of its 3.105). The Ā maps
    (mean over layers and heads) are kept for analyze.py's figure."""
    enc = tokenizer.load(data_dir)
    doc = paragraphs.paragraphs_doc([text])
    ids = np.asarray(enc.encode_ordinary(doc.text), np.int64)
    c = token_coords(doc, ids, tokenizer.token_lengths(enc))
    b = {k: torch.as_tensor(np.asarray(v, np.int64))[None] for k, v in c.items()
         if k in ("pos", "p", "path", "depth")}
    b.update(corpus)
    second = int(np.flatnonzero(c["p"][:, 1] == 1)[0])
    out = {"tokens": [enc.decode([int(t)]) for t in ids], "query": second}
    maps = {}
    for cond in ("real", "fake_split"):
        bb = dict(b)
        if cond == "fake_split":
            bb["p"] = b["p"].clone()
            bb["p"][0, second:, 0] += 1
        with torch.no_grad():   # seeded, the same in A and B: rand_axial's labels then differ by nothing
            C = model.rotary.coords(bb, torch.Generator().manual_seed(0))
            _, _, atts = model(torch.as_tensor(ids)[None], C, return_attn=True)
        A = torch.stack([a[0] for a in atts]).mean((0, 1))       # Ā over layers and heads
        maps[cond] = A
        out[cond] = {"to_first_sentence": float(A[second, :second].sum()), "attention": A.tolist()}
    n = len(ids)
    straddle = (torch.arange(n)[:, None] >= second) & (torch.arange(n)[None, :] < second)
    log = {k: v.clamp_min(1e-30).log() for k, v in maps.items()}
    out["d_eff_change_across_boundary"] = float((log["fake_split"] - log["real"])[straddle].mean())
    return out


def main(argv=None):
    """Table 1 from the sums evaluate.py RUN --boundary wrote under a folder of runs."""
    ap = Parser(prog="python -m treerope.hrope.boundaries", description=(
        "Paper 004 Table 1 (Layer I): the normalised boundary effect, seeds pooled, from the sums "
        "`evaluate.py RUN --boundary` writes."),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("root", help="a folder of runs, e.g. out/code")
    ap.add_argument("--split", default="test", help="the split evaluate.py scored")
    ap.add_argument("--draws", type=at_least_one, default=4000, help="document-cluster bootstrap draws")
    args = ap.parse_args(argv)
    pooled = boundary_pool(args.root, args.split)
    if not pooled:
        raise SystemExit(f"error: no boundary_{args.split}.npz under {args.root}; "
                         "run evaluate.py RUN --boundary first")
    rows = boundary_table(pooled, args.draws)
    print(boundary_markdown(rows, f"{args.root}: normalised boundary effect, seeds pooled, "
                                  f"95% document-cluster bootstrap CIs (paper 004 Table 1)"))
    return rows


if __name__ == "__main__":
    main()
