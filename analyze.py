"""Paired statistics, figures and compression depth.

    python analyze.py out/python                       # tables: every config vs seq_only
    python analyze.py out/python --baseline seq_tree --figures figs
    python analyze.py --depth hrope.npz rand.npz       # compression depth U*, paired bootstrap

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
from collections import defaultdict

import numpy as np
from scipy import stats


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


# ---------------------------------------------------------------------------------- runs ----
def load_runs(root):
    """{setting: {config: {seed: run}}} from out/<corpus>/<config>/seed<k>/."""
    runs = defaultdict(lambda: defaultdict(dict))
    for cfg_path in glob.glob(os.path.join(root, "**", "config.json"), recursive=True):
        d = os.path.dirname(cfg_path)
        with open(cfg_path) as f:
            c = json.load(f)
        log_path = os.path.join(d, "log.jsonl")
        if not os.path.exists(log_path):
            continue
        with open(log_path) as f:
            log = [json.loads(l) for l in f if l.strip()]
        final = None
        if os.path.exists(os.path.join(d, "final.json")):
            with open(os.path.join(d, "final.json")) as f:
                final = json.load(f)
        m, r = c["model"], c["run"]
        setting = (r["corpus"], m["n_layer"], m["n_embd"], m["n_head"], m["max_len"], r["steps"])
        runs[setting][r["config"]][r["seed"]] = {"log": {e["step"]: e for e in log}, "final": final, "dir": d}
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


COLUMNS = ["config", "n", "delta", "se", "t", "p", "ci_lo", "ci_hi", "won", "sign_p", "q", "ppl_reduction"]


def markdown(rows, title):
    out = [f"### {title}", "", "| configuration | Δ nats/token | SE | t | p | 95% CI | won | sign p | q | ppl reduction % |",
           "| --- | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: |"]
    for r in rows:
        out.append(f"| {r['config']} | {r['delta']:+.4f} | {r['se']:.4f} | {r['t']:.2f} | {r['p']:.3g} | "
                   f"[{r['ci_lo']:+.4f}, {r['ci_hi']:+.4f}] | {r['won']}/{r['n']} | {r['sign_p']:.3g} | "
                   f"{r['q']:.3g} | {r['ppl_reduction']:+.2f} |")
    return "\n".join(out)


def write_csv(rows, path):
    with open(path, "w", newline="") as f:
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
        fig.savefig(os.path.join(out_dir, name + ".png"), dpi=120)
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
    fig.savefig(os.path.join(out_dir, "fig4_planes.png"), dpi=120)
    plt.close(fig)
    _table(os.path.join(out_dir, "fig4_planes.csv"), ["config", "extra_planes", "ppl_reduction", "ci_lo", "ci_hi"], table)


def _table(path, header, rows):
    with open(path, "w", newline="") as f:
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
        idx = rng.integers(0, n_docs, size=(m, n_docs))
        W = np.zeros((m, n_docs))
        np.add.at(W, (np.arange(m)[:, None], idx), 1.0)            # resampling multiplicities
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
    z = np.load(path)
    return {k: z[k] for k in ("sum", "sumsq", "count")}


def depth_report(path_a, path_b=None, draws=2000, gates=(200, 1000, 2000, 3000)):
    a = load_acc(path_a)
    b = load_acc(path_b) if path_b else None
    lines = ["| model | gate | Δp1* (deg 2) | U* (deg 2) | Δp1* (deg 3) | U* (deg 3) |", "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for name, acc in [(path_a, a)] + ([(path_b, b)] if b else []):
        for g in gates:
            x2, u2, _ = compression_depth(acc, g, degree=2)
            x3, u3, _ = compression_depth(acc, g, degree=3)
            fmt = lambda v: "no interior minimum" if math.isnan(v) else f"{v:.3f}"
            lines.append(f"| {os.path.basename(name)} | {g} | {fmt(x2)} | {fmt(u2)} | {fmt(x3)} | {fmt(u3)} |")
    res = bootstrap_depth(a, b, draws)
    lines.append("")
    lines.append(f"paired document-cluster bootstrap, {draws} draws, gate 2000:")
    names = [os.path.basename(path_a)] + ([os.path.basename(path_b), "gap (first − second)"] if b else [])
    for n, r in zip(names, res):
        lo, hi = ci(r)
        lines.append(f"  {n}: U* 95% CI [{lo:.3f}, {hi:.3f}] ({int(np.isnan(r).sum())} draws without an interior minimum)")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("root", nargs="?", help="out/<corpus> (or out/)")
    ap.add_argument("--baseline", default=None, help="default: seq_only (flat for hRoPE runs)")
    ap.add_argument("--figures", default=None, help="write PNG figures + their numbers here")
    ap.add_argument("--depth", nargs="+", metavar="NPZ", help="cell accumulators: model [control]")
    ap.add_argument("--draws", type=int, default=2000)
    args = ap.parse_args(argv)
    if args.depth:
        print(depth_report(args.depth[0], args.depth[1] if len(args.depth) > 1 else None, args.draws))
        return
    if not args.root:
        ap.error("give out/<corpus> or --depth")
    runs = load_runs(args.root)
    if not runs:
        raise SystemExit(f"no runs under {args.root}")
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
            os.makedirs(args.figures, exist_ok=True)
            write_csv(rows, os.path.join(args.figures, f"table_{metric}.csv"))
    if args.figures:
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
