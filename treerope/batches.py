"""Paper 004 Table 11's batches: records packed into blocks of the context's length (train.py
--pack), a record never split, each attending only inside itself (model.py's `blocked`).
"""
import numpy as np


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
