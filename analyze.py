"""Paired statistics and tables of a study (figures: figures.py); paper 004's own tables by delegation.

    python analyze.py out/python                       # tables: every config vs seq_only
    python analyze.py out/python --baseline seq_tree --figures figs
    python analyze.py --tokens RUN_A RUN_B             # two runs paired token by token
    python analyze.py --depth hrope.npz rand.npz       # compression depth U*, paired bootstrap
                                                         (hrope/compression.py)
    python analyze.py --depth hrope.npz rand.npz --figures figs   # and Fig. 2, the App. A.6 heatmaps
    python analyze.py --hubs out/code/hrope_axial/seed[012]   # paper 004 Table 13, App. E's checks
                                                                (hrope/hubs.py)
    python analyze.py --paragraphs out/prose/hrope_axial out/code/hrope_axial   # Tables 5, 9, A.10's pilot
                                                                                  (hrope/compression.py)
    python analyze.py --boundary out/code              # paper 004 Table 1 (hrope/boundaries.py)
    python analyze.py --candidates data/prose data/code  # paper 004 Table 4 (corpus only: candidates.py)
    (paper 004's tables are also their layers' own commands: python -m treerope.hrope.<layer> --help)
    python analyze.py --replicates out/web/seq_depth/seed0 out/web/seq_depth_rep1/seed0 \\
        out/web/seq_depth_rep2/seed0
    python analyze.py --references data/python data/sheets   # reference statistics (corpus only)
    python analyze.py --contrast out_streams/space/web out_streams/newline/web   # study x configuration:
                                                        the difference between two studies' paired Δs

Runs are paired by seed within a setting (corpus + model size + context + steps) and compared
only at milestones both reached (depth-perception appendix §1).
"""
import argparse
import csv
import json
import os
import re
import sys
from collections import defaultdict

import numpy as np

import trees
from rotary import Rotary
from treerope import figures
from treerope.files import replacing, writable
from treerope.hrope import boundaries, candidates, compression, hubs, paragraph_depth
from treerope.settings import Parser, at_least_one
from treerope.statistics import (
    BEST,
    HROPE_VARIANTS,
    TIE,
    ci,
    compare,
    compare_attention,
    compare_intervened,
    compare_kinds,
    contrast,
    head_shifts,
    interventions,
    load_runs,
    milestone_gaps,
    named,
    noise_floor,
    on_split,
    resample_weights,
    rotation_off,
    seed_spread,
    setting_name,
    substitution,
    substitution_order,
    substitution_overlap,
    substitution_seeds,
    table12,
    title,
)
from treerope.writer import reference_stats


def table12_markdown(t):
    corpus = title(t["setting"])
    head = " | ".join(v for v in HROPE_VARIANTS if v in t["stats"])
    cells = " | ".join(f"{m:.4f} ± {s:.4f} (n={n})" for m, s, n in t["stats"].values())
    lines = [f"### {corpus}: validation loss by variant, mean ± std over seeds (paper 004 Table 12)", "",
             f"| corpus | {head} |", "| --- |" + " --- |" * len(t["stats"]), f"| {corpus} | {cells} |", "",
             "| comparison | seeds | first higher | mean Δ | ranges disjoint | one-sided sign p |",
             "| --- | ---: | ---: | ---: | --- | ---: |"]
    lines += [f"| {p['a']} vs {p['b']} | {p['n']} | {p['higher']}/{p['n']} | {p['mean']:+.4f} | "
              f"{'yes' if p['disjoint'] else 'no'} | {p['sign_p_one_sided']:.3g} |" for p in t["pairs"]]
    return "\n".join(lines)


def table2_markdown(r, v, split):
    """Table 2 for one corpus (means over seeds), the seeds holding the order, and §4.3's
    non-overlap check of each adjacent comparison."""
    ok, n = substitution_order(v)
    lines = [f"### {title(r['setting'])}: p1 substitution on {r['config']} (paper 004 Table 2), "
             f"{split} nats/token",
             "", "| real | period | rand | const0 | real < period < rand < const0 |",
             "| ---: | ---: | ---: | ---: | ---: |",
             f"| {r['real']:.4f} | {r['period']:.4f} | {r['rand']:.4f} | {r['const0']:.4f} | "
             f"{ok}/{n} seeds |", "",
             "| adjacent comparison a < b | a: seed range | b: seed range | mean b − a | "
             "seed ranges non-overlapping |", "| --- | --- | --- | ---: | --- |"]
    lines += [f"| {c['a']} < {c['b']} | [{c['range_a'][0]:.4f}, {c['range_a'][1]:.4f}] | "
              f"[{c['range_b'][0]:.4f}, {c['range_b'][1]:.4f}] | {c['mean']:+.4f} | "
              f"{'yes' if c['disjoint'] else 'no'} |" for c in substitution_overlap(v)]
    return "\n".join(lines)


def table2_signs_markdown(config, per):
    """§4.3's "consistent sign across corpora": mean b − a of each adjacent comparison per corpus,
    consistent where every corpus gives the same nonzero sign. per: [(corpus, substitution_overlap)]."""
    lines = [f"### p1 substitution on {config} across corpora: mean b − a (paper 004 §4.3)", "",
             "| comparison | " + " | ".join(c for c, _ in per) + " | same sign in every corpus |",
             "| --- |" + " ---: |" * len(per) + " --- |"]
    for i, c in enumerate(per[0][1]):
        means = [checks[i]["mean"] for _, checks in per]
        same = len({np.sign(m) for m in means}) == 1 and abs(means[0]) > TIE
        lines.append(f"| {c['a']} < {c['b']} | " + " | ".join(f"{m:+.4f}" for m in means)
                     + f" | {'yes' if same else 'no'} |")
    return "\n".join(lines)


def _md(title, header, rows, cell):
    """A markdown table: header '| a | b |' with right-aligned numbers (names left); a statistic
    one seed cannot give (SE, t, p, CI) prints as –."""
    cols = header.count("|") - 1
    align = "| --- | " + " | ".join(["---:"] * (cols - 1)) + " |"
    body = [re.sub(r"[+-]?\bnan\b", "–", cell(r)) for r in rows]
    return "\n".join([f"### {title}", "", header, align] + body)


def kinds_markdown(rows, title):
    return _md(title, "| configuration: kind | tokens | Δ nats/token | 95% CI | won | sign p | q | "
               "ppl reduction % |", rows,
               lambda r: f"| {r['config']}: {r['kind']} | {r['tokens']} | {r['delta']:+.4f} | "
                         f"[{r['ci_lo']:+.4f}, {r['ci_hi']:+.4f}] | {r['won']}/{r['n']} | "
                         f"{r['sign_p']:.3g} | {r['q']:.3g} | {r['ppl_reduction']:+.2f} |")


def interventions_markdown(rows, title):
    return _md(title, "| configuration: intervention (kind) | real nats/token | Δ nats/token | "
               "perplexity × | hurt |", rows,
               lambda r: f"| {r['config']}: {r['intervention']} ({r['kind']}) | {r['real']:.4f} | "
                         f"{r['delta']:+.4f} | {r['ppl_ratio']:.3f} | {r['hurt']}/{r['n']} |")


def attention_markdown(rows, title):
    return _md(title, "| configuration: attention share | baseline % | configuration % | Δ points | higher | "
               "sign p | q |", rows,
               lambda r: f"| {r['config']}: {r['share']} | {r['base']:.2f} | {r['value']:.2f} | "
                         f"{r['points']:+.2f} | {r['higher']}/{r['n']} | {r['sign_p']:.3g} | {r['q']:.3g} |")


def heads_markdown(rows, title):
    return _md(title, "| configuration: attention share | seeds × heads | Δ points, mean over heads | "
               "largest head move per seed | largest rise | largest fall | top head, baseline % | "
               "top head, configuration % |", rows,
               lambda r: f"| {r['config']}: {r['share']} | {r['n']} × {r['heads']} | {r['mean']:+.2f} | "
                         f"{r['largest_lo']:.1f}–{r['largest_hi']:.1f} | {r['rise']:+.1f} ({r['rise_at']}) | "
                         f"{r['fall']:+.1f} ({r['fall_at']}) | {r['top_base']:.1f} | {r['top']:.1f} |")


def rotation_off_markdown(rows, title):
    return _md(title, "| configuration: attention share | baseline % | rotation on % | rotation off % | "
               "off − on points | fell |", rows,
               lambda r: f"| {r['config']}: {r['share']} | {r['base']:.2f} | {r['on']:.2f} | "
                         f"{r['off']:.2f} | {r['points']:+.2f} | {r['fell']}/{r['n']} |")


def spread_markdown(rows, title):
    return _md(title, "| configuration | seeds | SD baseline | SD configuration | SD paired Δ | "
               "SD unpaired Δ | paired / unpaired |", rows,
               lambda r: f"| {r['config']} | {r['n']} | {r['sd_base']:.4f} | {r['sd_config']:.4f} | "
                         f"{r['sd_paired']:.4f} | {r['sd_unpaired']:.4f} | {r['ratio']:.2f} |")


def noise_markdown(r):
    return _md(f"noise floor: {r['config']} at seed {r['seed']}, final validation loss (appendix §2; paper, "
               f"web pages: 0.0023 over 3 replicates, 0.0109 over 10 seeds = 21%, 11% of the depth effect)",
               "| replicates | SD | range | seeds | SD over seeds | replicate SD / seed SD | "
               "paired Δ vs baseline | replicate SD / abs(Δ) |", [r],
               lambda r: f"| {r['replicates']} | {r['sd']:.4f} | {r['range']:.4f} | {r['seeds']} | "
                         f"{r['sd_seeds']:.4f} | {100 * r['of_seeds']:.0f}% | "
                         f"{r['delta']:+.4f} vs {r['baseline']} ({r['paired_seeds']} seeds) | "
                         f"{100 * r['of_effect']:.0f}% |")


KEY_KINDS = ("after_close", "after_leaf", "new_block", "row_end", "copied_above", "cell_ref")
COLUMNS = ["config", "n", "delta", "se", "t", "p", "ci_lo", "ci_hi", "won", "sign_p", "q", "ppl_reduction"]


def markdown(rows, title):
    return _md(title, "| configuration | Δ nats/token | SE | t | p | 95% CI | won | sign p | q | "
               "ppl reduction % |", rows,
               lambda r: f"| {named(r)} | {r['delta']:+.4f} | {r['se']:.4f} | {r['t']:.2f} | "
                         f"{r['p']:.3g} | [{r['ci_lo']:+.4f}, {r['ci_hi']:+.4f}] | {r['won']}/{r['n']} | "
                         f"{r['sign_p']:.3g} | {r['q']:.3g} | {r['ppl_reduction']:+.2f} |")


def write_csv_rows(rows, path):
    with replacing(path) as tmp, open(tmp, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def write_csv(rows, path):
    with replacing(path) as tmp, open(tmp, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["setting", "step", "baseline", "base_loss", "differs"] + COLUMNS)
        w.writeheader()
        for r in rows:   # the setting as words, not a tuple's repr
            w.writerow({**{k: r.get(k, "") for k in w.fieldnames}, "setting": setting_name(r["setting"])})


def references_markdown(data_dir, r):
    def pct(k, of):
        return f"{100 * r[k] / max(r[of], 1):.2f}%"
    meta = os.path.join(data_dir, "meta.json")
    synthetic = os.path.exists(meta) and json.load(open(meta)).get("synthetic")
    return _md(f"references in {data_dir}{' (SYNTHETIC)' if synthetic else ''}, all splits (appendix §5; "
               f"paper: 17.25% of spreadsheet references name another sheet; Python 20.6% of tokens "
               f"affected, 91.7% of whole-path overwrites shorter, by 3.13 levels)",
               "| tokens | reference tokens | tokens affected | references | "
               "target under another level-1 node (sheet) | whole path shorter | "
               "levels lost, shorter ones / all |", [r],
               lambda r: f"| {r['tokens']:,} | {pct('reference_tokens', 'tokens')} | "
                         f"{pct('affected', 'tokens')} | {r['references']:,} | "
                         f"{pct('other_level1', 'references')} | {pct('shorter', 'references')} | "
                         f"{r['lost_shorter'] / max(r['shorter'], 1):.2f} / "
                         f"{r['lost'] / max(r['references'], 1):.2f} |")


# ---------------------------------------------------------------------- two runs, token by token ----
def token_gap(run_a, run_b, draws=2000, seed=0, split="test"):
    """Two runs scored on the same tokens (evaluate.py's eval_<split>_tokens.npz), paired token
    by token: mean Δ = a − b nats/token per kind, with a document-cluster bootstrap 95% CI."""
    for r in (run_a, run_b):
        if not os.path.exists(os.path.join(r, f"eval_{split}_tokens.npz")):
            raise SystemExit(f"error: {r} holds no eval_{split}_tokens.npz: run evaluate.py {r} first")
    za, zb = (np.load(os.path.join(r, f"eval_{split}_tokens.npz")) for r in (run_a, run_b))
    if not (np.array_equal(za["record"], zb["record"]) and np.array_equal(za["kind"], zb["kind"])):
        raise SystemExit("error: the two runs were not scored on the same tokens "
                         "(same data, split, --docs or --max_docs)")
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


def parse(argv):
    ap = Parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("root", nargs="?", help="out/<corpus> (or out/)")
    ap.add_argument("--baseline", default=None, help="default: seq_only (flat for hRoPE runs)")
    ap.add_argument("--figures", default=None, help="write PNG figures + their numbers here")
    ap.add_argument("--finished", action="store_true",
                    help="only finished runs (final.json): for a study still running")
    ap.add_argument("--depth", nargs="+", metavar="NPZ", help="cell accumulators depth_<split>.npz: model "
                    "[control]; Table 3 reads the depth_read_<split>.npz beside each where there is one; "
                    "then the App. A.6/A.7 diagnostics, and with --figures Fig. 2 and the A.6 heatmaps")
    ap.add_argument("--tokens", nargs=2, metavar="RUN", help="pair two runs token by token (evaluate.py npz)")
    ap.add_argument("--draws", type=at_least_one, default=2000)
    ap.add_argument("--boundary", metavar="ROOT",
                    help="paper 004 Table 1 from evaluate.py --boundary sums under ROOT")
    ap.add_argument("--split", default="test", help="with --boundary: the split evaluate.py scored")
    ap.add_argument("--hubs", nargs="+", metavar="RUN", help="paper 004 Table 13 from evaluate.py --hubs: "
                    "the seeds of one configuration, each document's cells summed over them")
    ap.add_argument("--paragraphs", nargs="+", metavar="CONFIG_DIR", help="paper 004 Tables 5 and 9 from "
                    "evaluate.py --paragraphs: one out/<corpus>/hrope_axial per corpus, its seeds pooled")
    ap.add_argument("--gate", type=at_least_one, default=400,
                    help="with --paragraphs: pairs a baseline cell needs (A.10: 400)")
    ap.add_argument("--embedder", default=None, help="with --paragraphs / --candidates: a local "
                    "sentence-embedding model folder (default: the stand-in embedding)")
    ap.add_argument("--candidates", nargs="+", metavar="DATA", help="paper 004 Table 4 for prepared "
                    "paragraph corpora (hrope/candidates.py; no model)")
    ap.add_argument("--replicates", nargs="+", metavar="RUN", help="the noise floor: replicate runs of one "
                    "configuration at one seed (train.py --name), the published run first")
    ap.add_argument("--references", nargs="+", metavar="DATA", help="reference statistics of prepared "
                    "corpora (data/python, data/sheets; no model)")
    ap.add_argument("--contrast", nargs=2, metavar="ROOT", help="two studies trained alike but for their "
                    "data (out/<corpus> each): per configuration, the difference B − A of their paired Δs")
    return ap, ap.parse_args(argv)


# ------------------------------------------------------------------------------------ modes ----
# paper 004's tables: each its hrope layer's own entry point (python -m treerope.hrope.<layer>)
def hub_mode(args):
    return hubs.main(args.hubs + ["--split", args.split, "--draws", str(args.draws)])


def paragraphs_mode(args):
    extra = ["--embedder", args.embedder] if args.embedder else []
    return paragraph_depth.main(args.paragraphs + ["--split", args.split, "--gate", str(args.gate)] + extra)


def candidates_mode(args):
    extra = ["--embedder", args.embedder] if args.embedder else []
    return candidates.main(args.candidates + ["--draws", str(max(args.draws, 1000))] + extra)


def boundary_mode(args):
    return boundaries.main([args.boundary, "--split", args.split, "--draws", str(max(args.draws, 4000))])


def tokens_mode(args):
    print(f"### token-paired Δ = {args.tokens[0]} − {args.tokens[1]} "
          "(nats/token, document-cluster bootstrap)\n")
    print("| kind | tokens | documents | Δ | 95% CI |\n| --- | ---: | ---: | ---: | --- |")
    for k, r in token_gap(*args.tokens, draws=args.draws).items():
        print(f"| {k} | {r['tokens']} | {r['documents']} | {r['delta']:+.4f} | "
              f"[{r['ci_lo']:+.4f}, {r['ci_hi']:+.4f}] |")


def replicates_mode(args):
    print(noise_markdown(noise_floor(args.replicates, args.baseline or "seq_only")))


def references_mode(args):
    print("\n\n".join(references_markdown(d, reference_stats(d)) for d in args.references))


def contrast_mode(args):
    """Each study's paired Δ and the difference between them, d_s = Δ_B,s − Δ_A,s (statistics.contrast),
    on validation at the last milestone all pairs reached and on the test split; the precision the runs
    trained at, over their lives, in each title."""
    a, b = (load_runs(root, args.finished) for root in args.contrast)
    baseline = args.baseline or "seq_only"
    shown = False
    for metric in ("val", "test"):
        rows, notes = contrast(a, b, baseline, metric)
        for line in notes if metric == "val" else ():
            print(line + "\n")
        for r in rows:
            print(contrast_markdown(r, metric, *args.contrast) + "\n")
            shown = True
    if not shown:
        raise SystemExit(f"error: no configuration of {args.contrast[0]} and {args.contrast[1]} pairs with "
                         f"{baseline} at the same seeds in one setting, trained alike but for their data")


def contrast_markdown(r, metric, root_a, root_b):
    """A contrast row under A's and B's own rows, then its seeds: Δ_A, Δ_B and d = Δ_B − Δ_A."""
    a, b = r["delta_a"], r["delta_b"]
    precision = ", ".join(f"bf16={int(x)} compile={int(y)}" for x, y in r["precision"])
    at = {BEST: BEST, "final": "the final step"}.get(r["step"], f"step {r['step']}")
    def cell(row):
        name, x = row
        return (f"| {name} | {x['delta']:+.4f} | {x['se']:.4f} | {x['t']:.2f} | {x['p']:.3g} | "
                f"[{x['ci_lo']:+.4f}, {x['ci_hi']:+.4f}] | {x['won']}/{x['n']} | {x['sign_p']:.3g} | "
                f"{x['ppl_reduction']:+.2f} | [{x['ppl_lo']:+.2f}, {x['ppl_hi']:+.2f}] |")
    table = _md(f"{title(r['setting'])}: {metric} Δ ({r['config']} − {r['baseline']}) at {at}, "
                f"A = {root_a}, B = {root_b}; every run at {precision}",
                "| | Δ nats/token | SE | t | p | 95% CI | won | sign p | ppl reduction % | ppl 95% CI |",
                [("A", a), ("B", b), ("B − A", r)], cell)
    seeds = "\n".join(f"| {s} | {a['per_seed'][s]:+.4f} | {b['per_seed'][s]:+.4f} | {d:+.4f} |"
                      for s, d in r["per_seed"].items())
    return (f"{table}\n\nB − A: the difference between the paired Δs, seed by seed (won: seeds where the "
            f"Δ is below 0; in the last row, where B's Δ is below A's)\n\n| seed | Δ_A | Δ_B | "
            f"d = Δ_B − Δ_A |\n| ---: | ---: | ---: | ---: |\n{seeds}")


def depth_mode(args):
    return compression.main(args.depth + ["--draws", str(args.draws)]
                            + (["--figures", args.figures] if args.figures else []))


# analyze.py --flag ...: each flag one mode, the first given wins; without one, a study's tables
MODES = (("hubs", hub_mode), ("paragraphs", paragraphs_mode), ("candidates", candidates_mode),
         ("boundary", boundary_mode), ("tokens", tokens_mode), ("depth", depth_mode),
         ("replicates", replicates_mode), ("references", references_mode), ("contrast", contrast_mode))


def print_deltas(runs, baseline, figure_dir):
    """Every configuration against the baseline: validation at the last shared milestone, test at the
    end, per kind of token (Fig. 5), and with its structure shuffled or removed."""
    printed = False
    for metric in ("val", "test"):
        rows = compare(runs, baseline, metric)
        if not rows:
            continue
        printed = True
        by_setting = defaultdict(list)
        for r in rows:
            by_setting[r["setting"], r["step"]].append(r)
        for (setting, step), rs in by_setting.items():
            corpus, L, E, H, T, steps, packed = setting[:7]
            at = step if step == BEST else f"step {step}"
            print(markdown(rs, f"{title(setting)} ({L} layers, d={E}, {H} head{'s' * (H > 1)}, context {T}, "
                               f"{steps} steps{', records packed' if packed else ''}): "
                               f"{metric} Δ vs {baseline} at {at}"))
            print()
        if figure_dir:
            write_csv(rows, os.path.join(figure_dir, f"table_{metric}.csv"))
    if not printed and len({c for s in runs.values() for c in s}) > 1:
        print(f"note: no paired table: no seed of any configuration shares a milestone or a final test "
              f"score with {baseline} in the same setting (same steps, model and seed)\n")
    spread = seed_spread(runs, baseline)
    for setting in sorted({r["setting"] for r in spread}):
        print(spread_markdown([r for r in spread if r["setting"] == setting],
                              f"{title(setting)}: seed-to-seed SD of validation loss, paired and unpaired "
                              "(appendix §1)"))
        print()
    kinds = compare_kinds(runs, baseline)
    for setting in sorted({r["setting"] for r in kinds}):
        print(kinds_markdown([r for r in kinds if r["setting"] == setting],
                             f"{title(setting)}: test Δ vs {baseline} by kind of token (Fig. 5)"))
        print()
    intervened = compare_intervened(runs, baseline)
    for setting in sorted({r["setting"] for r in intervened}):
        print(markdown([r for r in intervened if r["setting"] == setting],
                       f"{title(setting)}: test Δ vs {baseline} as it is, with the configuration's structure "
                       "shuffled or removed"))
        print()
    return kinds


def print_interventions(runs):
    """Coordinate interventions per configuration, and paper 004's p1 substitutions (Table 2, §4.3)."""
    inter = interventions(runs)
    for setting in sorted({r["setting"] for r in inter}):
        print(interventions_markdown([r for r in inter
                                      if r["setting"] == setting and r["kind"] in ("all",) + KEY_KINDS],
                                     f"{title(setting)}: coordinate interventions on the test split "
                                     "(mean over seeds)"))
        print()
    across = defaultdict(list)      # configuration -> [(corpus, its adjacent comparisons)]
    # Table 2 is "Validation loss under p1 substitution": eval_val.json where the runs have it
    val = on_split(runs, "eval_val")
    split, scored = ("validation", val) if substitution(interventions(val)) else ("test", runs)
    if split == "test" and substitution(inter):
        print("note: Table 2 below is on the test split: the paper's is validation "
              "(python evaluate.py RUN --split val)\n")
    for r in substitution(interventions(scored)):
        v = substitution_seeds(scored, r["setting"], r["config"])
        across[r["config"]].append((title(r["setting"]), substitution_overlap(v)))
        print(table2_markdown(r, v, split) + "\n")
    for config, per in across.items():
        if len(per) > 1:
            print(table2_signs_markdown(config, per) + "\n")
    for r in interventions(scored):   # the reverse substitution: true p1 fed to a model trained on labels
        if r["intervention"] == "real" and r["kind"] == "all":
            print(f"### {title(r['setting'])}: true p1 fed to {r['config']}, {split} (paper 004 §4.3 reverse "
                  f"substitution; paper, period_axial: +0.015 to +0.040 nats)\n\n| own coordinate | "
                  f"true p1 | Δ nats/token | higher in |\n| ---: | ---: | ---: | ---: |\n| {r['real']:.4f} | "
                  f"{r['real'] + r['delta']:.4f} | {r['delta']:+.4f} | {r['hurt']}/{r['n']} seeds |\n")
    return inter


def print_variants_and_attention(runs, baseline):
    """Paper 004 Tables 12 and 8 (hRoPE variants' validation loss, the probe), then attention shares."""
    for t in table12(runs):
        print(table12_markdown(t))
        print()
    for t in boundaries.table8(runs):
        print(boundaries.table8_markdown(t))
        print()
    att = compare_attention(runs, baseline)
    for setting in sorted({r["setting"] for r in att}):
        print(attention_markdown([r for r in att if r["setting"] == setting],
                                 f"{title(setting)}: attention shares vs {baseline}, mean over heads (test)"))
        print()
    heads = head_shifts(runs, baseline)
    for setting in sorted({r["setting"] for r in heads}):
        print(heads_markdown([r for r in heads if r["setting"] == setting],
                             f"{title(setting)}: attention shares vs {baseline}, head by head, "
                             "paired at each seed (test)"))
        print()
    off = rotation_off(runs, baseline)
    for setting in sorted({r["setting"] for r in off}):
        print(rotation_off_markdown([r for r in off if r["setting"] == setting],
                                    f"{title(setting)}: attention shares with the structural rotation "
                                    "switched off, mean over heads (test)"))
        print()


def write_figures(runs, baseline, kinds, inter, out_dir):
    if kinds:
        figures.figure_kinds(kinds, out_dir)
        write_csv_rows(kinds, os.path.join(out_dir, "table_kinds.csv"))
    if inter:
        write_csv_rows(inter, os.path.join(out_dir, "table_interventions.csv"))
    figures.figure_columns(runs, out_dir)
    figures.figure_demo(runs, out_dir)
    figures.figure_gap(milestone_gaps(runs, baseline), baseline, out_dir)
    rows = compare(runs, baseline, "val")
    planes = {}
    for r in rows:   # a layer or head split by its real cost: rotating planes averaged over layers and heads
        try:
            rot = Rotary(r["config"], 128, r["setting"][1])
            per_layout = [np.mean(heads) for heads in rot.count()[0]]
            planes[r["config"]] = float(np.mean([per_layout[i] for i in rot.layer_layout]))
        except (ValueError, KeyError):
            pass
    figures.figure_planes(rows, out_dir, planes)
    print(f"figures written to {out_dir}")


def main(argv=None):
    ap, args = parse(argv)
    for flag, mode in MODES:
        if getattr(args, flag):
            return mode(args)
    if not args.root:
        ap.error("give out/<corpus> or --depth")
    if not os.path.isdir(args.root):
        sys.exit(f"error: no such folder: {args.root}")
    runs = load_runs(args.root, args.finished)
    if not runs:
        raise SystemExit(f"no runs under {args.root}")
    if args.figures:   # before the tables: a folder that cannot be written is one line, not a traceback
        writable(args.figures, "choose another --figures folder")
    # a variant's label as its rows print it ("seq_depth_hot (lr 0.004)") names it as its name does
    labels = {named({**r, "config": c}): c for s in runs.values() for c, seeds in s.items()
              for r in seeds.values()}
    parts = defaultdict(dict)   # each setting against its own default baseline, unless --baseline is given
    for setting, configs in runs.items():
        parts[labels.get(args.baseline, args.baseline) or default_baseline(configs)][setting] = configs
    for baseline, part in sorted(parts.items()):
        if len(parts) > 1:   # a folder of tree and hRoPE corpora: one part per baseline, none left out
            print(f"## against {baseline}: {', '.join(sorted({title(s) for s in part}))}\n")
        mixed = args.figures and len(parts) > 1
        tables(args.root, part, baseline, os.path.join(args.figures, baseline) if mixed else args.figures)


def default_baseline(configs):
    """flat for a setting of hRoPE variants (paper 004's baseline), seq_only otherwise."""
    hrope = "seq_only" not in configs and ("flat" in configs or any(n.endswith("_axial") for n in configs))
    return "flat" if hrope else "seq_only"


def tables(root, runs, baseline, figure_dir):
    """A study's tables against one baseline (and with figure_dir its figures)."""
    names = {c for s in runs.values() for c in s}
    if baseline not in names or len(names) < 2:   # nothing pairs: say what to train, or which --baseline
        missing = baseline if baseline not in names else "a second configuration (e.g. seq_depth)"
        print(f"note: no paired table: {root} holds {', '.join(sorted(names))}; train {missing} "
              "at the same seeds (python train.py --config NAME --seed K)"
              + (", or pass --baseline with one of them" if baseline not in names and len(names) > 1 else "")
              + "\n")
    kinds = print_deltas(runs, baseline, figure_dir)
    inter = print_interventions(runs)
    print_variants_and_attention(runs, baseline)
    if figure_dir:
        writable(figure_dir, "choose another --figures folder")
        write_figures(runs, baseline, kinds, inter, figure_dir)

if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit("\ninterrupted")
