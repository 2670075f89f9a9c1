"""Where the gain lands: score a checkpoint per token kind, under coordinate interventions, and
read its attention.

    python evaluate.py out/python/seq_depth/seed0                 # test split, auto interventions
    python evaluate.py out/web/seq_depth/seed0 --attention --max_docs 64
    python evaluate.py out/sheets/seq_grid/seed0 --rotation_off   # + shares, structural rotation off
    python evaluate.py out/code/hrope_axial/seed0 --attention     # + compression-depth cells
    python evaluate.py out/prose/hrope_axial/seed0 --demo         # paper 004 Fig. 1, one example
    python evaluate.py out/code/hrope_axial/seed0 --boundary      # sums for Table 1 (analyze.py --boundary)
    python evaluate.py out/code/hrope_axial/seed0 --probe         # same-paragraph probe (Table 8)
    python evaluate.py out/code/hrope_axial/seed0 --paragraphs    # sums for Tables 5, 9 (analyze.py)
    for s in 0 1 2; do python evaluate.py out/code/hrope_axial/seed$s --hub_contributions; done   # Table 13,
    for s in 0 1 2; do python evaluate.py out/code/hrope_axial/seed$s --hubs; done  # all seeds' pass 1 first

Interventions change coordinates only, never tokens (depth-perception appendix §2 "How the
structure is used"; paragraph-boundaries paper §3.2, §4.3):
  shuffle      each record's structural coordinates permuted among its own tokens
  remove       structural coordinates absent: those planes turn by angle 0
  period/rand/const0   hRoPE p1 replaced by floor(t/L), a density-matched random labelling, 0
  fake_merge   two adjacent paragraphs share one p1;  fake_split  a new p1 boundary inside one
Outputs, next to the checkpoint: eval_<split>.json (nats/token overall, per kind, per
intervention), eval_<split>_tokens.npz (per-token NLL, record, document, kind: analyze.py pairs
runs token by token), attention_<split>.json (with --rotation_off also
attention_<split>_rotation_off.json), and for hRoPE depth_<split>.npz (per-document
(d, Δp1) cells of log attention that analyze.py --depth reads; for period_axial and rand_axial
depth_read_<split>.npz bins them by the labels read, rand_axial's averaged over --label_draws
draws); with --boundary, --hubs and --paragraphs the sums analyze.py's Tables 1, 13 and 5/9 read
(boundary_, hub_*_, paragraph_<split>.npz; --hub_contributions writes hub_contrib_<split>.npz alone,
the pass that --hubs pools over the seeds).
Those paper 004 measures live in hrope/boundaries.py (Layer I), hrope/compression.py (Layers II-III)
and hrope/hubs.py (Table 13).
"""
import argparse
import functools
import hashlib
import os
import sys

import numpy as np
import torch
from tqdm import tqdm

import trees
from model import GPT, GPTConfig
from rotary import coordinate
from treerope.batches import Split, by_length, context_note, coords_for, record_docs
from treerope.files import owned, replacing, writable, write_json
from treerope.hrope import boundaries, compression, hubs, paragraph_depth
from treerope.hrope.boundaries import fake_merge, fake_split
from treerope.hrope.compression import D_MAX, depth_cells
from treerope.prepared import STRUCTURAL, check_identity, check_tokenizer, corpus_stats
from treerope.runs import checked_checkpoint


# -------------------------------------------------------------------------- interventions ----
def shuffle(b, g):
    """Each record's structural coordinates permuted among its own tokens (one permutation
    for all fields, so a token keeps a consistent set of coordinates)."""
    for j, n in enumerate(b["len"].tolist()):
        perm = torch.randperm(n, generator=g, device=g.device)
        for f in STRUCTURAL:
            if f in b:
                b[f][j, :n] = b[f][j, perm]


def remove(b, g):
    for f in STRUCTURAL:
        if f in b:
            b[f][:] = -1


def _set_p1(b, p1):
    """Substitute what the p1 channel reads (p1, period_p1 or rand_p1), nothing else (§4.3)."""
    b["p1_sub"] = torch.where(b["pos"] >= 0, p1, -1)


def real(b, g):     # the true paragraph coordinate: the reverse substitution on period_axial (§4.3)
    _set_p1(b, b["p"][..., 0])


def period(b, g):   # the grid period_axial trains on
    _set_p1(b, coordinate(b, "period_p1"))


def rand(b, g):     # the labels rand_axial trains on
    _set_p1(b, coordinate(b, "rand_p1", g))


def const0(b, g):
    _set_p1(b, torch.zeros_like(b["pos"]))


INTERVENTIONS = {f.__name__: f for f in (shuffle, remove, real, period, rand, const0, fake_merge, fake_split)}


def default_interventions(names):
    """Interventions that can change this configuration's input (names: coordinates it reads)."""
    structural = [n for n in names if n not in ("t", "period_p1", "rand_p1")]
    out = ["shuffle", "remove"] if structural else []
    if "p1" in names:
        out += ["period", "rand", "const0", "fake_merge", "fake_split"]
    elif "period_p1" in names or "rand_p1" in names:   # the channel reads generated labels: substitute them
        out += ["real", "period", "rand", "const0"]
    return out


# ---------------------------------------------------------------------- attention statistics ----
def ancestor_mask(path, depth):
    """(T, T) bool: key j's node is a proper ancestor of query i's node (Python: the share of
    attention on ancestor nodes). path (T, 22) with -1 absent, depth (T,)."""
    T = len(depth)
    last = depth.clamp(1, path.shape[-1]) - 1                            # the key's own level
    prefix = torch.ones(T, T, dtype=torch.bool)
    same_prefix = torch.zeros(T, T, dtype=torch.bool)
    for level in range(path.shape[-1]):   # one level at a time: (T, T) booleans, never (T, T, 22)
        prefix &= path[:, None, level] == path[None, :, level]
        same_prefix |= prefix & (last == level)[None, :]
    return same_prefix & (depth[None, :] < depth[:, None]) & (depth[None, :] > 0)


def same_depth_mask(path, depth):
    """(T, T) bool: key j is text at query i's depth in another node (web: text at the same
    depth elsewhere on the page)."""
    other = (path[:, None, :] != path[None, :, :]).any(-1)
    return (depth[:, None] == depth[None, :]) & (depth[:, None] > 0) & other


COL_OFFSETS = 8   # Fig. 6: column offsets -8..8, same row and rows above


def sheet_masks(path, depth, ref_path):
    """Spreadsheet (T, T) key masks for a query cell (depth-perception appendix, Fig. 6):
    histogram bins (same-row / rows-above cells by column offset), shares (earlier cells of the
    same column, the cell a reference names), and which tokens are cell tokens (depth >= 3)."""
    cell = depth >= 3
    sheet, row, col = path[:, 0], path[:, 1], path[:, 2]
    both = cell[:, None] & cell[None, :] & (sheet[:, None] == sheet[None, :])
    same_row = both & (row[:, None] == row[None, :])
    above = both & (row[None, :] < row[:, None])
    off = col[None, :] - col[:, None]
    bins = {f"same_row_{o:+d}": same_row & (off == o) for o in range(-COL_OFFSETS, COL_OFFSETS + 1)}
    bins.update({f"rows_above_{o:+d}": above & (off == o) for o in range(-COL_OFFSETS, COL_OFFSETS + 1)})
    is_ref = ref_path[:, 0] >= 0
    target = (ref_path[:, None, :3] == path[None, :, :3]).all(-1)
    shares = {"same_column_above": above & (off == 0),
              "referenced_cell": is_ref[:, None] & target & (depth[None, :] >= 3)}
    return bins, shares, cell


def share(att, mask, query):
    """Attention share on `mask` keys, per (layer, head): att (L, H, T, T) probabilities of one
    record, mask (T, T), query (T,) bool. Returns (sum over queries (L, H), number of queries)."""
    s = (att * mask[None, None].to(att.dtype)).sum(-1)                   # (L, H, T)
    return (s * query.to(att.dtype)).sum(-1), int(query.sum())


def attention_stats(shares, context):
    """Collectors for `score(attention=...)`, every statistic or the depth cells alone (for further
    label draws), and a function giving the summary. `shares`: the corpus's statistics, named by
    its corpora/ entry (ancestor: Python; same_depth: web pages; cells: spreadsheets).
    Shares are over strictly earlier keys, averaged over queries that have at least one such key;
    paragraph data also gets compression-depth cells."""
    acc = {"sum": {}, "queries": {}}
    cells = {"": {}, "_read": {}}    # per record, summed over the label draws that call collect_cells

    def collect_cells(r, b, att):
        """Compression-depth cells binned by the true p1 and, where the p1 channel reads generated
        labels (period_p1, rand_p1), by the labels it read: Table 3 bins Δp1 by these
        (REFERENCE.md)."""
        for suffix, p1 in (("", b["p"][:, 0]), ("_read", b.get("p1_read"))):
            if p1 is not None:
                new = depth_cells(att, p1.cpu(), min(D_MAX + 1, context))
                cells[suffix][r] = ([x + y for x, y in zip(cells[suffix][r], new)] if r in cells[suffix]
                                    else new)

    def collect(r, b, att):
        path, depth = b.get("path"), b.get("depth")
        earlier = torch.ones(att.shape[-1], att.shape[-1], dtype=torch.bool).tril(-1)
        masks, bins = {}, {}
        if "ancestor" in shares:
            masks["ancestor"] = ancestor_mask(path, depth)
        if "same_depth" in shares:
            masks["same_depth_elsewhere"] = same_depth_mask(path, depth)
        if "cells" in shares:
            bins, cell_shares, cell = sheet_masks(path, depth, b["ref_path"])
            masks.update(cell_shares)
        # a share averages over queries with at least one such key; histogram bins share one
        # denominator, every cell token with an earlier token
        for name, m in list(masks.items()) + list(bins.items()):
            m = m & earlier
            s, q = share(att, m, cell & earlier.any(-1) if name in bins else m.any(-1))
            acc["sum"][name] = acc["sum"].get(name, 0) + s
            acc["queries"][name] = acc["queries"].get(name, 0) + q
        if "p" in b:
            collect_cells(r, b, att)

    def summary():
        out = {}
        for name, s in acc["sum"].items():
            per_head = (s / max(acc["queries"][name], 1)).numpy()
            out[name] = {"mean_over_heads": float(per_head.mean()),
                         "per_layer_head": per_head.round(5).tolist(), "queries": acc["queries"][name]}
        for region in ("same_row", "rows_above"):   # Fig. 6 as one histogram per region
            keys = [f"{region}_{o:+d}" for o in range(-COL_OFFSETS, COL_OFFSETS + 1)]
            if keys[0] in out:
                out[region + "_by_column_offset"] = {
                    "offsets": list(range(-COL_OFFSETS, COL_OFFSETS + 1)),
                    "mean_over_heads": [out.pop(k)["mean_over_heads"] for k in keys]}
        return out, cells
    return collect, collect_cells, summary


# --------------------------------------------------------------------------------- scoring ----
def load(run_dir, device="cpu"):
    """The run's model and values: its checkpoint, refused where it is not the run its config.json
    describes (runs.checked_checkpoint)."""
    ck, _ = checked_checkpoint(run_dir, device)
    model = GPT(GPTConfig.saved(ck["config"])).to(device)
    model.load_state_dict(ck["model"])
    return model.eval(), {**ck["run"], "checkpoint_step": ck.get("step")}


@torch.no_grad()
def score(model, split, ids, cfg, corpus, change=None, attention=None, seed=0, block=None):
    """Per-token NLL of records `ids` with optional coordinate intervention `change`. With
    `attention` (a callable(record, b_row, atts)), it also sees every record's attention; with
    `block` (batch -> (B, T, T) bool), those (query, key) pairs are blocked (b_row["blocked"])."""
    g = torch.Generator(device=cfg["device"]).manual_seed(seed)
    per = {}
    for group in by_length(split.len[ids], cfg["mb_tokens"]):
        rec = ids[group]
        b = split.batch(rec, cfg["device"])
        b["len"] = torch.as_tensor(split.len[rec])
        b["rec"] = torch.as_tensor(rec)
        b.update(corpus)
        if change is not None:
            change(b, g)
        C = coords_for(model, b, corpus, torch.Generator(device=cfg["device"]).manual_seed(seed))
        read = [n for n in ("rand_p1", "period_p1") if n in model.rotary.names]
        if read:                     # the labels this model's p1 channel read (depth cells binned by them)
            b["p1_read"] = C[..., model.rotary.names.index(read[0])].long()
        if block is not None:
            b["blocked"] = block(b)
        _, nll, atts = model(b["tokens"], C, b["targets"], return_attn=attention is not None,
                             blocked=b.get("blocked"))
        for j, r in enumerate(rec):
            n = int(split.len[r])
            per[int(r)] = nll[j, :n - 1].float().cpu().numpy()
            if attention is not None:
                row = {k: v[j, :n].cpu() for k, v in b.items() if torch.is_tensor(v) and v.dim() > 1}
                if "blocked" in row:
                    row["blocked"] = row["blocked"][:, :n]
                attention(int(r), row, torch.stack([a[j, :, :n, :n] for a in atts]).float().cpu())
    return per


def by_kind(per, split, ids):
    """{'all': {...}, kind name: {...}}: mean NLL and token count; a kind is that of the token
    being predicted."""
    nll = np.concatenate([per[int(r)] for r in ids])

    def predicted(field):   # the field of each predicted token (a record's tokens after its first)
        return np.concatenate([np.asarray(split.a[field][split.start[r] + 1:split.start[r] + split.len[r]])
                               for r in ids])
    kind = predicted("kind") if "kind" in split.a else np.zeros(len(nll), np.uint8)
    out = {"all": {"nll": float(nll.mean()), "tokens": int(len(nll))}}
    masks = {name: (kind & flag) > 0 for flag, name in trees.KIND_NAMES.items()}
    if "source" in split.a:   # the two-corpus model scored per corpus (appendix §2)
        source = predicted("source")
        masks.update({"corpus: web pages": source == 0, "corpus: spreadsheets": source == 1})
    for name, m in masks.items():
        if m.any():
            out[name] = {"nll": float(nll[m].mean()), "tokens": int(m.sum())}
    return out, nll, kind


def spread(split, n):
    """n records taken round-robin over documents (each document's records in order), so a
    short evaluation covers as many documents, the bootstrap's clusters, as it can."""
    docs = record_docs(split, np.arange(len(split.len)))
    first = np.r_[0, np.flatnonzero(docs[1:] != docs[:-1]) + 1]          # a document's records are contiguous
    rank = np.arange(len(docs)) - np.repeat(first, np.diff(np.r_[first, len(docs)]))
    return np.sort(np.lexsort((np.arange(len(docs)), rank))[:n])


def whole_docs(split, n):
    """Every record of n documents spaced evenly over the split: paper 004 counts its samples in
    documents, 60 WikiText-2 and 100 each Code and OpenWebText (App. A.7, "Corpus alignment": Table
    10's set, used by App. E and A.10). Even spacing, and the same set for Layer I: our readings."""
    docs = record_docs(split, np.arange(len(split.len)))
    names = np.unique(docs)
    chosen = names[np.linspace(0, len(names) - 1, min(n, len(names))).round().astype(int)]
    return np.flatnonzero(np.isin(docs, chosen))


def chosen_records(args, split, where):
    """The record ids to score: --docs whole documents, or --max_docs records round-robin."""
    if args.docs is not None:
        ids = whole_docs(split, args.docs)
    else:
        ids = spread(split, len(split) if args.max_docs is None else min(args.max_docs, len(split)))
    if len(ids) == 0:
        raise SystemExit(f"error: the {args.split} split of {where} has no records")
    return ids


def parse(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run", help="out/<corpus>/<config>/seed<k>")
    ap.add_argument("--split", default="test", choices=("train", "val", "test"))
    ap.add_argument("--max_docs", type=int, default=None,
                    help="score N records (despite its name), taken round-robin across documents (each "
                    "one's first record, then its second, ...)")
    ap.add_argument("--docs", type=int, default=None,
                    help="score every record of N whole documents, spaced evenly over the split (paper "
                    "004's samples: 60 WikiText-2, 100 Code and OpenWebText documents)")
    ap.add_argument("--interventions", default="auto", help="comma list, 'auto' or 'none'")
    ap.add_argument("--attention", action="store_true", help="attention statistics (explicit path)")
    ap.add_argument("--unfinished", action="store_true",
                    help="score a run whose training has not finished (its checkpoint's step is recorded)")
    ap.add_argument("--rotation_off", action="store_true",
                    help="--attention, and the same statistics with the configuration's structural rotation "
                    "switched off (appendix §2)")
    ap.add_argument("--demo", action="store_true", help="paper 004 Fig. 1 single example")
    ap.add_argument("--probe", action="store_true", help="paper 004 App. A.9: same-paragraph probe per layer")
    ap.add_argument("--hub_contributions", action="store_true",
                    help="paper 004 App. E, pass 1: this run's per-type contributions only (run it on "
                    "every seed, then --hubs)")
    ap.add_argument("--hubs", action="store_true",
                    help="paper 004 App. E, pass 2: hub sets chosen on the contributions pooled over the "
                    "sibling seeds (out/<corpus>/<config>/seed*), depth cells per condition")
    ap.add_argument("--paragraphs", action="store_true",
                    help="paper 004 App. A.10: per-paragraph sums for the paragraph-level regression "
                    "(analyze.py --paragraphs)")
    ap.add_argument("--boundary", action="store_true",
                    help="paper 004 Table 1: per-document sums for the normalised boundary effect "
                    "(analyze.py --boundary)")
    ap.add_argument("--label_draws", type=int, default=5,
                    help="with --attention on rand_axial: draws of its random labels the depth cells "
                    "average over (Table 3)")
    ap.add_argument("--data", default=None, help="data root (default: the run's)")
    args = ap.parse_args(argv)
    if args.label_draws < 1:
        ap.error("--label_draws must be at least 1")
    args.attention |= args.rotation_off
    for name in ("max_docs", "docs"):
        if getattr(args, name) is not None and getattr(args, name) < 1:
            ap.error(f"--{name} must be at least 1")
    if args.docs is not None and args.max_docs is not None:
        ap.error("--docs and --max_docs: choose one (whole documents, or records round-robin)")
    return args


def chosen_interventions(arg, names, split):
    """The interventions to run: 'auto' (those that can change this configuration's input), 'none'
    or a comma list, each checked against the data."""
    todo = default_interventions(names) if arg == "auto" else [] if arg == "none" else arg.split(",")
    for t in todo:
        if t not in INTERVENTIONS:
            raise SystemExit(f"error: unknown intervention {t!r}; known: {', '.join(INTERVENTIONS)}")
        if t in ("real", "period", "rand", "const0", "fake_merge", "fake_split") and "p" not in split.a:
            raise SystemExit(f"error: {t} needs paragraph coordinates (prepare.py prose/code)")
    return todo


def print_scores(result, todo):
    print(f"{result['run']} ({result['split']}, {result['records']} records of {result['documents']} "
          f"documents): {result['kinds']['all']['nll']:.4f} nats/token")
    for name, v in result["kinds"].items():
        line = f"  {name:14s} {v['nll']:.4f}  ({v['tokens']} tokens)"
        for t in todo:
            w = result["interventions"][t].get(name)
            if w:
                line += f"  {t} {w['nll']:.4f} (ppl x{np.exp(w['nll'] - v['nll']):.2f})"
        print(line)


def label_draws(names, k):
    """How many draws of the labels a p1 channel reads the depth cells average over: k where they
    are random (rand_p1), one where they are fixed (period_p1's grid, the true p1)."""
    return k if "rand_p1" in names else 1


def write_attention(summary, split, ids, run, split_name, draws=1):
    """attention_<split>.json, and for paragraph data the compression-depth cells: depth_<split>.npz
    binned by the true p1, depth_read_<split>.npz by the labels the model read, each the mean over
    `draws` label draws (recorded as label_draws)."""
    stats, cells = summary()
    write_json(stats, os.path.join(run, f"attention_{split_name}.json"))
    for name, v in stats.items():
        if "offsets" in v:   # Fig. 6 histogram
            print(f"  attention by column offset, {name[:-len('_by_column_offset')]} (-8..8, %): "
                  + " ".join(f"{100 * x:.1f}" for x in v["mean_over_heads"]))
        else:
            print(f"  attention share on {name}: {100 * v['mean_over_heads']:.2f}% (mean over heads)")
    for suffix, by_record in cells.items():
        if not by_record:
            continue
        docs = record_docs(split, np.arange(len(split.len)))           # indexed by record id
        uniq = np.unique(docs[ids])
        path = os.path.join(run, f"depth{suffix}_{split_name}.npz")
        with replacing(path) as tmp:
            mean = {k: v / draws for k, v in compression.document_cells(by_record, docs, uniq).items()}
            np.savez_compressed(tmp, **mean, label_draws=draws)
        print(f"  compression-depth cells: {len(uniq)} documents, {draws} label draw(s) -> {path}")


def write_rotation_off(model, split, ids, cfg, corpus, shares, run, split_name):
    """What switching the rotation off does to the attention (appendix §2, "Full tables, and what
    switching the rotation off does to the attention scores"): the shares again with the
    configuration's structural planes at angle 0 (`remove`; sequence planes keep turning, our
    reading), each key still classed by the record's true coordinates ->
    attention_<split>_rotation_off.json."""
    collect, _, summary = attention_stats(shares, model.cfg.max_len)

    def true(r):
        return {k: v[0] for k, v in split.batch(np.array([r]), "cpu").items()}
    score(model, split, ids, cfg, corpus, change=remove,
          attention=lambda r, row, att: collect(r, {**row, **true(r)}, att))
    stats = summary()[0]
    write_json(stats, os.path.join(run, f"attention_{split_name}_rotation_off.json"))
    for name, v in stats.items():
        if "offsets" not in v:
            print(f"  attention share on {name}, structural rotation off: {100 * v['mean_over_heads']:.2f}%")


def paragraph_measures(args, model, split, ids, cfg, corpus, data_dir):
    """Paper 004's --probe, --hubs, --boundary, --paragraphs and --demo (hrope/boundaries.py, hubs.py,
    compression.py): the sums they write, and what goes into eval_<split>.json."""
    out = {}
    run = functools.partial(score, model, split, ids, cfg, corpus)
    if args.probe:
        out["probe"] = boundaries.probe(model, split, ids, cfg, corpus)
        print("  same-paragraph probe, balanced accuracy by layer: "
              + " ".join(f"L{r['layer']} {r['balanced_accuracy']:.3f}" for r in out["probe"]["layers"]))
    if args.hubs:
        chosen = hubs.write_hubs(run, split, ids, model.cfg.vocab_size, args.run, args.split, data_dir)

        def off(v):
            return f" ({v['difference']:+d} from the target)" if "difference" in v else ""
        print(f"  hub masking (App. E), sets chosen over {', '.join(chosen['pooled_from'])}: " + ", ".join(
            f"{k} {len(v['types'])} types / {v['blocked_pairs']} pairs{off(v)}"
            for k, v in chosen["conditions"].items()))
        checks = chosen["checks"].values()
        wrong = [f"{k} {c['blocked']} vs {c['expected']}" for k, c in chosen["checks"].items()
                 if c["blocked"] != c["expected"]]
        print(f"  App. E checks, this run: pairs blocked = pass 1's count in {len(checks) - len(wrong)} of "
              f"{len(checks)} conditions{' (NOT: ' + ', '.join(wrong) + ')' if wrong else ''}; "
              f"max |Σ_j A − 1| {max(c['row_sum_error'] for c in checks):.1e}; "
              f"max attention on a blocked pair {max(c['blocked_attention'] for c in checks):.1e}")
    if args.boundary:
        path = os.path.join(args.run, f"boundary_{args.split}.npz")
        boundaries.write_boundary(lambda rec, **kw: score(model, split, rec, cfg, corpus, **kw), split, ids,
                                  corpus.get("p_max", [np.iinfo(np.int64).max])[0], path, cfg["mb_tokens"])
        print(f"  boundary-effect sums: {len(np.unique(record_docs(split, ids)))} documents -> {path}")
    if args.paragraphs:
        path = os.path.join(args.run, f"paragraph_{args.split}.npz")
        paragraph_depth.write_paragraphs(run, split, model.cfg.max_len, path)
        print(f"  paragraph-level sums (App. A.10) -> {path}")
    if args.demo:
        d = out["demo"] = boundaries.demo(model, data_dir, corpus)
        print(f"  demo: attention from {d['tokens'][d['query']]!r} to the first sentence "
              f"{d['real']['to_first_sentence']:.4f} -> {d['fake_split']['to_first_sentence']:.4f} "
              f"under fake-split; D_eff across the boundary changes by "
              f"{d['d_eff_change_across_boundary']:+.3f} (paper, hrope_axial: -3.105)")
    return out


def finite_or_exit(kinds, run, under):
    """A non-finite score is an error, never a result: nothing is written."""
    bad = [k for k, v in kinds.items() if not np.isfinite(v["nll"])]
    if bad:
        raise SystemExit(f"error: {run} scores {kinds[bad[0]]['nll']} nats/token on {bad[0]} tokens{under}: "
                         "its checkpoint's weights are not finite (the run diverged); nothing was written")


def inputs(args):
    """(model, run values, meta, corpus figures, data folder, split, record ids): everything evaluate
    reads, each refusal made before anything is scored or written."""
    model, cfg = load(args.run)
    if not args.unfinished and not os.path.exists(os.path.join(args.run, "final.json")):
        raise SystemExit(f"error: {args.run} has not finished training (no final.json; its checkpoint is at "
                         f"step {cfg['checkpoint_step']}): rerun its train.py command, or pass --unfinished")
    cfg["device"] = "cpu" if not torch.cuda.is_available() else cfg["device"]
    model.to(cfg["device"])
    data_dir = os.path.join(args.data or cfg["data"], cfg["corpus"])
    meta, corpus = corpus_stats(data_dir)              # first: a missing folder is one line
    check_tokenizer(data_dir, cfg.get("tokenizer"))
    check_identity(data_dir, meta, cfg.get("data_identity"), args.run)   # e.g. another --max_len
    writable(args.run, "evaluate a copy of the run in a folder you can write")
    split = Split(data_dir, args.split, model.cfg.max_len, model.cfg.vocab_size)
    if args.rotation_off and not meta["settings"]["defaults"]["attention"]:
        raise SystemExit(f"error: --rotation_off: the {cfg['corpus']} corpus defines no attention shares "
                         "to compare (its entry in corpora/)")
    if args.demo and "p" not in split.a:
        raise SystemExit("error: --demo is paper 004's Fig. 1: it needs paragraph coordinates "
                         "(data of prepare.py prose, code or webtext)")
    modes = [f"--{m}" for m in ("boundary", "hubs", "hub_contributions", "probe", "paragraphs")
             if getattr(args, m)]
    if modes and "p" not in split.a:
        raise SystemExit(f"error: {' '.join(modes)}: paper 004's measures need paragraph coordinates, which "
                         f"{data_dir} does not hold (data of prepare.py prose, code or webtext)")
    ids = chosen_records(args, split, data_dir)
    whole = np.diff(np.asarray(split.a["doc_start"]))
    note = context_note(whole[whole >= 2][ids], model.cfg.max_len, f"scored {args.split}", "are scored",
                        cfg["corpus"])
    if note:
        print(note)
    return model, cfg, meta, corpus, data_dir, split, ids


def main(argv=None):
    args = parse(argv)
    model, cfg, meta, corpus, data_dir, split, ids = inputs(args)
    with owned(args.run, "the run"):   # one writer of a run at a time: a second evaluation, or its training
        return scored(args, model, cfg, meta, corpus, data_dir, split, ids)


def scored(args, model, cfg, meta, corpus, data_dir, split, ids):
    """Score the records `ids` (inputs) and write what evaluate.py writes; returns eval_<split>.json's
    contents (with --hub_contributions, the path of the contributions alone)."""
    n = len(ids)
    if args.hub_contributions:   # Table 13's pass 1 (hrope/hubs.py): nothing else is scored or written
        path = hubs.write_contributions(functools.partial(score, model, split, ids, cfg, corpus), split, ids,
                                               model.cfg.vocab_size, args.run, args.split)
        print(f"  hub contributions (App. E, pass 1): {n} records -> {path}")
        return {"hub_contributions": path}
    result = {"run": args.run, "split": args.split, "records": n,
              "documents": len(np.unique(record_docs(split, ids))), "checkpoint_step": cfg["checkpoint_step"],
              "unfinished": not os.path.exists(os.path.join(args.run, "final.json")),
              # which records, of which data: analyze.py pairs two evaluations only where these agree
              "record_ids": hashlib.sha256(np.asarray(ids, np.int64).tobytes()).hexdigest()[:16],
              "data": (cfg.get("data_identity") or {}).get("meta")}
    todo = chosen_interventions(args.interventions, model.rotary.names, split)

    shares = meta["settings"]["defaults"]["attention"]
    collect, collect_cells, summary = (attention_stats(shares, model.cfg.max_len) if args.attention
                                       else (None,) * 3)
    per = score(model, split, ids, cfg, corpus, attention=collect)
    result["kinds"], nll, kind = by_kind(per, split, ids)
    finite_or_exit(result["kinds"], args.run, "")
    result["interventions"] = {
        t: by_kind(score(model, split, ids, cfg, corpus, change=INTERVENTIONS[t]), split, ids)[0]
        for t in tqdm(todo, desc="interventions")}
    for t, kinds in result["interventions"].items():
        finite_or_exit(kinds, args.run, f" under {t}")
    rec = np.concatenate([np.full(len(per[int(r)]), r, np.int32) for r in ids])
    with replacing(os.path.join(args.run, f"eval_{args.split}_tokens.npz")) as tmp:
        np.savez_compressed(tmp, nll=nll.astype(np.float32), record=rec, doc=record_docs(split, rec),
                            kind=kind)
    print_scores(result, todo)
    if args.attention:
        # Table 3 bins rand_axial by its labels, and one draw carries its own noise: draws 1..k-1 add to
        # draw 0's cells as a mean per draw, so counts and the gate keep one pass's scale (our reading)
        draws = label_draws(model.rotary.names, args.label_draws) if "p" in split.a else 1
        for seed in range(1, draws):
            score(model, split, ids, cfg, corpus, attention=collect_cells, seed=seed)
        write_attention(summary, split, ids, args.run, args.split, draws)
    if args.rotation_off:
        write_rotation_off(model, split, ids, cfg, corpus, shares, args.run, args.split)
    result.update(paragraph_measures(args, model, split, ids, cfg, corpus, data_dir))
    write_json(result, os.path.join(args.run, f"eval_{args.split}.json"))   # written last: evaluation done
    return result


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit("\ninterrupted: eval_<split>.json is written last, so no partial evaluation is left")
