"""The statistics analyze.py's tables report: runs read from out/ and grouped into settings, paired
by seed and compared at milestones both reached (depth-perception appendix §1: Δ, SE, t, p, the
95% CI, won k/n and its sign test, Benjamini-Hochberg q, perplexity reduction), per kind of token,
under interventions, by attention shares and heads, across seeds and replicates; and the
resampling helpers the bootstraps share (resample_weights, ci). analyze.py prints them as tables.
"""
import glob
import json
import math
import os
import sys
from collections import defaultdict, namedtuple

import numpy as np
from scipy import stats

from rotary import known
from treerope.runs import (
    MODEL,
    folder_is_run,
    non_finite,
    read_attention,
    read_config,
    read_eval,
    read_final,
    read_log,
)
from treerope.settings import SETTINGS


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
    """Whether a finished run reports its best milestone rather than its final step (training.reported)."""
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
        stat = {v: np.array([x for x in map(final_val, configs[v].values()) if math.isfinite(x)])
                for v in present}   # a non-finite loss: noted as read (runs.read_final), left out
        pairs = []
        for a, b in (("rand_axial", "hrope_axial"), ("hrope_axial", "flat")):
            seeds = [s for s in sorted(set(configs.get(a, {})) & set(configs.get(b, {})))
                     if math.isfinite(final_val(configs[a][s]) - final_val(configs[b][s]))]
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


# ---------------------------------------------------------------------------------- runs ----
# A setting: what the tables name (corpus, model size, context, steps, packing), then everything else
# its runs agree on (`training`, a JSON key) and, where runs differ in it, the words that say how (`tag`)
Setting = namedtuple("Setting", "corpus n_layer n_embd n_head max_len steps packed training tag",
                     defaults=("", ""))
# Run values paired runs may differ in: the configuration and seed (what is compared), the name, the
# flags given, what train.py lets a resume change (nothing computed changes), and bf16 and compile,
# compared over the run's life instead (training()); a setting's and (in a run recorded before values had
# one home) a model size's and recipe's names: their values are compared, one by one
PAIR_FREE = ("config", "seed", "name", "given", "resume", "device", "data", "out", "mb_tokens", "precision",
             "bf16", "compile", "kernel", "passes", "lr_sweep", "check", "budget", "draws", "checkpoint",
             "setting", "preset", "recipe")


def training(c, log):
    """What a run trained on and how, beyond its named setting: every run value but PAIR_FREE's (the
    data's identity and the recipe's values among them), the model's, and bf16 and compile over its life."""
    r = c["run"]
    key = {k: v for k, v in r.items() if k not in PAIR_FREE and k not in MODEL}
    key.update({k: c["model"].get(k, r.get(k, v)) for k, v in MODEL.items()})   # flat: as flags name them
    key["model"] = {k: v for k, v in c["model"].items() if k not in (*MODEL, "rotary", "configuration")}
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
    found = {f: [os.path.dirname(p) for p in glob.glob(os.path.join(glob.escape(root), "**", f),
                                                        recursive=True)]
             for f in ("config.json", "log.jsonl", "final.json", "ckpt.pt")}
    for d in sorted({d for dirs in found.values() for d in dirs} - set(found["config.json"])):
        print(f"note: {d} holds no config.json: left out ({fix})")   # a run left out is named, never missing
    for d in found["config.json"]:
        c = read_config(d, fix)
        log = read_log(d, fix) if os.path.exists(os.path.join(d, "log.jsonl")) else []
        if not log:   # no milestone reached yet, or the file removed or emptied: nothing to pair it at
            print(f"note: {d} has no milestone in its log.jsonl: left out")
            continue
        final = read_final(d, fix) if os.path.exists(os.path.join(d, "final.json")) else None
        if finished and final is None:
            continue
        r = c["run"]
        if r.get("name") and r["name"] != r["config"] and known(r["name"]):   # train.py now refuses it
            print(f"note: {d} is named {r['name']}, a configuration's name, but trained {r['config']}: "
                  "left out (train it again under another --name)")
            continue
        folder_is_run(d, r)
        run = {"log": {e["step"]: e for e in log}, "final": final, "dir": d}
        for key, name in (("eval", "eval_test.json"), ("eval_val", "eval_val.json"),
                          ("attention", "attention_test.json"),
                          ("attention_off", "attention_test_rotation_off.json")):
            if os.path.exists(os.path.join(d, name)):   # written by evaluate.py
                read = read_eval if key.startswith("eval") else read_attention
                run[key] = read(os.path.join(d, name), f"delete it and rerun evaluate.py {d}")
        for key in ("eval", "eval_val"):   # scored before the run's last step: not this run's
            if key in run and stale(run[key], final):
                print(f"note: {d}'s {key} scored the checkpoint at step {run[key].get('checkpoint_step')}, "
                      f"not the final step: left out (rerun evaluate.py {d})")
                del run[key]
            elif key in run and non_finite(run[key]):   # evaluate.py writes none: a damaged file
                print(f"note: {d}'s {key}: {non_finite(run[key])}.nll is not a finite loss: left out "
                      f"(rerun evaluate.py {d})")
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
    (metric 'val'), or on the final test scores (metric 'test'); its seeds' Δs in per_seed."""
    rows = []
    for setting, configs in sorted(runs.items()):
        if baseline not in configs:
            continue
        base = configs[baseline]
        for name, seeds in sorted(configs.items()):
            if name == baseline:
                continue
            common = sorted(set(seeds) & set(base))
            finished = [s for s in common if seeds[s]["final"] and base[s]["final"]]
            if metric == "test":
                per = {s: seeds[s]["final"]["test_loss"] - base[s]["final"]["test_loss"] for s in finished}
                step = "final"
            elif any(best_milestone(seeds[s]) or best_milestone(base[s]) for s in common):
                # appendix §4: the one run reported at its best milestone is compared at that value,
                # labelled, never at a step it shares with the baseline
                per = {s: final_val(seeds[s]) - final_val(base[s]) for s in finished}
                step = BEST
            else:
                steps = (set.intersection(*[set(seeds[s]["log"]) & set(base[s]["log"]) for s in common])
                         if common else set())
                if not steps:
                    continue
                step = max(steps)
                per = {s: seeds[s]["log"][step]["val_loss"] - base[s]["log"][step]["val_loss"]
                       for s in common}
            per = {s: d for s, d in per.items() if math.isfinite(d)}   # non-finite: noted as read, left out
            if not per:
                continue
            rows.append({"setting": setting, "config": name, "baseline": baseline, "step": step,
                         "differs": next(iter(seeds.values())).get("differs", ""),   # a variant's values
                         "base_loss": float(np.mean([base[s]["log"][max(base[s]["log"])]["val_loss"]
                                                     for s in common])),
                         "per_seed": per, **paired(list(per.values()))})
    q = bh([r["p"] for r in rows])
    for r, qi in zip(rows, q):
        r["q"] = qi
    return rows


# What the runs of two studies may differ in and still be contrasted: their data (the streams compared)
CONTRASTED = ("data_identity", "tokenizer")


def contrast(runs_a, runs_b, baseline, metric="val"):
    """(rows, notes): the difference between two studies' paired Δs (study × configuration). For each
    configuration both pair with `baseline` in one setting, trained alike but for their data (CONTRASTED),
    per seed d_s = Δ_B,s − Δ_A,s, each Δ as compare() pairs it, then paired(d): mean, SE, t and 95% CI
    (n − 1 df), "won" where B's Δ is the lower, sign test; ppl_reduction(d̄) = 100 (1 − e^d̄), how much
    lower B's perplexity ratio to the baseline is than A's. A pair of groups trained otherwise (another
    precision, model or recipe) is not contrasted: a note names what differs."""
    rows, notes = [], []
    for a in compare(runs_a, baseline, metric):
        for b in compare(runs_b, baseline, metric):
            if a["setting"][:7] != b["setting"][:7] or named(a) != named(b):
                continue
            ka, kb = (json.loads(r["setting"].training) for r in (a, b))
            differ = [f"{k} ({short(ka.get(k))} | {short(kb.get(k))})" for k in sorted(set(ka) | set(kb))
                      if k not in CONTRASTED and ka.get(k) != kb.get(k)]
            if a["step"] != b["step"]:
                differ.append(f"the step compared ({a['step']} | {b['step']})")
            if differ:
                notes.append(f"note: {named(a)} not contrasted, trained otherwise in " + "; ".join(differ))
                continue
            d = {s: b["per_seed"][s] - a["per_seed"][s] for s in sorted(a["per_seed"]) if s in b["per_seed"]}
            if d:
                rows.append({"setting": a["setting"], "config": named(a), "baseline": baseline,
                             "step": a["step"], "precision": ka["precision"], "delta_a": a, "delta_b": b,
                             "per_seed": d, **paired(list(d.values()))})
    return rows, notes


def named(r):
    """A row's configuration, with the values a named variant differs in from its baseline."""
    return r["config"] + (f" ({r['differs']})" if r.get("differs") else "")


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
# (runs.RESUMABLE: none of it changes what is computed).
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


# ------------------------------------------------------------------------ resampling ----
def resample_weights(rng, draws, n):
    """(draws, n) multiplicities of n clusters resampled with replacement, one row per draw."""
    W = np.zeros((draws, n))
    np.add.at(W, (np.arange(draws)[:, None], rng.integers(0, n, size=(draws, n))), 1.0)
    return W


def ci(x, level=0.95):
    x = x[~np.isnan(x)]
    if not len(x):
        return float("nan"), float("nan")
    return tuple(np.percentile(x, [50 * (1 - level), 50 * (1 + level)]))
