"""The figures of both papers, each a PNG and a CSV of the numbers drawn, from rows analyze.py
computed (Figs. 3-6 of the depth-perception appendix; paper 004's Figs. 1-3 and App. A.6's heatmaps
from evaluate.py's and compression.py's outputs). `python analyze.py ... --figures DIR` draws them.
"""
import csv
import hashlib
import os
from collections import defaultdict

import numpy as np

from treerope.files import replacing


def pyplot():
    """matplotlib's pyplot on the file-only backend (no display needed)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def stem(setting):
    """A setting in a file name: its corpus, and where runs of that corpus trained otherwise (analyze's
    tag) a short hash of how, so their figures do not overwrite each other."""
    tag = getattr(setting, "tag", "")
    return setting[0] + (f"_{hashlib.sha1(tag.encode()).hexdigest()[:6]}" if tag else "")


def figure_gap(rows, baseline, out_dir):
    """Fig. 3: perplexity reduction against the baseline at every milestone (rows:
    analyze.milestone_gaps); as the appendix draws it, the 95% band on sequence + tree + depth and
    spreadsheets from 25% of training. Without seq_tree_depth every line has its band (our reading)."""
    plt = pyplot()
    by = defaultdict(lambda: defaultdict(list))
    for r in rows:
        if r["setting"][0] != "sheets" or r["step"] >= 0.25 * r["setting"][5]:
            by[r["setting"]][r["config"]].append(r)
    for setting, configs in by.items():
        fig, ax = plt.subplots(figsize=(7, 4))
        table = []
        banded = {"seq_tree_depth"} & set(configs) or set(configs)
        for name, rs in sorted(configs.items()):
            ax.plot([r["step"] for r in rs], [r["ppl_reduction"] for r in rs], marker="o", label=name)
            if name in banded:
                ax.fill_between([r["step"] for r in rs], [r["ppl_lo"] for r in rs],
                                [r["ppl_hi"] for r in rs], alpha=0.15)
            table += [(name, r["step"], r["ppl_reduction"], r["ppl_lo"], r["ppl_hi"]) for r in rs]
        ax.axhline(0, color="grey", lw=0.8)
        ax.set_xlabel("step")
        ax.set_ylabel(f"perplexity reduction vs {baseline} (%)")
        ax.set_title(f"{setting[0]}: gap to {baseline} (mean over seeds, 95% CI)")
        ax.legend(fontsize=7)
        name = f"fig3_gap_{stem(setting)}"
        fig.tight_layout()
        save_figure(fig, os.path.join(out_dir, name + ".png"))
        plt.close(fig)
        write_table(os.path.join(out_dir, name + ".csv"),
                    ["config", "step", "ppl_reduction", "ci_lo", "ci_hi"], table)


def figure_planes(rows, out_dir, planes):
    """Fig. 4: gain against the number of extra rotary planes (log scale); nothing drawn when no
    configuration with extra planes pairs with the baseline."""
    points = [(r, planes.get(r["config"], 0) - 16) for r in rows if planes.get(r["config"], 0) > 16]
    if not points:
        print("note: Fig. 4 not drawn: no configuration with extra planes pairs with the baseline")
        return
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    table = []
    for r, extra in points:
        lo, hi = r["ppl_lo"], r["ppl_hi"]
        ax.errorbar([extra], [r["ppl_reduction"]],
                    yerr=[[r["ppl_reduction"] - lo], [hi - r["ppl_reduction"]]], fmt="o", capsize=3)
        ax.annotate(r["config"], (extra, r["ppl_reduction"]), fontsize=7)
        table.append((r["config"], extra, r["ppl_reduction"], lo, hi))
    ax.set_xscale("log")
    ax.axhline(0, color="grey", lw=0.8)
    ax.set_xlabel("extra rotary planes")
    ax.set_ylabel("perplexity reduction (%)")
    ax.set_title(f"{rows[0]['setting'][0]}: gain against extra rotary planes (vs {rows[0]['baseline']})")
    fig.tight_layout()
    save_figure(fig, os.path.join(out_dir, "fig4_planes.png"))
    plt.close(fig)
    write_table(os.path.join(out_dir, "fig4_planes.csv"),
                ["config", "extra_planes", "ppl_reduction", "ci_lo", "ci_hi"], table)


def figure_kinds(rows, out_dir):
    """Fig. 5: perplexity reduction against the baseline on each kind of token, test split;
    marker = mean over seeds, line = 95% CI, shaded row = all tokens."""
    plt = pyplot()
    by = defaultdict(list)
    for r in rows:
        by[r["setting"]].append(r)
    for setting, rs in by.items():
        fig, ax = plt.subplots(figsize=(6, 0.35 * len(rs) + 1.2))
        table = []
        for y, r in enumerate(rs):
            lo, hi = r["ppl_lo"], r["ppl_hi"]
            if r["kind"] == "all":
                ax.axhspan(y - 0.5, y + 0.5, color="grey", alpha=0.15)
            ax.errorbar([r["ppl_reduction"]], [y], xerr=[[r["ppl_reduction"] - lo], [hi - r["ppl_reduction"]]]
                        if r["n"] > 1 else None, fmt="o", capsize=3,
                        color=f"C{sorted({x['config'] for x in rs}).index(r['config'])}")
            table.append((r["config"], r["kind"], r["ppl_reduction"], lo, hi, r["won"], r["n"]))
        ax.set_yticks(range(len(rs)), [f"{r['config']}: {r['kind']}" for r in rs], fontsize=7)
        ax.axvline(0, color="grey", lw=0.8)
        ax.set_xlabel(f"perplexity reduction vs {rs[0]['baseline'] if 'baseline' in rs[0] else 'baseline'} "
                      "(%), test")
        ax.set_title(f"{setting[0]}: gain by kind of token")
        fig.tight_layout()
        name = f"fig5_kinds_{stem(setting)}"
        save_figure(fig, os.path.join(out_dir, name + ".png"))
        plt.close(fig)
        write_table(os.path.join(out_dir, name + ".csv"),
                    ["config", "kind", "ppl_reduction", "ci_lo", "ci_hi", "won", "n"], table)


def figure_columns(runs, out_dir):
    """Fig. 6: attention of the average head from a spreadsheet cell to cells in the same row
    and in the rows above, by column offset (mean over seeds), test split."""
    plt = pyplot()
    for setting, configs in runs.items():
        curves = {}
        for name, seeds in sorted(configs.items()):
            att = [s["attention"] for s in seeds.values()
                   if "same_row_by_column_offset" in s.get("attention", {})]
            if att:
                curves[name] = {reg: np.mean([a[reg + "_by_column_offset"]["mean_over_heads"]
                                              for a in att], 0) for reg in ("same_row", "rows_above")}
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
        name = f"fig6_columns_{stem(setting)}"
        save_figure(fig, os.path.join(out_dir, name + ".png"))
        plt.close(fig)
        write_table(os.path.join(out_dir, name + ".csv"),
                    ["config", "region", "column_offset", "attention_pct"], table)


def figure_demo(runs, out_dir):
    """Paper 004 Fig. 1/3 from evaluate.py --demo: Ā under Cond. A (real) and Cond. B (fake-split)
    and B − A for the first model that reads p1, then B − A for every other model (zero for
    flat and sent_axial). Lowest seed of each; the numbers go to fig3_demo.csv."""
    plt = pyplot()
    demos = {name: seeds[min(s for s in seeds if "demo" in seeds[s].get("eval", {}))]["eval"]["demo"]
             for configs in runs.values() for name, seeds in sorted(configs.items())
             if any("demo" in s.get("eval", {}) for s in seeds.values())}
    if not demos:
        return
    diff = {k: np.array(d["fake_split"]["attention"]) - np.array(d["real"]["attention"])
            for k, d in demos.items()}
    lead = next((k for k in demos if np.abs(diff[k]).max() > 0), next(iter(demos)))
    panels = [(f"{lead}: Cond. A (real)", np.array(demos[lead]["real"]["attention"]), "viridis"),
              (f"{lead}: Cond. B (fake-split)", np.array(demos[lead]["fake_split"]["attention"]), "viridis")]
    panels += [(f"{k}: B − A (max |Δ| {np.abs(diff[k]).max():.2g})", diff[k], "coolwarm")
               for k in [lead] + sorted(set(demos) - {lead})]
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
    write_table(os.path.join(out_dir, "fig3_demo.csv"),
                ["config", "d_eff_change_across_boundary", "max_abs_map_change"],
                [[k, d["d_eff_change_across_boundary"], float(np.abs(diff[k]).max())]
                 for k, d in demos.items()])


def save_figure(fig, path):
    with replacing(path) as tmp:
        fig.savefig(tmp, dpi=120)


def write_table(path, header, rows):
    with replacing(path) as tmp, open(tmp, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)
