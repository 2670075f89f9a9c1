"""Hub masking, paper 004 App. E and Table 13 (three seeds pooled per corpus): which token types
carry the compression (compression.py). A cross-paragraph pair's contribution is log Ā(i, j) minus
the mean log Ā of same-paragraph pairs at the same distance d (over the scored records); a token
TYPE's aggregate is the sum over the cross-paragraph pairs it keys. Two passes, so that every seed
is masked with the same sets (our reading of "three seeds pooled": one choice per corpus, from the
aggregates summed over the seeds):
  evaluate.py RUN --hub_contributions   pass 1, every seed: aggregates and pair counts per type
  evaluate.py RUN --hubs                pass 2, every seed: the choice from the pooled pass-1 files
                                        of RUN's sibling seeds, then the masked depth cells
  python -m treerope.hrope.hubs RUN ... Table 13, each document one cluster over the seeds
Hubs: the 5% of types (among those keying a cross-paragraph pair) with the most negative pooled
aggregate, i.e. carrying the compression (reading: the paper says "top 5% by aggregate
contribution"). Freq-matched: the 5% most frequent types of the training split (reading of "raw
corpus frequency": the corpus the model learnt, not the scored records). Random (token-matched):
as many random non-hub types. Pair-matched random: random non-hub types blocking exactly the hubs'
cross-paragraph pairs (pooled over the seeds), the nearest achievable count where no subset hits it
(the difference is recorded). The mass sweep (App. E): the same, one draw each, at 25%, 50%, 75% of
the hubs' pairs (the points are our reading; 100% is Pair-matched random itself).
"""
import argparse
import glob
import math
import os

import numpy as np
import torch

from treerope.batches import record_docs
from treerope.files import read_json, replacing, write_json
from treerope.hrope.compression import (
    D_MAX,
    MIN_CLUSTERS,
    bootstrap_depth,
    ci,
    compression_depth,
    depth_cells,
    document_cells,
)
from treerope.prepared import load_split
from treerope.settings import Parser, at_least_one

HUB_SHARE, MASS_SWEEP = 0.05, (25, 50, 75)


def cross_paragraph_block(p1, keys):
    """Paper 004 App. E: block cross-paragraph attention to the `keys` tokens: (B, T, T) pairs
    (i, j) with j a masked key and p1(i) != p1(j). p1, keys: (B, T)."""
    return keys[:, None, :] & (p1[:, :, None] != p1[:, None, :])


def subset_sum(c, target):
    """Positions into the counts `c` (ints >= 1) of a subset summing to `target` exactly when one
    does, else to the nearest achievable sum (ties: the smaller). A 0/1 subset sum over the counts in
    their order, stopped once `target` is reachable; first[s] is the count whose addition first
    reached s, so walking back from the answer uses each count once. No sum above 2 * target is
    nearer than the empty set."""
    top = 2 * target
    reach = np.zeros(top + 1, bool)
    reach[0] = True
    first = np.full(top + 1, -1, np.int32)
    for k, ck in enumerate(c):
        if reach[target]:
            break
        if ck <= top:
            new = reach[:top + 1 - ck] & ~reach[ck:]
            first[ck:][new] = k
            reach[ck:] |= new
    sums = np.flatnonzero(reach)
    s = int(sums[np.argmin(np.abs(sums - target))])
    picked = []
    while s:
        picked.append(first[s])
        s -= c[first[s]]
    return np.array(picked, np.int64)


def match_pairs(order, pairs, target):
    """Types from `order` (a random order of the candidates) whose pair counts sum to `target`, or
    to the nearest achievable sum. Greedy while far below it (types taken in order while the sum
    stays at least the largest usable count short of the target: cheap), the last stretch solved
    exactly by subset_sum over the types left, in counts divided by their common divisor (pooled over seeds
    that scored the same records, every count is a multiple of the number of seeds). Reading: the
    greedy start can, in rare cases, rule out an exact subset that exists; the difference is then
    recorded, as for an unreachable target."""
    c = pairs[order].astype(np.int64)
    g = max(int(np.gcd.reduce(c)), 1)                    # 0 when there are no candidates
    c, t = c // g, int(round(target / g))
    k = int(np.searchsorted(np.cumsum(c), t - int(np.minimum(c, t).max(initial=0)), side="right"))
    return np.r_[order[:k], order[k:][subset_sum(c[k:], t - int(c[:k].sum()))]].astype(np.int64)


def hub_sets(contrib, pairs, freq, draws=3, seed=0, share=HUB_SHARE, sweep=MASS_SWEEP):
    """({condition: [type arrays]}, {matched condition: its target pair count}) from per-type
    arrays: aggregate contribution, cross-paragraph pairs as key, and frequency (types with no
    cross-paragraph pair are never chosen); `sweepNN` blocks NN% of the hubs' pairs."""
    rng = np.random.default_rng(seed)
    present = np.flatnonzero(pairs > 0)
    n = max(1, int(round(share * len(present))))
    hub = present[np.argsort(contrib[present], kind="stable")[:n]]
    others = np.setdiff1d(present, hub)
    target = int(pairs[hub].sum())
    targets = {"pair_matched": target, **{f"sweep{p}": int(round(p / 100 * target)) for p in sweep}}
    out = {"hub": [hub], "freq": [np.argsort(-freq, kind="stable")[:n]], "random": [], "pair_matched": []}
    for _ in range(draws):
        out["random"].append(rng.choice(others, min(n, len(others)), replace=False))
        out["pair_matched"].append(match_pairs(rng.permutation(others), pairs, target))
    for pct in sweep:
        out[f"sweep{pct}"] = [match_pairs(rng.permutation(others), pairs, targets[f"sweep{pct}"])]
    return out, targets


def hub_contributions(score, V):
    """Per type (V,): the summed contribution of the cross-paragraph pairs it keys (those at a
    distance with a same-paragraph baseline), and the number of all of them, from unmasked
    attention. score(attention=): evaluate.score on the scored records."""
    seen = {}
    score(attention=lambda r, row, atts: seen.__setitem__(r, (atts.mean((0, 1)), row["p"][:, 0],
                                                              row["tokens"])))
    base_sum, base_n = np.zeros(D_MAX + 1), np.zeros(D_MAX + 1)
    pairs = []
    for A, p1, tok in seen.values():
        i, j = np.tril_indices(len(p1), -1)
        d, same = i - j, (p1[i] == p1[j]).numpy()
        y = A[i, j].clamp_min(1e-30).log().numpy()
        near = d <= D_MAX
        np.add.at(base_sum, d[near & same], y[near & same])
        np.add.at(base_n, d[near & same], 1)
        pairs.append((d[near & ~same], y[near & ~same], tok.numpy()[j[near & ~same]]))
    base = np.divide(base_sum, base_n, out=np.full_like(base_sum, np.nan), where=base_n > 0)
    contrib, n_pairs = np.zeros(V), np.zeros(V)
    for d, y, key in pairs:
        ok = np.isfinite(base[d])
        np.add.at(contrib, key[ok], y[ok] - base[d[ok]])
        # every pair masking the type blocks, baseline or not (App. E's count)
        np.add.at(n_pairs, key, 1)
    return contrib, n_pairs


def write_contributions(score, split, ids, V, run_dir, split_name):
    """Pass 1: this run's hub_contributions -> hub_contrib_<split>.npz (with the records scored)."""
    if "p" not in split.a:
        raise SystemExit("error: --hubs needs paragraph coordinates (prepare.py prose/code)")
    contrib, pairs = hub_contributions(score, V)
    path = os.path.join(run_dir, f"hub_contrib_{split_name}.npz")
    with replacing(path) as tmp:
        np.savez_compressed(tmp, contrib=contrib, pairs=pairs, records=ids)
    return path


def choose_hubs(run_dir, split_name, data_dir, V, draws=3):
    """The sets of pass 2, the same for every seed of a configuration: hub_sets on the aggregates
    and pair counts summed over the seeds beside run_dir that ran pass 1 (run_dir/../seed*/), the
    frequency counted on the training split's tokens. Returns (sets, targets, pairs, seeds)."""
    paths = sorted(glob.glob(os.path.join(os.path.dirname(os.path.abspath(run_dir)), "seed*",
                                          f"hub_contrib_{split_name}.npz")))
    zs = [np.load(p) for p in paths]
    contrib, pairs = sum(z["contrib"] for z in zs), sum(z["pairs"] for z in zs)
    freq = np.bincount(np.asarray(load_split(data_dir, "train")["tokens"]), minlength=V)
    sets, targets = hub_sets(contrib, pairs, freq, draws)
    return sets, targets, pairs, [os.path.basename(os.path.dirname(p)) for p in paths]


def write_hubs(score, split, ids, V, run_dir, split_name, data_dir, draws=3):
    """Pass 2: this run's pass 1 if it has none for these records, the pooled choice (choose_hubs),
    then every condition scored with cross-paragraph attention to its key types blocked: per-document
    depth cells with their document ids (hub_<cond>_<split>.npz) and the choice (hub_<split>.json).
    score(attention=, block=): evaluate.score on these records; V: the vocabulary size."""
    if "p" not in split.a:
        raise SystemExit("error: --hubs needs paragraph coordinates (prepare.py prose/code)")
    own = os.path.join(run_dir, f"hub_contrib_{split_name}.npz")
    if not os.path.exists(own) or not np.array_equal(np.load(own)["records"], ids):
        write_contributions(score, split, ids, V, run_dir, split_name)
    sets, targets, pairs, seeds = choose_hubs(run_dir, split_name, data_dir, V, draws)
    own_pairs = np.load(own)["pairs"]
    docs = record_docs(split, np.arange(len(split.len)))
    uniq = np.unique(docs[ids])
    summary = {"pooled_from": seeds, "conditions": {}, "cross_pairs": int(own_pairs.sum()), "checks": {}}
    for cond, draws_of in {"original": [np.zeros(0, np.int64)], **sets}.items():
        for k, types in enumerate(draws_of):
            keys = torch.zeros(V, dtype=torch.bool)
            keys[torch.as_tensor(types, dtype=torch.long)] = True
            cells, seen = {}, []

            def keep(r, row, atts):
                cells[r] = depth_cells(atts, row["p"][:, 0], exclude=row["blocked"])
                seen.append(mask_check(row["blocked"], atts))
            score(block=lambda b: cross_paragraph_block(b["p"][..., 0],
                                                        keys.to(b["tokens"].device)[b["tokens"]]),
                  attention=keep)
            name = cond if len(draws_of) == 1 else f"{cond}{k}"
            with replacing(os.path.join(run_dir, f"hub_{name}_{split_name}.npz")) as tmp:
                np.savez_compressed(tmp, docs=uniq, **document_cells(cells, docs, uniq))
            c = summary["conditions"][name] = {"types": sorted(types.tolist()),
                                               "blocked_pairs": int(pairs[types].sum())}
            if cond in targets:
                c.update(target_pairs=targets[cond], difference=c["blocked_pairs"] - targets[cond])
            n, err, leak = np.array(seen).T
            summary["checks"][name] = {"blocked": int(n.sum()), "expected": int(own_pairs[types].sum()),
                                       "row_sum_error": float(err.max()),
                                       "blocked_attention": float(leak.max())}
    write_json(summary, os.path.join(run_dir, f"hub_{split_name}.json"))
    return summary


def mask_check(blocked, atts):
    """App. E's verification on one record scored under a mask, blocked (n, n) and atts (layers,
    heads, n, n): (causal pairs blocked, to compare with pass 1's count of the cross-paragraph
    pairs the masked types key; the largest |sum_j A(i, j) - 1|, near 0 when -inf before the
    softmax renormalises attention over the keys left; the largest attention on a blocked pair, 0)."""
    blocked = torch.tril(blocked, -1)
    leak = float(atts[:, :, blocked].max()) if blocked.any() else 0.0
    return int(blocked.sum()), float((atts.sum(-1) - 1).abs().max()), leak


# python -m treerope.hrope.hubs (analyze.py --hubs): Table 13 from those cells
def hub_choice(run_dirs, split):
    """Every run's hub_<split>.json, read once; runs masked with other sets than the first are
    refused (a seed whose pass 2 ran before every seed's pass 1)."""
    choices = []
    for d in run_dirs:
        choices.append(read_json(os.path.join(d, f"hub_{split}.json"), f"run evaluate.py {d} --hubs first"))
        if not isinstance(choices[-1], dict) or "conditions" not in choices[-1]:
            raise SystemExit(f"error: {d} holds hub cells chosen per seed; rerun evaluate.py --hubs "
                             "(pass 1 on every seed first)")
        if choices[-1]["conditions"] != choices[0]["conditions"]:
            raise SystemExit(f"error: {d} was masked with other sets than {run_dirs[0]} (pooled from "
                             f"{choices[-1]['pooled_from']}, against {choices[0]['pooled_from']}): run "
                             f"evaluate.py --hub_contributions on every seed, then --hubs on each")
    return choices


def pool_documents(paths):
    """Cell accumulators of several runs summed per document id: a document that three seeds scored
    is one bootstrap cluster, not three (the seeds' errors on it are not independent)."""
    zs = [np.load(p) for p in paths]
    docs = np.unique(np.concatenate([z["docs"] for z in zs]))
    acc = {k: np.zeros((len(docs),) + zs[0][k].shape[1:]) for k in ("sum", "sumsq", "count")}
    for z in zs:
        at = np.searchsorted(docs, z["docs"])
        for k in acc:
            acc[k][at] += z[k]
    return acc


def hub_table(run_dirs, split="test", gate=2000, draws=1000):
    """Paper 004 Table 13: U* (degree-2 vertex, exact-distance cells) under each masking
    condition, the runs' cells summed per document (the clusters: documents, not seed × document);
    random conditions as mean ± std over their draws; the share of the original well removed;
    document-cluster bootstrap 95% CIs for Original, Hub-masked and Freq-matched (as the paper
    brackets them), or how many draws had no well. Where those three have no direct fit, U* falls
    back to the mean of the draws that have a well (Table 13's †: "too few surviving cells for a
    direct fit"). Beside U*, the response at the shallowest displacement U(Δp1 = 1) (a descriptive
    number that exists where no well is identifiable, as at CPU scale), and the cross-paragraph
    pairs blocked (pooled over the runs) with a matched set's difference from its target. Then the
    pair-matched mass sweep: both against the share of the hubs' pairs removed (Pair-matched random
    is the 100% point); and App. E's verification checks (hub_checks)."""
    runs = hub_choice(run_dirs, split)
    choice = runs[0]["conditions"]
    pooled = {c: pool_documents([os.path.join(d, f"hub_{c}_{split}.npz") for d in run_dirs]) for c in choice}
    depth = {c: compression_depth(acc, gate) for c, acc in pooled.items()}
    u = {c: v[1] for c, v in depth.items()}
    u1 = {c: v[2][1] for c, v in depth.items()}

    def blocked(names):
        return (float(np.mean([choice[c]["blocked_pairs"] for c in names])),
                [choice[c]["difference"] for c in names if "difference" in choice[c]])
    rows = []
    for cond in ("original", "hub", "freq", "random", "pair_matched"):
        names = [c for c in u if c == cond or (c.startswith(cond) and c[len(cond):].isdigit())]
        if not names:
            continue
        vals = np.array([u[c] for c in names])
        # NaN where a draw has no well
        m, m1 = float(np.mean(vals)), float(np.mean([u1[c] for c in names]))
        std = float(vals.std()) if len(names) > 1 and np.isfinite(m) else None
        row = {"condition": cond, "U": m, "std": std, "U1": m1, "ci": None, "fallback": None}
        row["pairs"], row["difference"] = blocked(names)
        if cond in pooled and cond in ("original", "hub", "freq"):
            boot = bootstrap_depth(pooled[cond], draws=draws, gate=gate)[0]
            row["documents"] = pooled[cond]["count"].shape[0]
            ok = np.isfinite(boot)
            row["ci"] = ci(boot) if (~ok).sum() <= draws / 2 else int((~ok).sum())
            if np.isnan(m) and ok.any():
                row["U"], row["fallback"] = float(boot[ok].mean()), int(ok.sum())
        rows.append(row)

    def share(m, ref):
        return 1 - m / ref if ref else float("nan")
    ref, ref1 = ((rows[0]["U"], rows[0]["U1"]) if rows and rows[0]["condition"] == "original"
                 else (float("nan"),) * 2)
    for r in rows:
        r["removed"], r["removed_U1"] = share(r["U"], ref), share(r["U1"], ref1)
    sweep = [dict(zip(("percent", "U", "removed", "U1", "removed_U1", "pairs", "difference"),
                      (int(c[5:]), u[c], share(u[c], ref), u1[c], share(u1[c], ref1), *blocked([c]))))
             for c in u if c.startswith("sweep")]
    if sweep and rows and rows[-1]["condition"] == "pair_matched":
        sweep.append({"percent": 100, **{k: rows[-1][k] for k in ("U", "removed", "U1", "removed_U1",
                                                                 "pairs", "difference")}})
    return (rows, sorted(sweep, key=lambda s: s["percent"]), draws,
            hub_checks(run_dirs, runs, split, pooled, gate))


def surviving_cells(acc, gate, d_max=D_MAX):
    """(d, Δp1 >= 1) cells that enter U(Δp1): both the cell and its d's Δp1 = 0 baseline hold
    >= gate pairs (as `response` keeps them), documents pooled."""
    N = acc["count"].sum(0)[1:d_max + 1]
    return int(((N[:, 1:] >= gate) & (N[:, :1] >= gate)).sum())


def hub_checks(run_dirs, runs, split, pooled, gate):
    """Paper 004 App. E's verification, per condition, the runs pooled. Our reading of "the
    realized hub-key fraction among pairs removed by Pair-matched random matches the base rate":
    the share of all cross-paragraph pairs a matched set removes against the share hubs key (a
    non-hub set removes no hub-keyed pair by construction). Beside it, that masking removed exactly
    the intended pairs (pairs blocked in the masked pass = pass 1's count for the types), left every
    same-paragraph cell's pair count as it was, and renormalised (rows of attention sum to 1, 0 on a
    blocked pair); and App. E's "surviving (d, Δp1) cells" per condition, to compare across the
    non-trivially-masked ones."""
    for d, r in zip(run_dirs, runs):     # runs: their hub_<split>.json, as hub_choice read them
        if "checks" not in r:
            raise SystemExit(f"error: {d}'s hub_{split}.json predates App. E's checks; "
                             "rerun evaluate.py --hubs on it")
    cross = sum(r["cross_pairs"] for r in runs)
    same = pooled["original"]["count"][..., 0]
    out = []
    for c in pooled:
        checks = [r["checks"][c] for r in runs]
        blocked = sum(k["blocked"] for k in checks)
        out.append({"condition": c, "blocked": blocked, "expected": sum(k["expected"] for k in checks),
                    "share": blocked / cross if cross else float("nan"),
                    "same_paragraph_kept": bool(np.array_equal(pooled[c]["count"][..., 0], same)),
                    "cells": surviving_cells(pooled[c], gate),
                    "row_sum_error": max(k["row_sum_error"] for k in checks),
                    "blocked_attention": max(k["blocked_attention"] for k in checks)})
    return out


def _band(r, draws):
    """A row's 95% CI, or why it has none."""
    if r.get("documents", MIN_CLUSTERS) < MIN_CLUSTERS:
        return f"not identifiable ({r['documents']} documents; the bootstrap needs {MIN_CLUSTERS})"
    if r["ci"] is None:
        return "—"
    if isinstance(r["ci"], int):
        return f"not identifiable ({r['ci']} of {draws} draws without a well)"
    return f"[{r['ci'][0]:+.3f}, {r['ci'][1]:+.3f}]"


def hub_markdown(table, title):
    rows, sweep, draws, checks = table

    def fmt(x):
        return "no interior minimum" if math.isnan(x) else f"{x:+.3f}"

    def pct(x):
        return "—" if math.isnan(x) else f"{100 * x:.0f}%"

    def pairs(r):
        return f"{r['pairs']:,.0f}" + (f" ({', '.join(f'{d:+d}' for d in r['difference'])})"
                                       if r["difference"] else "")
    lines = [f"### {title}", "",
             "| condition | U* | 95% CI | share of the well removed | U(Δp1 = 1) | share of U(1) removed "
             "| cross-paragraph pairs blocked (matched − target) |",
             "| --- | ---: | --- | ---: | ---: | ---: | ---: |"]
    for r in rows:
        spread = f" ± {r['std']:.3f}" if r["std"] is not None and not math.isnan(r["std"]) else ""
        u = fmt(r["U"]) + ("†" if r["fallback"] else "") + spread
        band = _band(r, draws)
        first = r["condition"] == "original"
        lines.append(f"| {r['condition']} | {u} | {band} | {'—' if first else pct(r['removed'])} | "
                     f"{r['U1']:+.3f} | {'—' if first else pct(r['removed_U1'])} | {pairs(r)} |")
    lines += ["", "Clusters are documents: each document's cells summed over the seeds. Pairs are counted "
              "over the seeds pooled; pair-matched sets block the hubs' count exactly where a subset of "
              "non-hub types can (matched − target per draw in brackets)."]
    lines += [f"†: no direct fit; falls back to the bootstrap mean (paper 004 Table 13: too few surviving "
              f"cells for a direct fit), {r['condition']}: over the {r['fallback']} of {draws} draws with "
              "a well." for r in rows if r["fallback"]]
    if sweep:
        lines += ["", "Pair-matched mass sweep (one draw per point; 100% is Pair-matched random, mean over "
                  "its draws):", "",
                  "| hubs' cross-paragraph pairs removed | U* | share of the well removed | U(Δp1 = 1) "
                  "| share of U(1) removed | pairs blocked (matched − target) |",
                  "| ---: | ---: | ---: | ---: | ---: | ---: |"]
        lines += [f"| {s['percent']}% | {fmt(s['U'])} | {pct(s['removed'])} | {s['U1']:+.3f} | "
                  f"{pct(s['removed_U1'])} | {pairs(s)} |" for s in sweep]

    def yes(ok):
        return "yes" if ok else "**NO**"
    lines += ["", "App. E verification, seeds pooled (pass 1: pairs the masked types key in the unmasked "
              "pass):", "", "| condition | pairs blocked | pass 1's count | removed exactly those? "
              "| share of cross-paragraph pairs | same-paragraph counts kept? | surviving (d, Δp1) cells "
              "| max \\|Σ_j A − 1\\| | max A on a blocked pair |",
              "| --- | ---: | ---: | --- | ---: | --- | ---: | ---: | ---: |"]
    lines += [f"| {c['condition']} | {c['blocked']:,} | {c['expected']:,} | "
              f"{yes(c['blocked'] == c['expected'])} | {100 * c['share']:.2f}% | "
              f"{yes(c['same_paragraph_kept'])} | {c['cells']} | "
              f"{c['row_sum_error']:.1e} | {c['blocked_attention']:.1e} |" for c in checks]
    by = {c["condition"]: c for c in checks}
    matched = [c for c in checks if c["condition"].startswith("pair_matched")]
    if "hub" in by and matched:
        lines += ["", f"Base rate: hubs key {100 * by['hub']['share']:.2f}% of the cross-paragraph pairs; "
                  "Pair-matched random removes " + ", ".join(f"{100 * c['share']:.2f}%" for c in matched)
                  + " (App. E: should match). Surviving cells, hub / freq / pair-matched: " + " / ".join(
                      str(by[c]["cells"]) if c in by else "—" for c in ("hub", "freq"))
                  + " / " + ", ".join(str(c["cells"]) for c in matched) + " (App. E: comparable)."]
    return "\n".join(lines)


def main(argv=None):
    """Table 13 from the masked cells evaluate.py RUN --hubs wrote for each seed."""
    ap = Parser(prog="python -m treerope.hrope.hubs", description=(
        "Paper 004 Table 13 (App. E): compression depth under hub masking, from the cells "
        "`evaluate.py RUN --hubs` writes (after --hub_contributions on every seed)."),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("runs", nargs="+", metavar="RUN",
                    help="the seeds of one configuration, each document's cells summed over them")
    ap.add_argument("--split", default="test", help="the split evaluate.py scored")
    ap.add_argument("--draws", type=at_least_one, default=2000, help="document bootstrap draws")
    args = ap.parse_args(argv)
    real = [os.path.realpath(r) for r in args.runs]
    for i, r in enumerate(args.runs):   # pooled by document: a run given twice would count its cells twice
        if real[i] in real[:i]:
            ap.error(f"the run {r} is given twice (as {args.runs[real.index(real[i])]}): give each seed once")
    table = hub_table(args.runs, args.split, draws=args.draws)
    print(hub_markdown(table, f"compression depth under hub masking, {len(args.runs)} seed(s) pooled "
                              f"by document (paper 004 Table 13)"))
    return table


if __name__ == "__main__":
    main()
