"""Batches: a prepared split's records as padded micro-batches of tensors (Split), one run's or M runs'
at once (Split.micro_batches): a record a row, grouped by length (by_length), or rows of the context
holding records (compiled; --pack, paper 004 Table 11's blocks: fill_blocks, step_blocks), a record never
split and attending only inside itself (model.py's `blocked`); every random draw of a row from the row's
own generator (`drawn`: depth dropout, rand_p1's labels, dropout masks), so a run draws the same however
its rows are grouped; and the coordinate matrix a position configuration reads (`coordinates`).
"""
import functools
import os
import sys

import numpy as np
import torch

import rotary
from treerope.prepared import FIELDS, load_split, rebuild


class Split:
    """Records of one split, memory-mapped; hands out padded micro-batches as tensors."""

    def __init__(self, data_dir, split, max_len, vocab=None):
        self.a = load_split(data_dir, split)
        for k in ("doc_start", "tokens"):
            if k not in self.a:
                sys.exit(f"error: {os.path.join(data_dir, f'{split}_{k}.npy')} is missing; "
                         f"{rebuild(data_dir)}")
        top = int(np.max(self.a["tokens"], initial=0)) if vocab is not None else -1
        if top >= (vocab or 0):                                # the embedding would fail mid-run
            sys.exit(f"error: {data_dir}/{split}_tokens.npy holds token id {top:,}, past the model's "
                     f"{vocab:,} entries: the data is damaged or not this run's; {rebuild(data_dir)}")
        s = self.a["doc_start"]
        self.start = np.asarray(s[:-1])
        self.len = np.minimum(np.diff(s), max_len)
        keep = self.len >= 2                               # a record needs a next token
        self.start, self.len = self.start[keep], self.len[keep]

    def __len__(self):
        return len(self.len)

    def batch(self, rows, device, T=None):
        """Tensors for one micro-batch: a row per entry of `rows`, each a record or a list of records
        packed into one row (train.py --pack), padded to T (default: the longest row). Targets are
        next tokens inside each record (padding and a record's last token carry none); a packed batch
        adds `segment`, the record a token is in (-1: padding), from which the model confines
        attention to each record. The rows are gathered on the device, the split moved there once."""
        rows = [np.atleast_1d(np.asarray(r, np.int64)) for r in rows]
        at, seg = self.positions(rows, T or max(int(self.len[r].sum()) for r in rows))
        b = self.gather(torch.from_numpy(at).to(device), torch.from_numpy(seg).to(device))
        segment = b.pop("seg")
        if any(len(r) > 1 for r in rows):
            b["segment"] = segment
        return b

    def positions(self, rows, T):
        """(R, T) flat positions of each row's records laid end to end (-1: padding), and (R, T) the
        index of a token's record in its row (-1: padding)."""
        at, seg = np.full((len(rows), T), -1, np.int64), np.full((len(rows), T), -1, np.int64)
        recs = [np.atleast_1d(row).astype(np.int64) for row in rows]   # index arithmetic, no loop per token
        counts = np.array([len(r) for r in recs], np.int64)
        ids = np.concatenate(recs or [np.zeros(0, np.int64)])
        row = np.repeat(np.arange(len(rows)), counts)             # each record's row
        k = np.arange(len(ids)) - np.repeat(np.cumsum(counts) - counts, counts)   # its index in the row
        n = self.len[ids].astype(np.int64)
        before = np.cumsum(n) - n                                 # tokens before it, all rows end to end
        row_tokens = np.bincount(row, weights=n, minlength=len(rows)).astype(np.int64)
        offset = before - (np.cumsum(row_tokens) - row_tokens)[row]   # where it starts in its row
        within = np.arange(n.sum()) - np.repeat(before, n)        # a token's place in its record
        r, col = np.repeat(row, n), np.repeat(offset, n) + within
        at[r, col], seg[r, col] = np.repeat(self.start[ids], n) + within, np.repeat(k, n)
        return at, seg

    def micro_batches(self, rows, budget, T=None):
        """Micro-batches of M runs' rows at once, each (at, seg, which): positions and the record of each
        token in its row (M, B, T), -1 padding (`positions`), and each row's place in its run's `rows`
        (M, B), -1 an empty row. A row is a record, or with T (compiled, --pack) a list of records laid
        in a row of T tokens. With T: budget // T rows of every run, empty rows after a run's last.
        Without: each run's records sorted by length and, rank by rank, the runs' longest grouped as
        `by_length` groups records (one run: its own records so grouped), each padded to its longest."""
        if T is not None:
            per = max(1, budget // T)
            for j in range(0, -(-max(map(len, rows)) // per) * per, per):
                which = np.array([[i if i < len(x) else -1 for i in range(j, j + per)] for x in rows])
                laid = [self.positions([x[i] if i >= 0 else [] for i in w], T) for x, w in zip(rows, which)]
                yield np.stack([a for a, _ in laid]), np.stack([s for _, s in laid]), which
            return
        ranked = [np.argsort(self.len[np.asarray(x, np.int64)], kind="stable") for x in rows]
        longest = np.zeros(max(map(len, rows)), np.int64)
        for x, order in zip(rows, ranked):
            longest[:len(x)] = np.maximum(longest[:len(x)], self.len[np.asarray(x, np.int64)[order]])
        for group in by_length(longest, budget):
            which = np.array([[order[i] if i < len(x) else -1 for i in group]
                              for x, order in zip(rows, ranked)])
            T = int(longest[group].max())
            laid = [self.positions([[x[i]] if i >= 0 else [] for i in w], T) for x, w in zip(rows, which)]
            yield np.stack([a for a, _ in laid]), np.stack([s for _, s in laid]), which

    def on(self, device):
        """The split's fields moved to `device`, once (ensemble.stacked, before the steps read them)."""
        if getattr(self, "device", None) != device:
            self.flat = {f: torch.from_numpy(np.array(self.a[f], np.int32 if f == "tokens" else None))
                         .to(device) for f in ("tokens", *FIELDS) if f in self.a}
            self.device = device

    def gather(self, at, seg):
        """The batch at positions `at` (..., T) on the device (`seg` as positions gives it), every
        field as on disk (-1, kind 0, where padding); `seg` stays in the dict for the caller."""
        self.on(at.device)
        valid = at >= 0
        has_next = valid & (torch.cat([seg[..., 1:], torch.full_like(seg[..., :1], -1)], -1) == seg)
        p = at.clamp(min=0)
        tokens = self.flat["tokens"]
        b = {"tokens": torch.where(valid, tokens[p].long(), 0),
             "targets": torch.where(has_next, tokens[(p + 1).clamp(max=len(tokens) - 1)].long(), -1),
             "seg": seg}
        for f in FIELDS:
            if f in self.flat:
                v = self.flat[f][p].long()
                b[f] = torch.where(valid.view(valid.shape + (1,) * (v.dim() - valid.dim())), v,
                                   0 if f == "kind" else -1)
        return b


def context_note(whole, context, what, verb, corpus):
    """The note where records (their whole lengths) are longer than the model's context: only
    their first `context` tokens are read (None where none is)."""
    long = whole > context
    if not long.any():
        return None
    unseen = 1 - np.minimum(whole, context).sum() / whole.sum()
    return (f"note: {long.mean():.0%} of the {what} records are longer than the context ({context:,}): "
            f"only their first {context:,} tokens {verb}, {unseen:.0%} of the split's tokens never "
            f"(prepare.py {corpus} --max_len {context})")


def record_docs(split, ids):
    """The document each record came from (records of one document share it); the record
    itself where the data predates that field."""
    if "record_doc" in split.a:
        kept = np.diff(np.asarray(split.a["doc_start"])) >= 2            # as Split keeps them
        return np.asarray(split.a["record_doc"])[kept][ids]
    return np.asarray(ids)


def by_length(lengths, budget):
    """Group records (sorted by length) into micro-batches of at most `budget` padded tokens.
    Returns lists of positions into `lengths`; no record is split."""
    order = np.argsort(lengths, kind="stable")
    groups, cur, longest = [], [], 0
    for i in order:
        L = int(lengths[i])
        if cur and max(longest, L) * (len(cur) + 1) > budget:
            groups.append(cur)
            cur, longest = [], 0
        cur.append(int(i))
        longest = max(longest, L)
    if cur:
        groups.append(cur)
    return groups


# computed from batch["depth"]: what depth dropout hides
DEPTH_READERS = {"depth", "rank", "owndepth", "shared1", "depth_label"}


def coordinates(b, names, corpus, generator=None):
    """The (..., T, K) coordinate matrix of the coordinates `names` (rotary.COORDINATES) for batch b, with
    the corpus's hRoPE control inputs; rand_p1's labels from b["uniform"] (a row's draws, `drawn`), else
    from `generator` (evaluate.py, sample.py)."""
    if "p1_density" in corpus:
        b["p1_density"], b["p1_period"] = corpus["p1_density"], corpus["p1_period"]
    if not names:
        return b["pos"].new_zeros(*b["pos"].shape, 0).int()
    return torch.stack([rotary.coordinate(b, n, generator) for n in names], -1).int()


def coords_for(model, b, corpus, generator=None):
    """`coordinates` of the columns model.rotary reads (Rotary.coords' order)."""
    return coordinates(b, model.rotary.names, corpus, generator)


# --------------------------------------------------------------------------------- draws ----
def row_generator(seed, step, row, device):
    """A row's own generator, seeded by (run seed, step, the row's place in the step's rows): every random
    draw of a training row comes from it, so a run draws the same alone (train.py) and in a study, however
    its rows are grouped into micro-batches and padded; evaluation passes step -1."""
    key = np.random.SeedSequence([seed, step + 1, row]).generate_state(2, np.uint32)
    return torch.Generator(device=device).manual_seed(int(key[0]) << 31 | int(key[1]) >> 1)


def drawn(b, which, seed, step, sites, depth_dropout, names, T):
    """One run's random draws for its rows in batch b (fields (B, T)), each row's from its own generator
    (`row_generator`) in one order: depth dropout (appendix §4: depth hidden on a random share of the
    records, each record of a row drawn), rand_p1's uniforms (a row of the context), then a keep-mask per
    dropout site (`sites`: {name: (p, the shape of one row of the context)}). Depth is hidden in b; returns
    the masks {site: (B, *shape)}. `which`: each row's place in its run's step (-1: an empty row)."""
    hide = depth_dropout > 0 and "depth" in b and bool(DEPTH_READERS & set(names))
    uniform = "rand_p1" in names
    if not (hide or uniform or sites):
        return {}
    dev = b["tokens"].device
    hidden, u, keep = [], [], {k: [] for k in sites}
    for row in which:
        if row < 0:    # an empty row (a run with fewer rows than another): nothing drawn, nothing read
            hidden.append(torch.zeros(T, dtype=torch.bool, device=dev))
            u.append(torch.ones(T, device=dev))
            for k, masks in keep.items():
                masks.append(torch.ones(sites[k][1], dtype=torch.bool, device=dev))
            continue
        g = row_generator(seed, step, int(row), dev)
        if hide:       # one draw per record a row can hold (its tokens' `seg`: the record's index in the row)
            hidden.append(torch.rand(T, generator=g, device=dev) < depth_dropout)
        if uniform:
            u.append(torch.rand(T, generator=g, device=dev))
        for k, (p, shape) in sites.items():
            keep[k].append(torch.rand(shape, generator=g, device=dev) >= p)
    if hide:
        seg = b["seg"].clamp(min=0)
        b["depth"] = torch.where(torch.stack(hidden).gather(1, seg) & (b["seg"] >= 0), -1, b["depth"])
    if uniform:
        b["uniform"] = torch.stack(u)[:, :b["tokens"].shape[1]]
    return {k: torch.stack(v) for k, v in keep.items()}


# -------------------------------------------------------------------------- a step's rows ----
def step_rows(run, T=None):
    """A run's rows at its step: its records (a seeded permutation per pass, the same in every
    configuration), with --pack its blocks of records; with T (compiled) the records laid into rows of
    the context."""
    if run.cfg.pack:
        return run.blocks(run.step)
    records = step_records(len(run.train), run.cfg.docs_per_step, run.step, run.cfg.seed)
    return fill_blocks(records, run.train.len, T, len(records)) if T else list(records)


def fixed_rows(run):
    """The context's length where a run's rows are rows of the context (compiled: one shape; --pack's
    blocks), else None (a record a row, grouped by length: no padding to the context)."""
    return run.mcfg.max_len if run.cfg.compile or run.cfg.pack else None


def step_records(n_records, docs_per_step, step, seed):
    """The records of one step: a seeded permutation per pass, identical for every configuration."""
    per_pass = max(n_records // docs_per_step, 1)
    epoch, j = divmod(step, per_pass)
    return pass_order(n_records, seed, epoch)[j * docs_per_step:(j + 1) * docs_per_step]


@functools.lru_cache(maxsize=128)   # runs trained at once each hold one pass at a time
def pass_order(n_records, seed, epoch):
    """A pass's permutation, drawn once per pass, not every step (71 k records: ~2 ms a draw)."""
    perm = np.random.default_rng([seed, epoch]).permutation(n_records)
    perm.flags.writeable = False
    return perm


# ---------------------------------------------------------- paper 004's packed blocks ----
def fill_blocks(order, lengths, block, open_blocks):
    """Records, in the order given, laid into blocks of at most `block` tokens (paper 004 Table 11's
    "batch 16" of "block size 1024", packed: our reading): each record goes into the first of the
    last `open_blocks` blocks with room for it, else starts a block. No record is split, so every
    window starts where a record does. Returns lists of record ids, one per block."""
    blocks, room = [], []
    for r in order:
        L = int(lengths[r])
        j = next((j for j in range(max(0, len(blocks) - open_blocks), len(blocks)) if room[j] >= L), None)
        if j is None:
            blocks.append([])
            room.append(block)
            j = len(blocks) - 1
        blocks[j].append(int(r))
        room[j] -= L
    return blocks


def step_blocks(lengths, block, blocks_per_step, seed):
    """--pack: steps of `blocks_per_step` blocks of `block` tokens (paper 004 Table 11). Each pass
    lays a seeded permutation of the records, as step_records draws them, into blocks (fill_blocks,
    a record into one of the step's open blocks), so no step is mostly padding. Returns
    (step -> its blocks, the steps in the first pass)."""
    passes = []   # each pass's blocks, laid out once

    def blocks_of(epoch):
        order = np.random.default_rng([seed, epoch]).permutation(len(lengths))
        return fill_blocks(order, lengths, block, blocks_per_step)

    def at(step):
        epoch = 0
        while True:
            if epoch == len(passes):
                passes.append(blocks_of(epoch))
            n = max(len(passes[epoch]) // blocks_per_step, 1)
            if step < n:
                return passes[epoch][step * blocks_per_step:(step + 1) * blocks_per_step]
            step, epoch = step - n, epoch + 1
    at(0)         # lays out the first pass, whose length --passes counts in
    return at, max(len(passes[0]) // blocks_per_step, 1)

