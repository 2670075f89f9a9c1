"""Compression depth, paper 004 Layers II-III: how much less attention crosses a paragraph boundary
than the distance alone predicts, at which displacement Δp1 the compression is deepest (U*), and
what carries it. What evaluate.py and analyze.py run for it, in one place:

    evaluate.py RUN --attention   per-document (d, Δp1) cells of log attention (depth_<split>.npz)
    python -m treerope.hrope.compression A B   (or analyze.py --depth A B)
                                  U* by the exact-distance estimator, paired document bootstrap
                                  (§5.1, App. A.3, A.6), Δp1 by the labels each model reads
                                  (depth_read_<split>.npz where it has one), the true p1 beside;
                                  then App. A.6/A.7's diagnostics, with --figures Fig. 2 and the
                                  A.6 heatmaps (drawn below)
    evaluate.py RUN --hub_contributions, then --hubs; python -m treerope.hrope.hubs RUN ...
                                  Table 13 (App. E): hubs.py, on these cells
    evaluate.py RUN --paragraphs  per-paragraph sums -> python -m treerope.hrope.paragraph_depth:
                                  Tables 5 and 9

boundaries.py holds Layer I: the boundary interventions, Table 1, the probe and the demo.
"""
import argparse
import math
import os

import numpy as np
import torch

from treerope.figures import pyplot, save_figure, write_table
from treerope.files import writable
from treerope.settings import Parser, at_least_one
from treerope.statistics import ci, resample_weights

# ------------------------------------------------------------------------------------ cells ----
D_MAX, K_MAX = 1024, 32        # compression-depth cells: token distance d <= 1,024, Δp1 <= 32


def depth_cells(att, p1, n_d=D_MAX + 1, n_k=K_MAX + 1, exclude=None):
    """Per-record (d, Δp1) cells of log Ā, Ā = attention averaged over layers and heads
    (paper 004 §3.2, §5.1): sums, sums of squares and pair counts of shape (n_d, n_k). Pairs in
    `exclude` (n, n; blocked by hub masking, attention exactly 0) are left out."""
    T = att.shape[-1]
    logA = att.float().mean((0, 1)).clamp_min(1e-30).log()
    i, j = torch.tril_indices(T, T, -1)                                  # key before query, d >= 1
    d, k = (i - j), (p1[i] - p1[j])
    keep = (d < n_d) & (k >= 0) & (k < n_k)
    if exclude is not None:
        keep &= ~exclude[i, j]
    cell = (d * n_k + k)[keep]
    v = logA[i, j][keep].double()
    size = n_d * n_k
    out = [torch.bincount(cell, v, size), torch.bincount(cell, v * v, size),
           torch.bincount(cell, minlength=size)]
    return [x.reshape(n_d, n_k).numpy() for x in out]


def document_cells(by_record, docs, uniq):
    """Per-record (sum, sumsq, count) depth cells added up per document (bootstrap clusters):
    {'sum', 'sumsq', 'count'} of shape (documents, n_d, n_k); docs[r] is record r's document."""
    shape = next(iter(by_record.values()))[0].shape
    acc = {k: np.zeros((len(uniq),) + shape) for k in ("sum", "sumsq", "count")}
    for r, cells in by_record.items():
        u = np.searchsorted(uniq, docs[r])
        for k, v in zip(("sum", "sumsq", "count"), cells):
            acc[k][u] += v
    return acc


# --------------------------------------------------------------------- compression depth U* ----
# Input: per-document accumulators 'sum', 'sumsq', 'count' of log attention (evaluate.py; layers and
# heads pooled), each (n_docs, D + 1, K + 1) over token distance d = 0..D and Δp1 = 0..K.
def cell_contrast(S, Q, N, gate=2000, d_max=1024):
    """The exact-distance estimator cell by cell (App. A.6), arrays (..., d_max, K + 1) over
    d = 1..d_max: pair counts, mean and variance of log Ā, the contrast mean(d, Δp1) − mean(d, 0)
    with the same-d baseline, and whether both cells hold >= gate pairs."""
    S, Q, N = (a[..., 1:d_max + 1, :].astype(float) for a in (S, Q, N))   # d >= 1
    mean = np.divide(S, N, out=np.zeros_like(S), where=N > 0)
    var = np.divide(Q, N, out=np.zeros_like(Q), where=N > 0) - mean ** 2
    return N, mean, var, mean - mean[..., :1], (N >= gate) & (N[..., :1] >= gate)


def response(S, Q, N, gate=2000, weights="pairs", d_max=1024):
    """Exact-distance response U(Δp1), Δp1 = 0..K, from pooled cells S, Q, N of shape
    (..., D + 1, K + 1): for each d the contrast mean(d, Δp1) − mean(d, 0), kept where both
    cells hold >= gate pairs, combined across d with pair-count ('pairs'), inverse-variance
    ('ivar') or uniform weights. The linear distance term of D_eff cancels inside each d.
    Returns (U, total weight per Δp1); U is NaN where no d survives the gate."""
    N, mean, var, contrast, keep = cell_contrast(S, Q, N, gate, d_max)
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


def fit(U, tot, degree=2):
    """Weighted polynomial fit to U(Δp1) over Δp1 >= 1 with data (App. A.3): coefficients,
    highest power first, and the Δp1 range fitted; None with fewer points than coefficients.
    Our reading: Δp1 = 0 (U = 0 by construction) left out, each Δp1 weighted by its pair count."""
    k = np.arange(U.shape[-1], dtype=float)
    ok = ~np.isnan(U) & (k >= 1) & (tot > 0)
    if ok.sum() < degree + 1:
        return None
    return np.polyfit(k[ok], U[ok], degree, w=np.sqrt(tot[ok] / tot[ok].max())), k[ok].min(), k[ok].max()


def well(U, tot, degree=2):
    """The interior minimum (Δp1*, U*) of the fitted curve, or (nan, nan) when the fit is
    monotonic / has no minimum inside the range."""
    f = fit(U, tot, degree)
    if f is None:
        return float("nan"), float("nan")
    c, lo, hi = f
    roots = np.roots(np.polyder(c))
    cands = [r.real for r in roots
             if abs(r.imag) < 1e-9 and lo < r.real < hi and np.polyval(np.polyder(c, 2), r.real) > 0]
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


# Fewer documents than this and a document-cluster bootstrap has no spread to resample (our reading:
# one document gives a zero-width interval): its intervals and verdicts are "not identifiable"
MIN_CLUSTERS = 5


def bootstrap_depth(acc_a, acc_b=None, draws=2000, gate=2000, seed=0, chunk=100):
    """Paired document-cluster bootstrap (App. A.3): each draw resamples documents with
    replacement and applies the same draw to both models. Returns U* draws for A (and B, and
    the gap A − B)."""
    rng = np.random.default_rng(seed)
    n_docs = acc_a["count"].shape[0]
    shape = acc_a["count"].shape[1:]

    def flat(acc, k):
        return acc[k].reshape(n_docs, -1).astype(float)
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


def run_label(path):
    """out/code/hrope_axial/seed0/depth_test.npz,... -> 'hrope_axial (3 files)'."""
    parts = path.split(",")
    name = os.path.basename(os.path.dirname(os.path.dirname(os.path.abspath(parts[0])))) or parts[0]
    return f"{name} ({len(parts)} file{'s' if len(parts) > 1 else ''})"


def read_paths(path):
    """The cells of a model's depth_<split>.npz files (Δp1 by the true p1) binned by the labels its
    p1 channel read instead: the depth_read_<split>.npz beside each, which evaluate.py writes for
    period_axial and rand_axial. Without one the model reads the true p1 (or no p1) and the two
    binnings coincide: the file itself."""
    out = []
    for p in path.split(","):
        head, name = os.path.split(p)
        read = os.path.join(head, name.replace("depth_", "depth_read_", 1))
        out.append(read if name.startswith("depth_") and os.path.exists(read) else p)
    if len({"depth_read_" in os.path.basename(p) for p in out}) > 1:
        raise SystemExit(f"error: some of {path} have labels-read cells (depth_read_*.npz) and some not; "
                         "evaluate them alike")
    return ",".join(out)


def _binning(path):
    """How a model's cells bin Δp1, for the table's heading."""
    if "depth_read_" not in path:
        return "true p1 (the labels it reads, if any)"
    k = sorted({int(z["label_draws"]) if "label_draws" in z.files else 1
                for z in map(np.load, path.split(","))})
    return f"labels read, mean over {'/'.join(map(str, k))} draw{'s' if k[-1] > 1 else ''} of them"


# Table 7's gates, and 1,500, at which A.6/A.7 also report WikiText-2's Δp1* (2.70)
GATES = (200, 1000, 1500, 2000, 3000)


def depth_report(path_a, path_b=None, draws=2000, gates=GATES):
    """Table 3 (§5.2): U* of one model, or two paired on the same documents. Δp1 is binned by the
    labels each model's p1 channel reads, this repository's reading (REFERENCE.md): the paper does
    not say which Δp1 bins rand_axial, and §5.2's "any systematic response can only reflect a
    generic reaction to a density-matched axial coordinate" is a response to the coordinate it
    reads. The true-p1 binning follows, where it differs, as a secondary table."""
    true = [p for p in (path_a, path_b) if p]
    read = [read_paths(p) for p in true]
    lines = ["Table 3, Δp1 binned by the labels each model reads (this repository's reading):"]
    lines += [f"  {run_label(p)}: {_binning(p)}" for p in read] + [""]
    lines += _depth_table(read, draws, gates)
    if read == true:
        lines += ["", "every model reads the true p1 (or none): binned by the true p1 the table is the same"]
    else:
        lines += (["", "secondary, Δp1 binned by the true p1 (the same attention):", ""]
                  + _depth_table(true, draws, gates))
    return "\n".join(lines)


def _depth_table(paths, draws, gates):
    """Gate-robustness table, paired bootstrap CIs and response curves of one or two models."""
    accs = [load_acc(p) for p in paths]
    lines = ["| model | gate | Δp1* (deg 2) | U* (deg 2) | Δp1* (deg 3) | U* (deg 3) |",
             "| --- | ---: | ---: | ---: | ---: | ---: |"]

    def fmt(v):
        return "no interior minimum" if math.isnan(v) else f"{v:.3f}"
    for name, acc in zip(paths, accs):
        for g in gates:
            x2, u2, _ = compression_depth(acc, g, degree=2)
            x3, u3, _ = compression_depth(acc, g, degree=3)
            lines.append(f"| {run_label(name)} | {g} | {fmt(x2)} | {fmt(u2)} | {fmt(x3)} | {fmt(u3)} |")
    res = bootstrap_depth(*accs, draws=draws)
    lines.append("")
    lines.append(f"paired document-cluster bootstrap, {draws} draws, gate 2000:")
    names = [run_label(p) for p in paths] + (["gap (first − second)"] if len(paths) > 1 else [])
    documents = accs[0]["count"].shape[0]
    for n, r in zip(names, res):
        missing = int(np.isnan(r).sum())
        if documents < MIN_CLUSTERS:
            lines.append(f"  {n}: not identifiable ({documents} document(s); a document-cluster bootstrap "
                         f"needs at least {MIN_CLUSTERS})")
        elif missing > draws / 2:   # a CI from the few draws that happen to curve would mislead
            lines.append(f"  {n}: not identifiable ({missing} of {draws} draws without an interior minimum)")
        else:
            lo, hi = ci(r)
            lines.append(f"  {n}: U* 95% CI [{lo:.3f}, {hi:.3f}] "
                         f"({missing} draws without an interior minimum)")
    lines.append("")
    lines.append("response U(Δp1) at gate 2000, Δp1 = 1..8 (NaN: no cell passed the gate):")
    for name, acc in zip(paths, accs):
        U = compression_depth(acc, 2000)[2]
        lines.append(f"  {run_label(name)}: " + " ".join(f"{u:+.3f}" for u in U[1:9]))
    return lines


# ------------------------------------------------- the estimator's diagnostics (A.6, A.7) ----
# App. A.6's superseded distance bins "d <= 64, d <= 128, d <= 256", read as disjoint (1-64, 65-128,
# 129-256): WikiText-2's mean d of 167.0 and 184.5 in the d <= 256 bin fit only its upper half
A6_BINS = (64, 128, 256)
FAR_D = 400                # A.7 counts the Δp1 = 0 pairs past d = 400 (WikiText-2: 4,673)


def baseline_counts(N, gates=GATES, bins=A6_BINS, far=FAR_D):
    """The Δp1 = 0 pair counts behind A.7's account of the drift: the baseline cells a higher gate
    keeps are confined to smaller d. From pooled counts N (D + 1, K + 1): pairs in all, per
    distance range, past d = `far`, the largest d holding one, and per gate the baseline cells
    (one per d) passing it and the largest d among them (0: none)."""
    n = N[:, 0]
    d = np.arange(len(n))
    edges = [1] + [b + 1 for b in bins if b + 1 < len(n)] + [len(n)]
    return {"total": int(n.sum()),
            "ranges": [(lo, hi - 1, int(n[lo:hi].sum())) for lo, hi in zip(edges, edges[1:])],
            "far": int(n[far + 1:].sum()), "largest": int(d[n > 0].max(initial=0)),
            "gates": {g: (int((n[1:] >= g).sum()), int(d[1:][n[1:] >= g].max(initial=0))) for g in gates}}


def spurious_cells(S, Q, N, gate):
    """App. A.6's spurious cells at one gate. The paper counts "spurious positive-U cells" in the
    (d, Δp1) heatmap (Code: 32 at n >= 200, 12 at 1,000, 0 at 2,000) in corpora that compress at
    every Δp1; our reading: a cell (d, Δp1 >= 1) passing the gate whose contrast is positive at a
    Δp1 where the pooled U(Δp1) is negative. Returns (spurious cells, gated cells at those Δp1,
    the share of those cells' pair-count weight the spurious ones carry)."""
    n, _, _, contrast, keep = cell_contrast(S, Q, N, gate)
    U = response(S, Q, N, gate)[0]
    at = keep & (np.nan_to_num(U) < 0)
    bad = at & (contrast > 0)
    w = n[at].sum()
    return int(bad.sum()), int(at.sum()), float(n[bad].sum() / w) if w else float("nan")


def mean_d_mismatch(S, Q, N, bins=A6_BINS, ks=(1, 2, 3), gate=2000):
    """App. A.6's artifact measured: inside each distance bin, the mean d of the Δp1 = k pairs
    against that of the Δp1 = 0 pairs (WikiText-2, d <= 256, Δp1 = 1: 184.5 against 167.0), the
    contrast of the two groups pooled inside the bin (the superseded estimator), and the
    exact-distance U over the same distances. Rows (lo, hi, k, mean d at Δp1 = 0, mean d at k,
    bin-pooled U, exact U); NaN where a group is empty or no cell passes the gate."""
    d = np.arange(N.shape[0], dtype=float)
    rows, lo = [], 1
    for hi in bins:
        hi = min(hi, N.shape[0] - 1)
        if lo > hi:
            break
        n, s = N[lo:hi + 1].sum(0), S[lo:hi + 1].sum(0)
        mean_d = np.divide(d[lo:hi + 1] @ N[lo:hi + 1], n, out=np.full(len(n), np.nan), where=n > 0)
        mean = np.divide(s, n, out=np.full(len(n), np.nan), where=n > 0)
        inside = N.copy()
        inside[:lo] = 0                              # response() reads d = 1..d_max: keep lo..hi
        exact = response(S, Q, inside, gate, d_max=hi)[0]
        rows += [(lo, hi, k, mean_d[0], mean_d[k], mean[k] - mean[0], exact[k]) for k in ks if k < len(n)]
        lo = hi + 1
    return rows


def weighting_schemes(acc, gates=GATES):
    """App. A.6's comparison of the weights combining the per-d contrasts: U* (degree-2 vertex)
    under scheme A (pair count), B (inverse variance), C (uniform in d), per gate."""
    return {g: [compression_depth(acc, g, w)[1] for w in ("pairs", "ivar", "uniform")] for g in gates}


def diagnostics_report(path, gates=GATES, reference=2000):
    """The A.6/A.7 diagnostics of one model's cells (seeds pooled), as printed text."""
    acc = load_acc(path)
    S, Q, N = (acc[k].sum(0) for k in ("sum", "sumsq", "count"))

    def num(v, f="+.3f"):
        return "—" if math.isnan(v) else format(v, f)
    c = baseline_counts(N, gates)
    schemes = weighting_schemes(acc, gates)
    lines = [f"App. A.6/A.7 diagnostics, {run_label(path)}, Δp1 binned by {_binning(path)}:", "",
             f"Δp1 = 0 pairs (A.7): {c['total']:,} in all; "
             + ", ".join(f"d {lo}–{hi}: {n:,}" for lo, hi, n in c["ranges"])
             + f"; d > {FAR_D}: {c['far']:,} (paper, WikiText-2: 4,673); largest d with one: "
               f"{c['largest']}", "",
             "| gate | Δp1 = 0 cells passing | their largest d | spurious cells (A.6) | their weight share "
             "| U* A (pairs) | U* B (inverse variance) | U* C (uniform) |",
             "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for g in gates:
        bad, cells, share = spurious_cells(S, Q, N, g)
        pct = "—" if math.isnan(share) else f"{100 * share:.1f}%"
        lines.append(f"| {g} | {c['gates'][g][0]} | {c['gates'][g][1] or '—'} | {bad} of {cells} | {pct} | "
                     + " | ".join(num(u) for u in schemes[g]) + " |")
    if reference in schemes:
        a, b, cc = schemes[reference]
        lines += ["", f"weighting schemes at gate {reference}: |B − A| {num(abs(b - a), '.3f')}, |C − A| "
                      f"{num(abs(cc - a), '.3f')} (paper: within ≈ 0.03 in every corpus; — where a scheme "
                      "has no well)"]
    lines += ["", "Spurious cell (our reading): passes the gate, contrast > 0 at a Δp1 whose pooled U < 0 "
                  "(paper, Code: 32 / 12 / 0 at gates 200 / 1,000 / 2,000).", "",
              f"mean-d mismatch inside the superseded distance bins (A.6; paper, WikiText-2, d <= 256, "
              f"Δp1 = 1: 184.5 against 167.0), the bin-pooled contrast beside the exact-distance U "
              f"(gate {reference}):", "",
              "| d bin | Δp1 | mean d, Δp1 = 0 | mean d, Δp1 | mismatch | bin-pooled U | exact-distance U |",
              "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    lines += [f"| {lo}–{hi} | {k} | {num(m0, '.1f')} | {num(mk, '.1f')} | {num(mk - m0, '+.1f')} | "
              f"{num(ub)} | {num(ue)} |"
              for lo, hi, k, m0, mk, ub, ue in mean_d_mismatch(S, Q, N, gate=reference)]
    return "\n".join(lines)


# ------------------------------------------------------------- figures (Fig. 2, A.6) ----
def figure_response(paths, out_dir, draws, gate=2000):
    """Paper 004 Fig. 2: each model's U(Δp1) at the reference gate (points), the fitted degree-2
    curve over the range it was fitted on, and U* at its vertex with the document-cluster
    bootstrap 95% CI (seed 0: the table's draws), or "no interior minimum" in the legend. The
    numbers go to fig2_response.csv (the points and the curve) and fig2_depth.csv (U*, its CI)."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.5, 4))
    points, depths = [], []
    for i, path in enumerate(paths):
        acc = load_acc(path)
        U, tot = response(*(acc[k].sum(0) for k in ("sum", "sumsq", "count")), gate)
        f = fit(U, tot)
        x, u = well(U, tot)
        k = np.arange(len(U))
        ok = (k >= 1) & ~np.isnan(U)
        name = run_label(path)
        if not ok.any():
            legend = f"{name}: no cell passes n ≥ {gate:,}"
        elif math.isnan(u):
            legend = f"{name}: no interior minimum"
        else:
            boot = bootstrap_depth(acc, draws=draws, gate=gate)[0]
            missing = int(np.isnan(boot).sum())
            lo, hi = ci(boot) if missing <= draws / 2 else (float("nan"), float("nan"))
            band = (f"[{lo:+.3f}, {hi:+.3f}]" if not math.isnan(lo)
                    else f"CI not identifiable ({missing}/{draws} draws)")
            legend = f"{name}: U* = {u:+.3f} {band} at Δp1* = {x:.2f}"
            ax.plot([x], [u], "*", ms=12, color=f"C{i}")
            # a percentile CI need not hold u: a bar, not ± errors
            ax.vlines(x, lo, hi, color=f"C{i}", lw=2.5, alpha=0.6)
            depths.append((name, x, u, lo, hi, missing, draws))
        ax.plot(k[ok], U[ok], "o", color=f"C{i}", label=legend)
        if f is not None:
            grid = np.linspace(f[1], f[2], 200)
            ax.plot(grid, np.polyval(f[0], grid), "-", color=f"C{i}", lw=1)
        points += [(name, int(j), U[j], tot[j],
                    np.polyval(f[0], j) if f is not None and f[1] <= j <= f[2] else "") for j in k[ok]]
    ax.axhline(0, color="grey", lw=0.8)
    ax.set_xlabel("paragraph displacement Δp1")
    ax.set_ylabel("U(Δp1)  (< 0: compression)")
    ax.set_title(f"compression response, exact-distance estimator, n ≥ {gate:,} (paper 004 Fig. 2)",
                 fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    save_figure(fig, os.path.join(out_dir, "fig2_response.png"))
    plt.close(fig)
    write_table(os.path.join(out_dir, "fig2_response.csv"),
                ["model", "delta_p1", "U", "pair_weight", "fitted_deg2"], points)
    write_table(os.path.join(out_dir, "fig2_depth.csv"),
                ["model", "delta_p1_star", "U_star", "ci_lo", "ci_hi", "draws_without_minimum", "draws"],
                depths)


def figure_cells(paths, out_dir, gate=200):
    """Paper 004 App. A.6's (d, Δp1) heatmaps, one row per model (seeds pooled): pair count, mean
    log Ā, and the cell contrast with the same-d Δp1 = 0 cell where both pass `gate` (the lowest
    gate, where the spurious band would show). Numbers: figA6_cells.csv, cells holding pairs."""
    plt = pyplot()
    fig, axes = plt.subplots(len(paths), 3, figsize=(11, 3.6 * len(paths)), squeeze=False)
    table = []
    for row, path in zip(axes, paths):
        acc = load_acc(path)
        n, mean, _, contrast, keep = cell_contrast(
            *(acc[k].sum(0) for k in ("sum", "sumsq", "count")), gate)
        K = int(np.flatnonzero(n.sum(0)).max(initial=0)) + 1          # Δp1 columns holding pairs
        lim = np.nanmax(np.abs(np.where(keep, contrast, np.nan)[:, 1:K]), initial=0) or 1.0
        name = run_label(path)
        for ax, (title, m, cmap, kw) in zip(row, (
                ("pairs (log10)", np.log10(np.where(n > 0, n, np.nan)), "viridis", {}),
                ("mean log Ā", np.where(n > 0, mean, np.nan), "viridis", {}),
                (f"contrast with Δp1 = 0, n ≥ {gate:,}", np.where(keep, contrast, np.nan), "coolwarm",
                 {"vmin": -lim, "vmax": lim}))):
            im = ax.imshow(m[:, :K], aspect="auto", origin="lower", interpolation="nearest", cmap=cmap,
                           extent=(-0.5, K - 0.5, 0.5, len(m) + 0.5), **kw)          # row i is d = i + 1
            ax.set_title(f"{name}: {title}", fontsize=8)
            ax.set_xlabel("Δp1")
            ax.set_ylabel("token distance d")
            fig.colorbar(im, ax=ax)
        d, k = np.nonzero(n)
        table += [(name, di + 1, ki, int(n[di, ki]), mean[di, ki], contrast[di, ki] if keep[di, ki] else "")
                  for di, ki in zip(d, k)]
    fig.tight_layout()
    save_figure(fig, os.path.join(out_dir, "figA6_cells.png"))
    plt.close(fig)
    write_table(os.path.join(out_dir, "figA6_cells.csv"),
                ["model", "d", "delta_p1", "pairs", "mean_log_attention", f"contrast_gate{gate}"], table)


def main(argv=None):
    """Table 3, then the A.6/A.7 diagnostics of the headline binning; with --figures, Fig. 2 and
    the A.6 heatmaps."""
    ap = Parser(prog="python -m treerope.hrope.compression", description=(
        "Paper 004 Table 3 (Layer II): compression depth U* of a model, and of a control beside it "
        "(paired document bootstrap), from the cells `evaluate.py RUN --attention` writes; then the "
        "App. A.6/A.7 diagnostics."),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("depth", nargs="+", metavar="NPZ", help="depth_<split>.npz of the model [and the "
                    "control]; the depth_read_<split>.npz beside each is read where there is one")
    ap.add_argument("--draws", type=at_least_one, default=2000, help="document bootstrap draws")
    ap.add_argument("--figures", default=None, help="write Fig. 2 and the A.6 heatmaps here")
    args = ap.parse_args(argv)
    print(depth_report(args.depth[0], args.depth[1] if len(args.depth) > 1 else None, args.draws))
    read = [read_paths(p) for p in args.depth[:2]]
    for p in read:
        print("\n" + diagnostics_report(p))
    if args.figures:
        writable(args.figures, "choose another --figures folder")
        figure_response(read, args.figures, args.draws)
        figure_cells(read, args.figures)
        print(f"\nfigures written to {args.figures}")


if __name__ == "__main__":
    main()
