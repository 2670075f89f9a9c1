"""The GPT is causal and its training loss is the token mean.

Causality: for every registered configuration, on the SDPA and the explicit-attention path,
changing the tokens and every coordinate after position t never changes a logit at or before t
(a future-token leak, e.g. attention without the causal mask, fails here). The loss normaliser:
one training step's logged loss equals the NLL summed over its records, one record at a time,
divided by the hand-counted number of predicted tokens. Run: pytest tests/test_model.py
"""
import json
import os

import numpy as np
import pytest
import torch

import rotary
import train
from model import GPT, GPTConfig
from treerope import batches
from treerope.hrope import hubs

B, T, CUT = 2, 12, 5
CORPUS = {"p_max": [8, 8, 8], "p1_density": 0.2, "p1_period": 3}


def fields(seed):
    g = torch.Generator().manual_seed(seed)
    path = torch.randint(0, 9, (B, T, 22), generator=g)
    depth = torch.randint(1, 22, (B, T), generator=g)
    path[torch.arange(22).expand(B, T, 22) >= depth[..., None]] = -1
    return {"tokens": torch.randint(0, 64, (B, T), generator=g), "path": path, "depth": depth,
            "within": torch.randint(-1, 30, (B, T), generator=g),
            "ref_path": torch.where(torch.rand(B, T, 1, generator=g) < 0.3, path, -1),
            "symbol": torch.randint(-1, 5, (B, T), generator=g),
            "p": torch.randint(0, 9, (B, T, 3), generator=g),
            "label": torch.randint(-1, 6, (B, T), generator=g),
            "grid": torch.randint(-1, 9, (B, T, 2), generator=g),
            "source": torch.randint(0, 2, (B, T), generator=g),
            "chat": torch.randint(0, 9, (B, T, 3), generator=g)}


@pytest.mark.parametrize("name", sorted(rotary.CONFIGS))
def test_a_later_token_never_changes_an_earlier_logit(name):
    torch.manual_seed(0)
    m = GPT(GPTConfig(vocab_size=64, n_layer=6, n_embd=256, n_head=2, max_len=T, configuration=name,
                      corpus=CORPUS)).eval()
    a, b = fields(1), fields(2)
    for k in a:                                 # b: the same prefix, everything after CUT different
        b[k][:, :CUT + 1] = a[k][:, :CUT + 1]
    logits = {}
    for tag, f in (("a", a), ("b", b)):
        batch = {**{k: v for k, v in f.items() if k != "tokens"}, "pos": torch.arange(T).expand(B, T),
                 "p1_density": 0.2, "p1_period": 3}
        C = m.rotary.coords(batch, torch.Generator().manual_seed(0))
        with torch.no_grad():
            logits[tag, "sdpa"] = m(f["tokens"], C)[0]
            logits[tag, "explicit"] = m(f["tokens"], C, return_attn=True)[0]
    for path in ("sdpa", "explicit"):
        assert torch.allclose(logits["a", path][:, :CUT + 1], logits["b", path][:, :CUT + 1], atol=1e-5)
        assert not torch.allclose(logits["a", path][:, CUT + 1:], logits["b", path][:, CUT + 1:])
    assert torch.allclose(logits["a", "sdpa"], logits["a", "explicit"], atol=1e-4)


def test_step_loss_is_the_mean_over_predicted_tokens(tiny_python, tmp_path):
    """Records of different lengths in several micro-batches: padding, the last token of each
    record and other micro-batches must not enter the normaliser."""
    run = train.main(["--compile=0", "--bf16=0", "--corpus", "python", "--config", "seq_depth",
                      "--data", tiny_python, "--out", str(tmp_path), "--seed=5", "--steps=1",
                      "--milestones=1", "--n_layer=1", "--max_len=256", "--docs_per_step=6",
                      "--mb_tokens=512", "--val_docs=2", "--test_docs=2"])
    logged = json.loads(open(os.path.join(run, "log.jsonl")).readline())["train_loss"]
    cfg = json.load(open(os.path.join(run, "config.json")))
    split = batches.Split(os.path.join(tiny_python, "python"), "train", 256)
    rec = batches.step_records(len(split), 6, 0, 5)   # seed 5: lengths 79 and 238 share a micro-batch
    lengths = split.len[rec]
    assert len(set(lengths.tolist())) > 1 and len(batches.by_length(lengths, 512)) > 1   # the case at issue
    torch.manual_seed(5)
    m = GPT(GPTConfig.saved(cfg["model"]))                      # the same initial weights as step 0
    total = 0.0
    for r in rec:                                           # one record at a time: no padding at all
        b = split.batch(np.array([r]), "cpu")
        total += m(b["tokens"], m.rotary.coords(b), b["targets"])[1].sum().item()
    assert logged == pytest.approx(total / int((lengths - 1).sum()), rel=1e-5)


def test_a_packed_step_scores_every_record_as_if_alone(tiny_python, tmp_path):
    """--pack (paper 004 Table 11's blocks, our reading): records share a block but neither attend
    across their boundary nor predict across it, and pos restarts in each. The logged loss of a packed
    step equals the NLL of its records scored one at a time, over the hand-counted predicted tokens:
    attention leaking into the earlier record, a target crossing the seam, or t running on across the
    block each change it."""
    run = train.main(["--compile=0", "--bf16=0", "--corpus", "python", "--config", "seq_depth",
                      "--data", tiny_python, "--out", str(tmp_path), "--seed=5", "--steps=1",
                      "--milestones=1", "--n_layer=1", "--max_len=256", "--docs_per_step=3",
                      "--pack=1", "--mb_tokens=512", "--val_docs=2", "--test_docs=2"])
    logged = json.loads(open(os.path.join(run, "log.jsonl")).readline())["train_loss"]
    cfg = json.load(open(os.path.join(run, "config.json")))
    split = batches.Split(os.path.join(tiny_python, "python"), "train", 256)
    blocks = batches.step_blocks(split.len, 256, 3, 5)[0](0)
    assert len(blocks) == 3 and max(len(b) for b in blocks) > 1              # the case that matters
    assert all(split.len[b].sum() <= 256 for b in blocks)
    torch.manual_seed(5)
    m = GPT(GPTConfig.saved(cfg["model"]))
    total, n = 0.0, 0
    for r in (r for b in blocks for r in b):
        b = split.batch(np.array([r]), "cpu")
        total += m(b["tokens"], m.rotary.coords(b), b["targets"])[1].sum().item()
        n += int(split.len[r]) - 1
    assert logged == pytest.approx(total / n, rel=1e-5)
    j = next(j for j, b in enumerate(blocks) if len(b) > 1)
    packed = split.batch(blocks, "cpu")
    seam = int(split.len[blocks[j][0]])                                     # the second record's first token
    assert packed["pos"][j, seam] == 0 and packed["pos"][j, seam - 1] == seam - 1
    assert packed["targets"][j, seam - 1] == -1 and \
        packed["targets"][j, seam - 2] == packed["tokens"][j, seam - 1]
    assert packed["segment"][j, seam - 1] == 0 and packed["segment"][j, seam] == 1


def test_blocked_pairs_get_exactly_zero_attention_and_none_changes_nothing():
    """Hub masking (paper 004 App. E): cross-paragraph attention to chosen keys is blocked. A
    blocked pair receives exactly zero attention on both paths; an all-False mask and no mask give
    identical outputs; a token's attention to itself is never blocked."""
    torch.manual_seed(0)
    m = GPT(GPTConfig(vocab_size=64, n_layer=2, n_embd=128, n_head=2, max_len=T, configuration="hrope_axial",
                      corpus=CORPUS)).eval()
    f = fields(3)
    p = torch.zeros(B, T, 3, dtype=torch.long)
    p[:, 6:, 0] = 1                                            # two paragraphs: tokens 0-5 and 6-11
    batch = {"pos": torch.arange(T).expand(B, T), "p": p}
    C = m.rotary.coords(batch)
    keys = torch.zeros(B, T, dtype=torch.bool)
    keys[:, [1, 4, 7]] = True                                  # masked keys
    blocked = hubs.cross_paragraph_block(p[..., 0], keys)
    assert blocked[0, 8, 4] and blocked[0, 9, 1] and not blocked[0, 5, 4] and not blocked[0, 9, 7]
    with torch.no_grad():
        logits, _, atts = m(f["tokens"], C, return_attn=True, blocked=blocked)
        for a in atts:                                           # (B, H, T, T)
            assert (a[:, :, 6:, [1, 4]] == 0).all()              # paragraph 2 -> masked keys of paragraph 1
            assert (a[:, :, 8, 7] > 0).all() and (a[:, :, 5, 4] > 0).all()   # same paragraph: untouched
        sdpa = m(f["tokens"], C, blocked=blocked)[0]
        assert torch.allclose(sdpa, logits, atol=1e-5)           # both paths block the same pairs
        plain = m(f["tokens"], C)[0]
        assert torch.allclose(m(f["tokens"], C, blocked=torch.zeros(B, T, T, dtype=torch.bool))[0], plain,
                              atol=1e-6)
        assert not torch.allclose(sdpa, plain)
        self_only = torch.ones(B, T, T, dtype=torch.bool)        # block everything: self-attention remains
        assert torch.isfinite(m(f["tokens"], C, blocked=self_only)[0]).all()


def test_nll_is_the_softmax_loss_of_the_full_logits_where_a_target_exists():
    """The head runs only at positions with a target; each NLL must still be -log softmax of that
    position's full logits at its target (a gather misaligned with its scatter fails), and 0 at
    padding and at a record's last token."""
    torch.manual_seed(0)
    m = GPT(GPTConfig(vocab_size=64, n_layer=2, n_embd=64, n_head=1, max_len=T,
                      configuration="seq_depth")).eval()
    f = fields(3)
    C = m.rotary.coords({"pos": torch.arange(T).expand(B, T), **f})
    targets = f["tokens"].roll(-1, 1)
    targets[0, 7:] = -1                                   # a short record, padded
    targets[1, -1] = -1                                   # a record's last token
    with torch.no_grad():
        logits = m(f["tokens"], C)[0]
        _, nll, _ = m(f["tokens"], C, targets)
    by_hand = -logits.log_softmax(-1).gather(-1, targets.clamp(min=0)[..., None])[..., 0]
    keep = targets >= 0
    assert torch.allclose(nll[keep], by_hand[keep], atol=1e-5)
    assert (nll[~keep] == 0).all() and keep.sum() == 2 * T - (T - 7) - 1


def test_a_config_saved_before_the_rename_still_loads():
    """config.json and ckpt.pt written before GPTConfig.rotary became GPTConfig.configuration (the
    model's `rotary` is its Rotary module) name the configuration `rotary`: both spellings load."""
    old = {"vocab_size": 64, "n_layer": 1, "n_embd": 64, "n_head": 1, "max_len": 8, "rotary": "seq_depth",
           "corpus": {}, "dropout": 0.0}
    new = {**{k: v for k, v in old.items() if k != "rotary"}, "configuration": "seq_depth"}
    assert GPTConfig.saved(old) == GPTConfig.saved(new) == GPTConfig(**new)
    assert GPT(GPTConfig.saved(old)).rotary.config == "seq_depth"


def test_flops_are_nanogpts_count_with_the_tied_head():
    """nanoGPT's estimate_mfu, by hand for a planted model (vocab 100, 2 layers, d 64, 1 head):
    N = wte 6,400 (tied to the head: counted, once) + 2 blocks x (LayerNorms 2 x 64, qkv 64 x 192,
    proj 64 x 64, MLP 2 x 64 x 256 = 49,280) + ln_f 64 = 105,024; per token 6N + 12 L H Q T. Leaving
    the head out (the old count) or counting it twice fails here."""
    m = GPT(GPTConfig(vocab_size=100, n_layer=2, n_embd=64, n_head=1, configuration="seq_only"))
    N = 6_400 + 2 * 49_280 + 64
    assert m.num_params() == N
    assert m.flops_per_token(10) == 6 * N + 12 * 2 * 1 * 64 * 10
    # each record at its own length: 10 tokens attending over 10, 3 over 3
    assert m.flops(np.array([10, 3])) == 10 * (6 * N + 12 * 2 * 64 * 10) + 3 * (6 * N + 12 * 2 * 64 * 3)
