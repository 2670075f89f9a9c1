"""Where the gain lands: score a checkpoint per token kind, under coordinate interventions, and
read its attention.

    python evaluate.py out/python/seq_depth/seed0                 # test split, auto interventions
    python evaluate.py out/web/seq_depth/seed0 --attention --max_docs 64
    python evaluate.py out/code/hrope_axial/seed0 --attention     # + compression-depth cells
    python evaluate.py out/prose/hrope_axial/seed0 --demo         # paper 004 Fig. 1, one example
    python evaluate.py out/code/hrope_axial/seed0 --boundary      # sums for Table 1 (analyze.py --boundary)
    python evaluate.py out/code/hrope_axial/seed0 --probe         # same-paragraph probe (Table 8)
    python evaluate.py out/code/hrope_axial/seed0 --paragraphs    # sums for Tables 5, 9 (analyze.py --paragraphs)

Interventions change coordinates only, never tokens (depth-perception appendix §2 "How the
structure is used"; paragraph-boundaries paper §3.2, §4.3):
  shuffle      each record's structural coordinates permuted among its own tokens
  remove       structural coordinates absent: those planes turn by angle 0
  period/rand/const0   hRoPE p1 replaced by floor(t/L), a density-matched random labelling, 0
  fake_merge   two adjacent paragraphs share one p1;  fake_split  a new p1 boundary inside one
Outputs, next to the checkpoint: eval_<split>.json (nats/token overall, per kind, per
intervention), eval_<split>_tokens.npz (per-token NLL, record, document, kind: analyze.py pairs
runs token by token), attention_<split>.json, and for hRoPE depth_<split>.npz (per-document
(d, Δp1) cells of log attention that analyze.py --depth reads); with --boundary, --hubs and
--paragraphs the sums analyze.py's Tables 1, 13 and 5/9 read (boundary_, hub_*_, paragraph_<split>.npz).
"""
import argparse
import os

import numpy as np
import torch
from tqdm import tqdm

import trees
from model import GPT, GPTConfig
import tokenizer
from data import (STRUCTURAL, Split, coordinate, coords_for, corpus_stats, pack, record_docs, replacing,
                  token_coords, write_json)
D_MAX, K_MAX = 1024, 32        # compression-depth cells: token distance d <= 1,024, Δp1 <= 32


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


def fake_merge(b, g):
    """One real paragraph boundary per record removed: the paragraph after it takes the p1 of
    the one before (later paragraphs move down by one)."""
    _move_p1(b, g, lambda p1, p2: torch.nonzero(p1[1:] != p1[:-1]).flatten() + 1, -1)


def fake_split(b, g):
    """A new boundary inside one paragraph, at one of its sentence starts (or, in a record
    without one, mid-paragraph): p1 grows by one from there on."""
    def inside(p1, p2):
        at = torch.nonzero((p1[1:] == p1[:-1]) & (p2[1:] != p2[:-1])).flatten() + 1
        return at if len(at) else torch.nonzero(p1[1:] == p1[:-1]).flatten() + 1
    _move_p1(b, g, inside, +1)


def _move_p1(b, g, candidates, step):
    b["p"] = b["p"].clone()
    for j, n in enumerate(b["len"].tolist()):
        p1, p2 = b["p"][j, :n, 0], b["p"][j, :n, 1]
        at = candidates(p1, p2)
        if len(at):
            s = int(at[torch.randint(len(at), (1,), generator=g, device=g.device)])
            b["p"][j, s:n, 0] += step


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
    out = [torch.bincount(cell, v, size), torch.bincount(cell, v * v, size), torch.bincount(cell, minlength=size)]
    return [x.reshape(n_d, n_k).numpy() for x in out]


# --------------------------------------------------------------------------------- scoring ----
def load(run_dir, device="cpu"):
    path = os.path.join(run_dir, "ckpt.pt")
    if not os.path.exists(path):
        raise SystemExit(f"error: no checkpoint at {path}; train it first (python train.py ...)")
    ck = torch.load(path, map_location=device, weights_only=False)
    model = GPT(GPTConfig(**ck["config"])).to(device)
    model.load_state_dict(ck["model"])
    return model.eval(), ck["run"]


@torch.no_grad()
def score(model, split, ids, cfg, corpus, change=None, attention=None, seed=0, block=None):
    """Per-token NLL of records `ids` with optional coordinate intervention `change`. With
    `attention` (a callable(record, b_row, atts)), it also sees every record's attention; with
    `block` (batch -> (B, T, T) bool), those (query, key) pairs are blocked (b_row["blocked"])."""
    g = torch.Generator(device=cfg["device"]).manual_seed(seed)
    per = {}
    for group in pack(split.len[ids], cfg["mb_tokens"]):
        rec = ids[group]
        b = split.batch(rec, cfg["device"])
        b["len"] = torch.as_tensor(split.len[rec])
        b.update(corpus)
        if change is not None:
            change(b, g)
        C = coords_for(model, b, corpus, torch.Generator(device=cfg["device"]).manual_seed(seed))
        read = [n for n in ("rand_p1", "period_p1") if n in model.rotary.names]
        if read:                     # the labels this model's p1 channel read (depth cells binned by them too)
            b["p1_read"] = C[..., model.rotary.names.index(read[0])].long()
        if block is not None:
            b["blocked"] = block(b)
        _, nll, atts = model(b["tokens"], C, b["targets"], return_attn=attention is not None, blocked=b.get("blocked"))
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
    kind = np.concatenate([np.asarray(split.a["kind"][split.start[r] + 1:split.start[r] + split.len[r]])
                           for r in ids]) if "kind" in split.a else np.zeros(len(nll), np.uint8)
    out = {"all": {"nll": float(nll.mean()), "tokens": int(len(nll))}}
    for flag, name in trees.KIND_NAMES.items():
        m = (kind & flag) > 0
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


def attention_stats(corpus_name, context):
    """A collector for `score(attention=...)` and a function giving its summary. Shares are
    over strictly earlier keys, averaged over queries that have at least one such key."""
    acc = {"sum": {}, "queries": {}}
    cells, cells_read = {}, {}

    def collect(r, b, att):
        path, depth = b.get("path"), b.get("depth")
        earlier = torch.ones(att.shape[-1], att.shape[-1], dtype=torch.bool).tril(-1)
        masks, bins = {}, {}
        if corpus_name == "python":
            masks["ancestor"] = ancestor_mask(path, depth)
        if corpus_name == "web":
            masks["same_depth_elsewhere"] = same_depth_mask(path, depth)
        if corpus_name == "sheets":
            bins, shares, cell = sheet_masks(path, depth, b["ref_path"])
            masks.update(shares)
        # a share averages over queries with at least one such key; histogram bins share one
        # denominator, every cell token with an earlier token
        for name, m in list(masks.items()) + list(bins.items()):
            m = m & earlier
            s, q = share(att, m, cell & earlier.any(-1) if name in bins else m.any(-1))
            acc["sum"][name] = acc["sum"].get(name, 0) + s
            acc["queries"][name] = acc["queries"].get(name, 0) + q
        if "p" in b:                 # binned by the true p1; and by the labels read, where they differ
            cells[r] = depth_cells(att, b["p"][:, 0].cpu(), min(D_MAX + 1, context))
            if "p1_read" in b:
                cells_read[r] = depth_cells(att, b["p1_read"].cpu(), min(D_MAX + 1, context))

    def summary():
        out = {}
        for name, s in acc["sum"].items():
            per_head = (s / max(acc["queries"][name], 1)).numpy()
            out[name] = {"mean_over_heads": float(per_head.mean()), "per_layer_head": per_head.round(5).tolist(),
                         "queries": acc["queries"][name]}
        for region in ("same_row", "rows_above"):   # Fig. 6 as one histogram per region
            keys = [f"{region}_{o:+d}" for o in range(-COL_OFFSETS, COL_OFFSETS + 1)]
            if keys[0] in out:
                out[region + "_by_column_offset"] = {"offsets": list(range(-COL_OFFSETS, COL_OFFSETS + 1)),
                                                     "mean_over_heads": [out.pop(k)["mean_over_heads"] for k in keys]}
        return out, {"": cells, "_read": cells_read}
    return collect, summary


# ------------------------------------------------------------ normalised boundary effect ----
# Paper 004 §3.2-3.3, App. A.1-A.2, as this repository reads them:
#  - Ā(i, j): attention averaged over layers and heads; y = log Ā on causal pairs j < i (d = i - j >= 1).
#  - D_eff = y - b0 - b1 d, one line per model fitted by least squares on every causal pair of the
#    unmanipulated condition (A: real p1) of the scored records.
#  - anchors, from condition A: within = pairs in one paragraph (Δp1 = 0); para = pairs that straddle a
#    real paragraph boundary (Δp1 >= 1); sent = pairs in one paragraph that straddle a sentence
#    boundary (Δp2 >= 1), whose β is the paper's β_A^sent.
#  - M, for fake-merge (B) and fake-split (C): exactly the pairs whose Δp1 the intervention changes
#    (both move p1 from one position s on, so M = {j < s <= i}).
#  - β(S) = (mean D_eff over S - anchor_within) / (anchor_para - anchor_within); for an intervention
#    Δ = β_observed(M) - β_unmanipulated(M), both on the same pairs M: exactly 0 for a model that does
#    not read p1 (H0(1) by construction); when M is the whole real-boundary set it is the paper's
#    β_B - 1, and the paper's β_C - β_A^sent is printed beside it.
#  - C_pct: the percentile of β_C among the real boundaries of condition A, each boundary b with
#    β over its own pairs {j < b <= i}.
# Everything is kept as per-document sums (count, Σd, Σy; Σd², Σdy for the fit), so analyze.py can
# resample documents and recompute the fit, anchors and β in every bootstrap draw.
BOUNDARY_SETS = ("within", "para", "sent", "merge_obs", "merge_unm", "split_obs", "split_unm")


def _sums(y, d, mask):
    return [float(mask.sum()), float(d[mask].sum()), float(y[mask].sum())]


def boundary_sums(A, pA, B, pB, C, pC):
    """One record: attentions (n, n) averaged over layers and heads under conditions A (real), B
    (fake-merge), C (fake-split) and their (n, 3) coordinates -> (fit[5], sets[7, 3], boundaries[k, 3])."""
    n = A.shape[0]
    i, j = np.tril_indices(n, -1)
    d = (i - j).astype(np.float64)
    y = {c: np.log(np.maximum(M[i, j], 1e-30)) for c, M in (("A", A), ("B", B), ("C", C))}
    dp = lambda p, k: np.abs(p[i, k] - p[j, k])
    same = dp(pA, 0) == 0
    merged, split = dp(pB, 0) != dp(pA, 0), dp(pC, 0) != dp(pA, 0)
    fit = [float(len(d)), d.sum(), (d * d).sum(), y["A"].sum(), (d * y["A"]).sum()]
    sets = [_sums(y["A"], d, same), _sums(y["A"], d, ~same), _sums(y["A"], d, same & (dp(pA, 1) > 0)),
            _sums(y["B"], d, merged), _sums(y["A"], d, merged), _sums(y["C"], d, split), _sums(y["A"], d, split)]
    starts = np.flatnonzero(pA[1:, 0] != pA[:-1, 0]) + 1                 # real paragraph boundaries
    bounds = [_sums(y["A"], d, (j < s) & (i >= s)) for s in starts]
    return fit, sets, bounds


def cross_paragraph_block(p1, keys):
    """Paper 004 App. E: block cross-paragraph attention to the `keys` tokens: (B, T, T) pairs
    (i, j) with j a masked key and p1(i) != p1(j). p1, keys: (B, T)."""
    return keys[:, None, :] & (p1[:, :, None] != p1[:, None, :])


# ------------------------------------------------------------------------- hub masking ----
# Paper 004 App. E as this repository reads it: a pair's contribution is log Ā(i, j) minus the
# mean log Ā of same-paragraph pairs at the same distance d (pooled over the scored records);
# a token TYPE's aggregate is the sum over the cross-paragraph pairs where it is the key; hubs are
# the 5% of types (among those that are keys of a cross-paragraph pair) with the most negative
# aggregate, i.e. those carrying the compression. Freq-matched: the 5% most frequent types.
# Random (token-matched): as many random non-hub types. Pair-matched random: random non-hub
# types added until they block at least as many cross-paragraph pairs as the hubs do. The mass
# sweep (App. E "pair-matched mass sweep"): the same, one draw each, up to 25%, 50%, 75% of the
# hubs' pairs (100% is Pair-matched random itself).
HUB_SHARE, MASS_SWEEP = 0.05, (25, 50, 75)


def hub_sets(contrib, pairs, freq, draws=3, seed=0, share=HUB_SHARE, sweep=MASS_SWEEP):
    """{condition: [type arrays]} from per-type arrays: aggregate contribution, cross-paragraph
    pairs as key, and frequency (types with no cross-paragraph pair are never chosen); `sweepNN`
    blocks at least NN% of the hubs' pairs."""
    rng = np.random.default_rng(seed)
    present = np.flatnonzero(pairs > 0)
    n = max(1, int(round(share * len(present))))
    hub = present[np.argsort(contrib[present], kind="stable")[:n]]
    others = np.setdiff1d(present, hub)
    out = {"hub": [hub], "freq": [np.argsort(-freq, kind="stable")[:n]], "random": [], "pair_matched": []}
    for _ in range(draws):
        out["random"].append(rng.choice(others, min(n, len(others)), replace=False))
        order = rng.permutation(others)
        k = int(np.searchsorted(np.cumsum(pairs[order]), pairs[hub].sum())) + 1
        out["pair_matched"].append(order[:k])
    for pct in sweep:
        order = rng.permutation(others)
        k = int(np.searchsorted(np.cumsum(pairs[order]), pct / 100 * pairs[hub].sum())) + 1
        out[f"sweep{pct}"] = [order[:k]]
    return out


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


def write_hubs(model, split, ids, cfg, corpus, run_dir, split_name, draws=3):
    """Choose the hub sets from unmasked attention, then score every condition with cross-paragraph
    attention to its key types blocked; per-document depth cells for each (hub_<cond>_<split>.npz)."""
    if "p" not in split.a:
        raise SystemExit("error: --hubs needs paragraph coordinates (prepare.py prose/code)")
    seen = {}
    score(model, split, ids, cfg, corpus,
          attention=lambda r, row, atts: seen.__setitem__(r, (atts.mean((0, 1)), row["p"][:, 0], row["tokens"])))
    V = model.cfg.vocab_size
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
        np.add.at(n_pairs, key[ok], 1)
    freq = np.bincount(np.concatenate([t.numpy() for _, _, t in seen.values()]), minlength=V)
    sets = {"original": [np.zeros(0, np.int64)], **hub_sets(contrib, n_pairs, freq, draws)}
    docs = record_docs(split, np.arange(len(split.len)))
    uniq = np.unique(docs[ids])
    summary = {}
    for cond, draws_of in sets.items():
        for k, types in enumerate(draws_of):
            keys = torch.zeros(V, dtype=torch.bool)
            keys[torch.as_tensor(types, dtype=torch.long)] = True
            cells = {}
            score(model, split, ids, cfg, corpus,
                  block=lambda b: cross_paragraph_block(b["p"][..., 0], keys.to(b["tokens"].device)[b["tokens"]]),
                  attention=lambda r, row, atts: cells.__setitem__(r, depth_cells(atts, row["p"][:, 0], exclude=row["blocked"])))
            acc = document_cells(cells, docs, uniq)
            name = cond if len(draws_of) == 1 else f"{cond}{k}"
            with replacing(os.path.join(run_dir, f"hub_{name}_{split_name}.npz")) as tmp:
                np.savez_compressed(tmp, **acc)
            summary[name] = {"types": len(types), "blocked_pairs": int(n_pairs[types].sum())}
    write_json(summary, os.path.join(run_dir, f"hub_{split_name}.json"))
    return summary


# -------------------------------------------------------- paragraph-level compression ----
# Paper 004 §6.4 / App. A.10: a Δp1 = 1 pair is scored against the same-paragraph pairs at the same
# token distance d and the same query-context band b(i). The paper does not give the band's width;
# this repository's reading: b(i) = i // P_BAND, the query's position in its window in bands of 32
# tokens (8 bands at the CPU context of 256). d <= 256 as in A.10.
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


def write_paragraphs(model, split, ids, cfg, corpus, path):
    """Every scored record's A.10 sums (paragraph_cells), saved for analyze.py --paragraphs."""
    if "p" not in split.a:
        raise SystemExit("error: --paragraphs needs paragraph coordinates (prepare.py prose/code)")
    bands = -(-model.cfg.max_len // P_BAND)
    base_sum, base_n = np.zeros((P_DMAX + 1, bands)), np.zeros((P_DMAX + 1, bands), np.int64)
    rows = []

    def keep(r, row, atts):
        logA = atts.mean((0, 1)).clamp_min(1e-30).log().double().numpy()
        s, c, key, sums, counts = paragraph_cells(logA, row["p"][:, 0].numpy())
        base_sum[:, :s.shape[1]] += s
        base_n[:, :c.shape[1]] += c
        rows.append(np.c_[np.full(len(key), r), key, sums, counts])

    score(model, split, ids, cfg, corpus, attention=keep)
    rows = np.concatenate(rows) if rows else np.zeros((0, 6))
    with replacing(path) as tmp:
        np.savez_compressed(tmp, base_sum=base_sum, base_n=base_n, record=rows[:, 0].astype(np.int64),
                            p1=rows[:, 1].astype(np.int64), d=rows[:, 2].astype(np.int64),
                            band=rows[:, 3].astype(np.int64), sum=rows[:, 4], count=rows[:, 5].astype(np.int64),
                            max_len=model.cfg.max_len)


# ------------------------------------------------------------------ same-paragraph probe ----
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
    return {"balanced_accuracy": float((tpr + tnr) / 2), "macro_f1": float(sum(f1) / 2), "auroc": float(auroc)}


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
        for group in pack(split.len[ids], cfg["mb_tokens"]):
            rec = ids[group]
            b = split.batch(rec, cfg["device"])
            hidden.clear()
            model(b["tokens"], coords_for(model, b, corpus, torch.Generator(device=cfg["device"]).manual_seed(0)))
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
    test_docs = np.random.default_rng(0).permutation(uniq)[:max(1, int(round(test_share * len(uniq))))]
    te = torch.from_numpy(np.isin(docs, test_docs))
    if y[~te].sum() == 0 or y[te].sum() == 0:
        raise SystemExit("error: --probe found no paragraph boundary in the training or test documents; "
                         "score more records (--max_docs)")
    layers = [{"layer": l, **logistic_probe(X[l][~te], y[~te], X[l][te], y[te])} for l in range(X.shape[0])]
    return {"layers": layers, "boundary_share": float(y.float().mean()), "train_documents": len(uniq) - len(test_docs),
            "test_documents": len(test_docs), "tokens": int(len(y))}


def write_boundary(model, split, ids, cfg, corpus, path):
    """Score records under real, fake-merge and fake-split p1 (the same boundary choices as the
    interventions), and save per-document boundary sums."""
    if "p" not in split.a:
        raise SystemExit("error: --boundary needs paragraph coordinates (prepare.py prose/code)")
    seen = {}
    for cond, change in (("A", None), ("B", fake_merge), ("C", fake_split)):
        def keep(r, row, atts, cond=cond):
            seen.setdefault(r, {})[cond] = (atts.mean((0, 1)).numpy(), row["p"].numpy())
        score(model, split, ids, cfg, corpus, change=change, attention=keep)
    docs = record_docs(split, np.arange(len(split.len)))
    uniq = np.unique(docs[ids])
    fit = np.zeros((len(uniq), 5))
    sets = np.zeros((len(uniq), len(BOUNDARY_SETS), 3))
    b_doc, b_sums = [], []
    for r, c in seen.items():
        u = np.searchsorted(uniq, docs[r])
        f, s, bs = boundary_sums(c["A"][0], c["A"][1], c["B"][0], c["B"][1], c["C"][0], c["C"][1])
        fit[u] += f
        sets[u] += s
        b_doc += [u] * len(bs)
        b_sums += bs
    with replacing(path) as tmp:
        np.savez_compressed(tmp, doc=uniq, fit=fit, sets=sets, b_doc=np.asarray(b_doc, np.int64),
                            b_sums=np.asarray(b_sums, np.float64).reshape(-1, 3))


def demo(model, data_dir, corpus, text="This is what I love. You are the reason."):
    """Paper 004 Fig. 1 and Fig. 3, one example: Cond. A (real: one paragraph) and Cond. B
    (fake-split: the second sentence a paragraph of its own); tokens identical, only p1 changes.
    Reports the attention from the second sentence's first token back to the first sentence,
    and the change of D_eff across the boundary: the mean over the pairs that straddle it (query
    in the second sentence, key in the first) of log Ā under B minus under A. One line serves both
    conditions, so the line cancels (a raw change, as the paper says of its 3.105). The Ā maps
    (mean over layers and heads) are kept for analyze.py's figure."""
    enc = tokenizer.load(data_dir)
    doc = trees.paragraphs_doc([text])
    ids = np.asarray(enc.encode_ordinary(doc.text), np.int64)
    c = token_coords(doc, ids, tokenizer.token_lengths(enc))
    b = {k: torch.as_tensor(np.asarray(v, np.int64))[None] for k, v in c.items() if k in ("pos", "p", "path", "depth")}
    b.update(corpus)
    second = int(np.flatnonzero(c["p"][:, 1] == 1)[0])
    out = {"tokens": [enc.decode([int(t)]) for t in ids], "query": second}
    maps = {}
    for cond in ("real", "fake_split"):
        bb = dict(b)
        if cond == "fake_split":
            bb["p"] = b["p"].clone()
            bb["p"][0, second:, 0] += 1
        with torch.no_grad():
            _, _, atts = model(torch.as_tensor(ids)[None], model.rotary.coords(bb), return_attn=True)
        A = torch.stack([a[0] for a in atts]).mean((0, 1))       # Ā over layers and heads
        maps[cond] = A
        out[cond] = {"to_first_sentence": float(A[second, :second].sum()), "attention": A.tolist()}
    n = len(ids)
    straddle = (torch.arange(n)[:, None] >= second) & (torch.arange(n)[None, :] < second)
    log = {k: v.clamp_min(1e-30).log() for k, v in maps.items()}
    out["d_eff_change_across_boundary"] = float((log["fake_split"] - log["real"])[straddle].mean())
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run", help="out/<corpus>/<config>/seed<k>")
    ap.add_argument("--split", default="test", choices=("train", "val", "test"))
    ap.add_argument("--max_docs", type=int, default=None, help="score only the first N records")
    ap.add_argument("--interventions", default="auto", help="comma list, 'auto' or 'none'")
    ap.add_argument("--attention", action="store_true", help="attention statistics (explicit path)")
    ap.add_argument("--demo", action="store_true", help="paper 004 Fig. 1 single example")
    ap.add_argument("--probe", action="store_true", help="paper 004 App. A.9: same-paragraph probe per layer")
    ap.add_argument("--hubs", action="store_true", help="paper 004 App. E: hub masking, depth cells per condition")
    ap.add_argument("--paragraphs", action="store_true",
                    help="paper 004 App. A.10: per-paragraph sums for the paragraph-level regression (analyze.py --paragraphs)")
    ap.add_argument("--boundary", action="store_true",
                    help="paper 004 Table 1: per-document sums for the normalised boundary effect (analyze.py --boundary)")
    ap.add_argument("--data", default=None, help="data root (default: the run's)")
    args = ap.parse_args(argv)

    model, cfg = load(args.run)
    cfg["device"] = "cpu" if not torch.cuda.is_available() else cfg["device"]
    model.to(cfg["device"])
    data_dir = os.path.join(args.data or cfg["data"], cfg["corpus"])
    _, corpus = corpus_stats(data_dir)
    split = Split(data_dir, args.split, model.cfg.max_len)
    n = len(split) if args.max_docs is None else min(args.max_docs, len(split))
    if n == 0:
        raise SystemExit(f"error: the {args.split} split of {data_dir} has no records")
    ids = spread(split, n)
    result = {"run": args.run, "split": args.split, "records": n}

    names = model.rotary.names
    todo = (default_interventions(names) if args.interventions == "auto" else
            [] if args.interventions == "none" else args.interventions.split(","))
    for t in todo:
        if t not in INTERVENTIONS:
            raise SystemExit(f"error: unknown intervention {t!r}; known: {', '.join(INTERVENTIONS)}")
        if t in ("real", "period", "rand", "const0", "fake_merge", "fake_split") and "p" not in split.a:
            raise SystemExit(f"error: {t} needs paragraph coordinates (prepare.py prose/code)")

    collect, summary = attention_stats(cfg["corpus"], model.cfg.max_len) if args.attention else (None, None)
    per = score(model, split, ids, cfg, corpus, attention=collect)
    result["kinds"], nll, kind = by_kind(per, split, ids)
    rec = np.concatenate([np.full(len(per[int(r)]), r, np.int32) for r in ids])
    with replacing(os.path.join(args.run, f"eval_{args.split}_tokens.npz")) as tmp:
        np.savez_compressed(tmp, nll=nll.astype(np.float32), record=rec, doc=record_docs(split, rec), kind=kind)
    result["interventions"] = {}
    for t in tqdm(todo, desc="interventions"):
        kinds, _, _ = by_kind(score(model, split, ids, cfg, corpus, change=INTERVENTIONS[t]), split, ids)
        result["interventions"][t] = kinds
    print(f"{args.run} ({args.split}, {n} records): {result['kinds']['all']['nll']:.4f} nats/token")
    for name, v in result["kinds"].items():
        line = f"  {name:14s} {v['nll']:.4f}  ({v['tokens']} tokens)"
        for t in todo:
            w = result["interventions"][t].get(name)
            if w:
                line += f"  {t} {w['nll']:.4f} (ppl x{np.exp(w['nll'] - v['nll']):.2f})"
        print(line)
    if args.attention:
        stats, cells = summary()
        write_json(stats, os.path.join(args.run, f"attention_{args.split}.json"))
        for name, v in stats.items():
            if "offsets" in v:   # Fig. 6 histogram
                print(f"  attention by column offset, {name[:-len('_by_column_offset')]} (-8..8, %): "
                      + " ".join(f"{100 * x:.1f}" for x in v["mean_over_heads"]))
            else:
                print(f"  attention share on {name}: {100 * v['mean_over_heads']:.2f}% (mean over heads)")
        for suffix, by_record in cells.items():     # depth_<split>.npz: true p1; depth_read_: labels read
            if not by_record:
                continue
            docs = record_docs(split, np.arange(len(split.len)))           # indexed by record id
            uniq = np.unique(docs[ids])
            acc = document_cells(by_record, docs, uniq)
            path = os.path.join(args.run, f"depth{suffix}_{args.split}.npz")
            with replacing(path) as tmp:
                np.savez_compressed(tmp, **acc)
            print(f"  compression-depth cells: {len(uniq)} documents -> {path}")
    if args.probe:
        result["probe"] = probe(model, split, ids, cfg, corpus)
        print("  same-paragraph probe, balanced accuracy by layer: "
              + " ".join(f"L{r['layer']} {r['balanced_accuracy']:.3f}" for r in result["probe"]["layers"]))
    if args.hubs:
        summary = write_hubs(model, split, ids, cfg, corpus, args.run, args.split)
        print("  hub masking (App. E): " + ", ".join(f"{k} {v['types']} types / {v['blocked_pairs']} pairs"
                                                      for k, v in summary.items()))
    if args.boundary:
        path = os.path.join(args.run, f"boundary_{args.split}.npz")
        write_boundary(model, split, ids, cfg, corpus, path)
        print(f"  boundary-effect sums: {len(np.unique(record_docs(split, ids)))} documents -> {path}")
    if args.paragraphs:
        path = os.path.join(args.run, f"paragraph_{args.split}.npz")
        write_paragraphs(model, split, ids, cfg, corpus, path)
        print(f"  paragraph-level sums (App. A.10) -> {path}")
    if args.demo:
        result["demo"] = demo(model, data_dir, corpus)
        d = result["demo"]
        print(f"  demo: attention from {d['tokens'][d['query']]!r} to the first sentence "
              f"{d['real']['to_first_sentence']:.4f} -> {d['fake_split']['to_first_sentence']:.4f} under fake-split; "
              f"D_eff across the boundary changes by {d['d_eff_change_across_boundary']:+.3f} (paper, hrope_axial: -3.105)")
    write_json(result, os.path.join(args.run, f"eval_{args.split}.json"))   # written last: evaluation done
    return result


if __name__ == "__main__":
    main()
