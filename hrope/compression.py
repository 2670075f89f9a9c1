"""Compression depth, paper 004 Layers II-III: how much less attention crosses a paragraph boundary
than the distance alone predicts, at which displacement Δp1 the compression is deepest (U*), and
what carries it. What evaluate.py and analyze.py run for it, in one place:

    evaluate.py RUN --attention   per-document (d, Δp1) cells of log attention (depth_<split>.npz)
    analyze.py --depth A B        U* by the exact-distance estimator, paired document bootstrap
                                  (§5.1, App. A.3, A.6), Δp1 by the labels each model reads
                                  (depth_read_<split>.npz where it has one), the true p1 beside;
                                  then App. A.6/A.7's diagnostics, with --figures Fig. 2 and the
                                  A.6 heatmaps (figures.py draws them)
    evaluate.py RUN --hub_contributions, then --hubs; analyze.py --hubs RUN ...
                                  Table 13 (App. E): hubs.py, on these cells
    evaluate.py RUN --paragraphs  per-paragraph sums -> analyze.py --paragraphs: Tables 5 and 9, the
                                  paragraph-level regression (§6.4, App. A.10; predictors: candidates.py),
                                  then A.10's d-only pilot and the band-decay diagnostic (our reading)

boundaries.py holds Layer I: the boundary interventions, Table 1, the probe and the demo.
"""
import glob
import math
import os

import numpy as np
import torch
from scipy import stats

from data import replacing
from resuming import read_config

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


# -------------------------------------------------------------- paragraph-level compression ----
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


# analyze.py --paragraphs: Tables 5 and 9 from those sums
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
    from hrope import candidates
    paths = sorted(glob.glob(os.path.join(config_dir, "seed*", f"paragraph_{split}.npz")))
    if not paths:
        raise SystemExit(f"error: no seed*/paragraph_{split}.npz under {config_dir}; "
                         "run evaluate.py RUN --paragraphs first")
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
                         "(--docs, --max_docs) or lower --gate")
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
