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
    python analyze.py --replicates out/web/seq_depth/seed0 out/web/seq_depth_rep1/seed0 \\
        out/web/seq_depth_rep2/seed0
    python analyze.py --references data/python data/sheets   # reference statistics (corpus only)

Runs are paired by seed within a setting (corpus + model size + context + steps) and compared
only at milestones both reached (depth-perception appendix §1).
"""
import argparse
import csv
import glob
import json
import math
import os
import re
import sys
from collections import defaultdict, namedtuple

import numpy as np
from scipy import stats

import figures
import trees
from configs import reference_stats
from data import read_json, replacing, writable
from hrope import boundaries, candidates, compression, hubs
from hrope.compression import ci, resample_weights
from paper_settings import SETTINGS
from resuming import read_config
from rotary import Rotary, known


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
            "won": wins, "sign_p": sign_test(wins, n - ties), "ppl_reduction": ppl_reduction(mean),
            # the 95% CI in perplexity reduction (one seed: the point itself)
            "ppl_lo": ppl_reduction(mean + half) if n > 1 else ppl_reduction(mean),
            "ppl_hi": ppl_reduction(mean - half) if n > 1 else ppl_reduction(mean)}


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
    """A run's validation loss as it reports it: a finished run under its reporting rule (final.json's
    `reported`: a --report best_milestone run at its best milestone, appendix §4 "Evaluation"; else
    the final step), a run still training at its last milestone."""
    f = run.get("final")
    if best_milestone(run):   # diverged before its first milestone: nothing to report (NaN, not a crash)
        v = f["reported"]["val_loss"]
        return float("nan") if v is None else v
    return f["val_loss"] if f else run["log"][max(run["log"])]["val_loss"]


BEST = "the reported milestone"   # compare()'s step for a comparison with a best-milestone run


def best_milestone(run):
    """Whether a finished run reports its best milestone rather than its final step (train.reported)."""
    return bool(run.get("final")) and run["final"].get("report") == "best_milestone"


HROPE_VARIANTS = ("flat", "sent_axial", "hrope_axial", "rand_axial")

# Losses closer than this are tied, neither below the other: half the last digit Tables 2 and 12 print
# (our reading; §4.3 and App. D name no tolerance, and four losses that all print 5.3958 hold no order)
TIE = 5e-5


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
                pairs.append({"a": a, "b": b, "n": len(seeds), "higher": int((d > TIE).sum()),
                              "mean": float(d.mean()),
                              "disjoint": max(va) + TIE < min(vb) or max(vb) + TIE < min(va),
                              "sign_p_one_sided": float(stats.binomtest(int((d > TIE).sum()), len(seeds), 0.5,
                                                                        alternative="greater").pvalue)})
        out.append({"setting": setting,
                    "stats": {v: (x.mean(), x.std(ddof=1) if len(x) > 1 else float("nan"), len(x))
                              for v, x in stat.items()}, "pairs": pairs})
    return out


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


# ---------------------------------------------------------------------------------- runs ----
# A setting: what the tables name (corpus, model size, context, steps, packing), then everything else
# its runs agree on (`training`, a JSON key) and, where runs differ in it, the words that say how (`tag`)
Setting = namedtuple("Setting", "corpus n_layer n_embd n_head max_len steps packed training tag",
                     defaults=("", ""))
# Run values paired runs may differ in: the configuration and seed (what is compared), the name, the
# flags given, what train.py lets a resume change (nothing computed changes), and bf16 and compile,
# compared over the run's life instead (training())
PAIR_FREE = ("config", "seed", "name", "given", "resume", "device", "data", "out", "mb_tokens", "precision",
             "bf16", "compile", "passes", "lr_sweep")


def training(c, log):
    """What a run trained on and how, beyond its named setting: every run value but PAIR_FREE's (the
    data's identity and the recipe among them), the model, and bf16 and compile over its life."""
    r = c["run"]
    key = {k: v for k, v in r.items() if k not in PAIR_FREE}
    key["model"] = {k: v for k, v in c["model"].items() if k not in ("rotary", "dropout")}
    key["precision"] = sorted({(bool(e.get("bf16")), bool(e.get("compile", r.get("compile")))) for e in log}
                              | {(bool(r.get("bf16")), bool(r.get("compile")))})
    return key


def variant(r):
    """Whether a run is a named variant of its configuration (train.py --name other than the config)."""
    return bool(r.get("name")) and r["name"] != r["config"]


def varied(r):
    """(the run values a run may change and still pair, those of them its row names where they differ):
    those its setting's per_config gives its configuration (web_large's lr for no_position), and the
    flags a named variant (--name) was given, named in its row; a run named as its configuration is no
    variant: it pairs only where alike."""
    per_config = set(SETTINGS.get(r.get("setting"), {}).get("per_config", {}).get(r["config"], {}))
    given = set(r.get("given", ())) if variant(r) else set()
    return per_config | given, given - per_config


def setting_of(c):
    """A run's named setting from its config.json: corpus, model size, context, steps (appendix §1),
    and whether its records were packed into blocks (train.py --pack: another batch)."""
    m, r = c["model"], c["run"]
    return Setting(r["corpus"], m["n_layer"], m["n_embd"], m["n_head"], m["max_len"], r["steps"],
                   bool(r.get("pack")))


def setting_name(s):
    corpus, n_layer, n_embd, n_head, max_len, steps, packed = s[:7]
    return (f"{corpus} {n_layer}L d{n_embd} {n_head}h ctx{max_len} {steps} steps"
            + (" packed" if packed else "") + (f" [{s.tag}]" if getattr(s, "tag", "") else ""))


def title(s):
    """A setting's corpus, with what sets its runs apart from others of that corpus where any do."""
    return s[0] + (f" [{s.tag}]" if getattr(s, "tag", "") else "")


def short(v):
    """A value of a training key in a few characters (a data identity by its hash)."""
    return v["meta"] if isinstance(v, dict) and "meta" in v else json.dumps(v)[:40]


def group_by_training(entries):
    """{setting: {name: {seed: run}}} from (named setting, training key, (varied keys, shown keys), name,
    seed, run): a run joins every group of its named setting whose key it agrees with outside the keys
    either may vary (runs that vary nothing found the groups), or founds its own, its row naming the
    shown keys it differs in (a variant's values); groups of one named setting get one note line
    naming what differs, and a tag with their own values."""
    groups = []
    for s, key, (free, shown), name, seed, run in sorted(entries, key=lambda e: len(e[2][0])):
        joins = [g for g in groups if g["s"] == s and all(
            g["key"].get(k) == key.get(k) for k in (set(key) | set(g["key"])) - free - g["free"])]
        if not joins:
            joins = [{"s": s, "key": key, "free": free, "runs": defaultdict(dict)}]
            groups += joins
        for g in joins:   # a variant's row names the values it differs in from the runs it pairs with
            differs = ", ".join(f"{k} {short(key.get(k))}" for k in sorted(shown - g["free"])
                                if key.get(k) != g["key"].get(k))
            label = name   # seeds of one label are alike: one of another value is tabled apart
            if any(r["differs"] != differs for r in g["runs"][name].values()):
                label = f"{name} ({differs or 'as trained'})"
            if seed in g["runs"][label]:   # a run copied, or renamed beside itself: it would be counted twice
                sys.exit(f"error: {g['runs'][label][seed]['dir']} and {run['dir']} are both {label} seed "
                         f"{seed}, trained alike (a copied run folder?); remove one")
            g["runs"][label][seed] = {**run, "differs": differs}
    runs = {}
    for s in {g["s"] for g in groups}:
        same = [g for g in groups if g["s"] == s]
        keys = [g["key"] for g in same]
        differ = sorted({k for key in keys for k in set(key) | set(keys[0]) if key.get(k) != keys[0].get(k)})
        if differ:
            print(f"note: runs of {setting_name(s)} differ in "
                  + "; ".join(f"{k} ({' | '.join(short(key.get(k)) for key in keys)})" for k in differ)
                  + ": not paired, each in its own tables")
        for g in same:
            tag = ", ".join(f"{k} {short(g['key'].get(k))}" for k in differ)
            runs[s._replace(training=json.dumps(g["key"], sort_keys=True), tag=tag)] = g["runs"]
    return runs


def load_runs(root, finished=False):
    """{setting: {config: {seed: run}}} from out/<corpus>/<config>/seed<k>/; with `finished`, only
    runs that wrote final.json (a seed still training would hold every pair to its milestone)."""
    entries = []
    fix = "delete that run, or train it again (train.py ... --resume=0)"
    for cfg_path in glob.glob(os.path.join(root, "**", "config.json"), recursive=True):
        d = os.path.dirname(cfg_path)
        c = read_config(d, fix)
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
            final = read_json(os.path.join(d, "final.json"), fix)
        if finished and final is None:
            continue
        r = c["run"]
        if r.get("name") and r["name"] != r["config"] and known(r["name"]):   # train.py now refuses it
            print(f"note: {d} is named {r['name']}, a configuration's name, but trained {r['config']}: "
                  "left out (train it again under another --name)")
            continue
        run = {"log": {e["step"]: e for e in log}, "final": final, "dir": d}
        for key, name in (("eval", "eval_test.json"), ("eval_val", "eval_val.json"),
                          ("attention", "attention_test.json"),
                          ("attention_off", "attention_test_rotation_off.json")):
            if os.path.exists(os.path.join(d, name)):   # written by evaluate.py
                run[key] = read_json(os.path.join(d, name), f"delete it and rerun evaluate.py {d}")
        for key in ("eval", "eval_val"):   # scored before the run's last step: not this run's
            if key in run and stale(run[key], final):
                print(f"note: {d}'s {key} scored the checkpoint at step {run[key].get('checkpoint_step')}, "
                      f"not the final step: left out (rerun evaluate.py {d})")
                del run[key]
        entries.append((setting_of(c), training(c, log), varied(r), r["name"] if variant(r) else r["config"],
                        r["seed"], run))                                        # --name: a config's variant
    return group_by_training(entries)


def stale(evaluation, final):
    """An evaluation of an unfinished run, or of a checkpoint older than the run's final step."""
    return evaluation.get("unfinished", False) or (
        final is not None and evaluation.get("checkpoint_step", final["step"]) != final["step"])


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
            elif any(best_milestone(seeds[s]) or best_milestone(base[s]) for s in common):
                # appendix §4: the one run reported at its best milestone is compared at that value,
                # labelled, never at a step it shares with the baseline
                deltas = [final_val(seeds[s]) - final_val(base[s]) for s in common
                          if seeds[s]["final"] and base[s]["final"]]
                step = BEST
            else:
                steps = (set.intersection(*[set(seeds[s]["log"]) & set(base[s]["log"]) for s in common])
                         if common else set())
                if not steps:
                    continue
                step = max(steps)
                deltas = [seeds[s]["log"][step]["val_loss"] - base[s]["log"][step]["val_loss"]
                          for s in common]
            if not deltas:
                continue
            rows.append({"setting": setting, "config": name, "baseline": baseline, "step": step,
                         "differs": next(iter(seeds.values())).get("differs", ""),   # a variant's values
                         "base_loss": float(np.mean([base[s]["log"][max(base[s]["log"])]["val_loss"]
                                                     for s in common])),
                         **paired(deltas)})
    q = bh([r["p"] for r in rows])
    for r, qi in zip(rows, q):
        r["q"] = qi
    return rows


def _with_bh(rows):
    for r, q in zip(rows, bh([r["p"] for r in rows])):
        r["q"] = q
    return rows


def same_records(a, b):
    """Two evaluate.py results scored the same records of the same data (the split, how many, which:
    `record_ids`, and the data's hash; an evaluation from before those were kept: split and count)."""
    return all(a.get(k) == b.get(k) for k in ("split", "records", "record_ids", "data"))


def evaluated_pairs(runs, baseline, key="eval", note=False):
    """(setting, configuration, its seeds, the baseline's seeds, seeds both have `key` for, evaluated
    on the same records) for every configuration other than the baseline with at least one such seed;
    with `note`, a line for each pair of evaluations left out because their records differ."""
    for setting, configs in sorted(runs.items()):
        base = configs.get(baseline, {})
        for name, seeds in sorted(configs.items()):
            common = [s for s in sorted(set(seeds) & set(base)) if key in seeds[s] and key in base[s]]
            other = [s for s in common if not same_records(seeds[s].get("eval", {}), base[s].get("eval", {}))]
            if note and other and name != baseline:
                print(f"note: {title(setting)} {name} and {baseline} were evaluated on other records at "
                      f"seed(s) {', '.join(map(str, other))} (evaluate.py --max_docs, --split or data): "
                      "left out")
            common = [s for s in common if s not in other]
            if name != baseline and common:
                yield setting, name, seeds, base, common


def compare_kinds(runs, baseline):
    """Where the gain lands (appendix §2, Fig. 5): per token kind, the paired test-split Δ of
    each configuration against the baseline, from evaluate.py's eval_test.json."""
    rows = []
    for setting, name, seeds, base, common in evaluated_pairs(runs, baseline, note=True):
        kinds = set.intersection(*[set(seeds[s]["eval"]["kinds"]) & set(base[s]["eval"]["kinds"])
                                   for s in common])
        for kind in sorted(kinds, key=lambda k: (k != "all", k)):
            d = [seeds[s]["eval"]["kinds"][kind]["nll"] - base[s]["eval"]["kinds"][kind]["nll"]
                 for s in common]
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
                    d = np.array([e["interventions"][t][kind]["nll"] - e["kinds"][kind]["nll"]
                                  for e in evals])
                    rows.append({
                        "setting": setting, "config": name, "intervention": t, "kind": kind, "n": len(d),
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
                d = [seeds[s]["eval"]["interventions"][t]["all"]["nll"]
                     - base[s]["eval"]["kinds"]["all"]["nll"] for s in common]
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


SUBSTITUTES = ("real", "period", "rand", "const0")     # paper 004 §4.3's order, best first


def on_split(runs, key):
    """`runs` with each run's evaluation `key` (eval_val: evaluate.py --split val) as its "eval"."""
    return {setting: {c: {s: {**r, "eval": r[key]} for s, r in seeds.items() if key in r}
                      for c, seeds in configs.items()} for setting, configs in runs.items()}


def substitution_seeds(runs, setting, config):
    """(conditions, seeds) nats/token on all tokens under each of SUBSTITUTES, one column
    per seed scored under all four."""
    evals = [s["eval"] for s in runs[setting][config].values()
             if "eval" in s and all(k in s["eval"]["interventions"] for k in SUBSTITUTES[1:])]
    return np.array([[e["kinds"]["all"]["nll"] for e in evals]] +
                    [[e["interventions"][k]["all"]["nll"] for e in evals] for k in SUBSTITUTES[1:]]
                    ).reshape(4, len(evals))


def substitution_order(v):
    """Seeds in which real < period < rand < const0 (paper 004 §4.3), each step by more than TIE,
    of how many."""
    return int((np.diff(v, axis=0) > TIE).all(0).sum()), v.shape[1]


def substitution_overlap(v):
    """Paper 004 §4.3's check beside Table 2, "each adjacent comparison has non-overlapping seed
    ranges with consistent sign across corpora": per adjacent pair (a, b) of the order, the seed
    ranges [min, max] of a and of b, whether they are disjoint, and the mean of b − a (+: the
    order's direction), whose sign is compared across corpora."""
    return [{"a": SUBSTITUTES[i], "b": SUBSTITUTES[i + 1], "range_a": (v[i].min(), v[i].max()),
             "range_b": (v[i + 1].min(), v[i + 1].max()), "mean": float((v[i + 1] - v[i]).mean()),
             "disjoint": bool(v[i].max() + TIE < v[i + 1].min() or v[i + 1].max() + TIE < v[i].min())}
            for i in range(3)]


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


def head_shifts(runs, baseline):
    """Individual heads (appendix §2: "Individual heads move 15–37 points in either direction"): per
    share, each head's paired shift (configuration − baseline at one seed, points). At one seed both
    start from identical weights (§5), so head (layer, h) of one is head (layer, h) of the other;
    across seeds heads share no role, so a head's shifts are not averaged over seeds (our reading)."""
    rows = []
    for setting, name, seeds, base, common in evaluated_pairs(runs, baseline, "attention"):
        for key, v in seeds[common[0]]["attention"].items():
            if "per_layer_head" not in v:
                continue
            def head(r, s):     # (L, H)
                return 100 * np.asarray(r[s]["attention"][key]["per_layer_head"], float)

            def where(i):
                return "seed {} L{}H{}".format(common[i[0]], i[1], i[2])
            d = np.stack([head(seeds, s) - head(base, s) for s in common])     # (seeds, L, H)
            rows.append({"setting": setting, "config": name, "share": key, "n": len(common),
                         "heads": d[0].size, "mean": float(d.mean()),
                         "largest_lo": float(np.abs(d).max((1, 2)).min()),
                         "largest_hi": float(np.abs(d).max((1, 2)).max()),    # per seed, its most-moved head
                         "rise": float(d.max()), "rise_at": where(np.unravel_index(d.argmax(), d.shape)),
                         "fall": float(d.min()), "fall_at": where(np.unravel_index(d.argmin(), d.shape)),
                         "top_base": float(np.mean([head(base, s).max() for s in common])),
                         "top": float(np.mean([head(seeds, s).max() for s in common]))})
    return rows


def rotation_off(runs, baseline):
    """What switching the rotation off does to the attention (appendix §2; evaluate.py --rotation_off):
    per share, the mean over seeds with the configuration's structural rotation on and off, the paired
    change off − on in points and in how many seeds the share fell; the baseline's share beside them."""
    rows = []
    for setting, configs in sorted(runs.items()):
        for name, seeds in sorted(configs.items()):
            have = [s for s in sorted(seeds) if "attention_off" in seeds[s] and "attention" in seeds[s]]
            for key, v in (seeds[have[0]]["attention_off"].items() if have else ()):
                if not isinstance(v.get("mean_over_heads"), float):
                    continue
                on, off = (np.array([100 * seeds[s][f][key]["mean_over_heads"] for s in have])
                           for f in ("attention", "attention_off"))
                base = [100 * r["attention"][key]["mean_over_heads"]
                        for s, r in configs.get(baseline, {}).items() if s in have and "attention" in r]
                rows.append({"setting": setting, "config": name, "share": key, "n": len(have),
                             "base": float(np.mean(base)) if base else float("nan"), "on": float(on.mean()),
                             "off": float(off.mean()), "points": float((off - on).mean()),
                             "fell": int((off < on).sum())})
    return rows


def milestone_gaps(runs, baseline):
    """Fig. 3's rows: every configuration against the baseline at each milestone all its paired
    seeds reached (paired Δ, its perplexity reduction and band)."""
    rows = []
    for setting, configs in sorted(runs.items()):
        base = configs.get(baseline)
        for name, seeds in sorted(configs.items()):
            common = sorted(set(seeds) & set(base or {}))
            if name == baseline or not common:
                continue
            steps = set.intersection(*[set(seeds[s]["log"]) & set(base[s]["log"]) for s in common])
            rows += [{"setting": setting, "config": name, "step": st,
                      **paired([seeds[s]["log"][st]["val_loss"] - base[s]["log"][st]["val_loss"]
                                for s in common])} for st in sorted(steps)]
    return rows


def seed_spread(runs, baseline):
    """Why everything is paired (appendix §1): at the last milestone every pair reached, the seed-to-seed
    SD of the baseline's and of the configuration's validation loss, the SD of their paired differences,
    and the SD an unpaired difference of the two would have, √(SD_baseline² + SD_configuration²)."""
    rows = []
    for r in compare(runs, baseline, "val"):
        configs = runs[r["setting"]]
        common = sorted(set(configs[r["config"]]) & set(configs[baseline]))
        at = final_val if r["step"] == BEST else (lambda run: run["log"][r["step"]]["val_loss"])
        b, c = (np.array([at(configs[k][s]) for s in common]) for k in (baseline, r["config"]))
        if len(common) > 1:
            sb, sc, sd = b.std(ddof=1), c.std(ddof=1), (c - b).std(ddof=1)
            rows.append({"setting": r["setting"], "config": r["config"], "step": r["step"], "n": len(common),
                         "sd_base": sb, "sd_config": sc, "sd_paired": sd, "sd_unpaired": math.hypot(sb, sc),
                         "ratio": sd / math.hypot(sb, sc) if sb or sc else float("nan")})
    return rows


# What replicates may differ in: the name, the flags given, and what train.py may change on resuming
# (resuming.RESUMABLE: none of it changes what is computed).
REPLICATE_FREE = ("name", "given", "resume", "device", "compile", "bf16", "precision", "data", "out")


def noise_floor(dirs, baseline):
    """The noise floor (appendix §2 "Run-to-run noise"): replicate runs of one configuration at one seed
    (train.py --name), the first the published run, against the spread of that configuration's
    published seeds (out/<corpus>/<its name>/seed*) and against its mean paired Δ to `baseline`, all
    at the final step. The paper: 0.0023 nats across three replicates, 0.0109 across ten seeds (21%),
    11% of the depth effect. Spread: the SD over runs (our reading; the range is printed beside it)."""
    configs = []
    for d in dirs:
        if not os.path.exists(os.path.join(d, "final.json")):
            raise SystemExit(f"error: {d} has no final.json; a replicate is compared at its final step")
        configs.append(read_config(d, "give the folders of finished runs"))
    def run(c):
        return {k: v for k, v in c["run"].items() if k not in REPLICATE_FREE}
    first = run(configs[0])
    differ = sorted({k for c in configs for k in set(run(c)) | set(first) if run(c).get(k) != first.get(k)}
                    | {"model" for c in configs if c["model"] != configs[0]["model"]})
    if len(dirs) < 2 or differ:
        raise SystemExit("error: give two or more replicates of one run "
                         f"(these differ in: {', '.join(differ) or 'nothing'})")
    reps = np.array([final_val(r) for d in dirs for s in load_runs(d, True).values()
                     for c in s.values() for r in c.values()])
    name = configs[0]["run"].get("name") or configs[0]["run"]["config"]
    study = os.path.dirname(os.path.dirname(os.path.abspath(dirs[0])))     # out/<corpus>
    published = next((cs for cs in load_runs(study, True).values() for seeds in cs.values()
                      for r in seeds.values() if os.path.samefile(r["dir"], dirs[0])), {})
    seeds = np.array([final_val(r) for r in published.get(name, {}).values()])
    common = sorted(set(published.get(name, {})) & set(published.get(baseline, {})))
    delta = (np.mean([final_val(published[name][s]) - final_val(published[baseline][s]) for s in common])
             if common else float("nan"))
    sd_rep = reps.std(ddof=1)
    sd_seeds = seeds.std(ddof=1) if len(seeds) > 1 else float("nan")
    return {"config": name, "seed": configs[0]["run"]["seed"], "replicates": len(reps), "sd": sd_rep,
            "range": float(np.ptp(reps)), "seeds": len(seeds), "sd_seeds": sd_seeds, "baseline": baseline,
            "paired_seeds": len(common), "delta": delta,
            "of_seeds": sd_rep / sd_seeds if sd_seeds else float("nan"),
            "of_effect": sd_rep / abs(delta) if delta else float("nan")}


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


def named(r):
    """A row's configuration, with the values a named variant differs in from its baseline."""
    return r["config"] + (f" ({r['differs']})" if r.get("differs") else "")


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
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("root", nargs="?", help="out/<corpus> (or out/)")
    ap.add_argument("--baseline", default=None, help="default: seq_only (flat for hRoPE runs)")
    ap.add_argument("--figures", default=None, help="write PNG figures + their numbers here")
    ap.add_argument("--finished", action="store_true",
                    help="only finished runs (final.json): for a study still running")
    ap.add_argument("--depth", nargs="+", metavar="NPZ", help="cell accumulators depth_<split>.npz: model "
                    "[control]; Table 3 reads the depth_read_<split>.npz beside each where there is one; "
                    "then the App. A.6/A.7 diagnostics, and with --figures Fig. 2 and the A.6 heatmaps")
    ap.add_argument("--tokens", nargs=2, metavar="RUN", help="pair two runs token by token (evaluate.py npz)")
    ap.add_argument("--draws", type=int, default=2000)
    ap.add_argument("--boundary", metavar="ROOT",
                    help="paper 004 Table 1 from evaluate.py --boundary sums under ROOT")
    ap.add_argument("--split", default="test", help="with --boundary: the split evaluate.py scored")
    ap.add_argument("--hubs", nargs="+", metavar="RUN", help="paper 004 Table 13 from evaluate.py --hubs: "
                    "the seeds of one configuration, each document's cells summed over them")
    ap.add_argument("--paragraphs", nargs="+", metavar="CONFIG_DIR", help="paper 004 Tables 5 and 9 from "
                    "evaluate.py --paragraphs: one out/<corpus>/hrope_axial per corpus, its seeds pooled")
    ap.add_argument("--gate", type=int, default=400,
                    help="with --paragraphs: pairs a baseline cell needs (A.10: 400)")
    ap.add_argument("--embedder", default=None, help="with --paragraphs / --candidates: a local "
                    "sentence-embedding model folder (default: the stand-in embedding)")
    ap.add_argument("--candidates", nargs="+", metavar="DATA", help="paper 004 Table 4 for prepared "
                    "paragraph corpora (hrope/candidates.py; no model)")
    ap.add_argument("--replicates", nargs="+", metavar="RUN", help="the noise floor: replicate runs of one "
                    "configuration at one seed (train.py --name), the published run first")
    ap.add_argument("--references", nargs="+", metavar="DATA", help="reference statistics of prepared "
                    "corpora (data/python, data/sheets; no model)")
    return ap, ap.parse_args(argv)


# ------------------------------------------------------------------------------------ modes ----
def hub_mode(args):
    print(hubs.hub_markdown(hubs.hub_table(args.hubs, args.split, draws=args.draws),
                            f"compression depth under hub masking, {len(args.hubs)} seed(s) pooled "
                            f"by document (paper 004 Table 13)"))


def paragraphs_mode(args):
    print(compression.paragraph_markdown(
        [compression.paragraph_regression(d, args.split, args.gate, args.embedder) for d in args.paragraphs]))


def candidates_mode(args):
    extra = ["--embedder", args.embedder] if args.embedder else []
    return candidates.main(args.candidates + ["--draws", str(max(args.draws, 1000))] + extra)


def boundary_mode(args):
    pooled = boundaries.boundary_pool(args.boundary, args.split)
    if not pooled:
        raise SystemExit(f"error: no boundary_{args.split}.npz under {args.boundary}; "
                         "run evaluate.py RUN --boundary first")
    print(boundaries.boundary_markdown(boundaries.boundary_table(pooled, max(args.draws, 4000)),
                                       f"{args.boundary}: normalised boundary effect, seeds pooled, "
                                       f"95% document-cluster bootstrap CIs (paper 004 Table 1)"))


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


def depth_mode(args):
    """Table 3, then the A.6/A.7 diagnostics of the headline binning; with --figures, Fig. 2 and
    the A.6 heatmaps."""
    print(compression.depth_report(args.depth[0], args.depth[1] if len(args.depth) > 1 else None, args.draws))
    read = [compression.read_paths(p) for p in args.depth[:2]]
    for p in read:
        print("\n" + compression.diagnostics_report(p))
    if args.figures:
        writable(args.figures, "choose another --figures folder")
        figures.figure_response(read, args.figures, args.draws)
        figures.figure_cells(read, args.figures)
        print(f"\nfigures written to {args.figures}")


# analyze.py --flag ...: each flag one mode, the first given wins; without one, a study's tables
MODES = (("hubs", hub_mode), ("paragraphs", paragraphs_mode), ("candidates", candidates_mode),
         ("boundary", boundary_mode), ("tokens", tokens_mode), ("depth", depth_mode),
         ("replicates", replicates_mode), ("references", references_mode))


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
            print(markdown(rs, f"{title(setting)} ({L} layers, d={E}, {H} heads, context {T}, {steps} steps"
                               f"{', records packed' if packed else ''}): "
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
    runs = load_runs(args.root, args.finished)
    if not runs:
        raise SystemExit(f"no runs under {args.root}")
    if args.figures:   # before the tables: a folder that cannot be written is one line, not a traceback
        writable(args.figures, "choose another --figures folder")
    parts = defaultdict(dict)   # each setting against its own default baseline, unless --baseline is given
    for setting, configs in runs.items():
        parts[args.baseline or default_baseline(configs)][setting] = configs
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
