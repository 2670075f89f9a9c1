"""The GPT: GPT-2 style, pre-LayerNorm, GELU MLP x4, no biases, tied embeddings, no learned
position embedding, dropout (0 by default; paper 004's settings 0.1); position enters only through the rotary
planes of every head (depth-perception appendix §4 "Model"). Its forward owns the loss: train.py trains it
as it is, one run or many (a study's runs through torch.func.vmap): a fork of this file reaches every run."""
import math
from dataclasses import dataclass, field

import torch
import torch.nn as nn
import torch.nn.functional as F

from rotary import Rotary


@dataclass
class GPTConfig:
    vocab_size: int = 4096
    n_layer: int = 4
    n_embd: int = 128
    n_head: int = 1
    max_len: int = 256
    configuration: str = "seq_only"            # the rotary configuration
    corpus: dict = field(default_factory=dict)   # corpus statistics hRoPE calibrates from
    dropout: float = 0.0                          # Table 11 (paper 004): 0.1 (settings.py)

    @classmethod
    def saved(cls, values):
        """The config a config.json or checkpoint recorded (written before the rename: `rotary`)."""
        values = dict(values)
        if "rotary" in values:
            values["configuration"] = values.pop("rotary")
        return cls(**values)


class Dropout(nn.Module):
    """nn.Dropout whose keep-mask is handed in (`keep`, a buffer covering a row of the context; the
    site takes its first x.shape entries): a run draws its masks from its own generator outside the
    model, so it draws the same in train.py and in a study (torch.func.vmap takes no generator). With
    no mask handed in, torch's own draw."""

    def __init__(self, p):
        super().__init__()
        self.p = p
        self.register_buffer("keep", None, persistent=False)

    def forward(self, x):
        if not self.training or self.p == 0:
            return x
        if self.keep is None:
            return F.dropout(x, self.p)
        return x * self.keep[tuple(slice(0, n) for n in x.shape)] / (1 - self.p)


class Attention(nn.Module):
    def __init__(self, cfg, layer):
        super().__init__()
        self.n_head, self.layer = cfg.n_head, layer
        self.c_attn = nn.Linear(cfg.n_embd, 3 * cfg.n_embd, bias=False)
        self.c_proj = nn.Linear(cfg.n_embd, cfg.n_embd, bias=False)
        self.attn_drop = Dropout(cfg.dropout)
        self.resid_drop = Dropout(cfg.dropout)

    def forward(self, x, C, rotary, return_attn=False, blocked=None):
        B, T, E = x.shape
        q, k, v = self.c_attn(x).split(E, dim=2)
        q, k, v = (t.view(B, T, self.n_head, E // self.n_head) for t in (q, k, v))
        q, k = rotary(q, k, C, self.layer)                      # rotary on q and k, every head
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))        # (B, H, T, Dh)
        # explicit: the probabilities for evaluate.py, or dropped by a mask drawn outside (SDPA draws inside)
        explicit = return_attn or self.training and self.attn_drop.p > 0
        if explicit or blocked is not None:   # the default SDPA path needs no mask tensor
            future = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1)
        if blocked is not None:  # (B, T, T) (query, key) pairs set to -inf (paper 004 App. E); never self
            blocked = (blocked & ~torch.eye(T, dtype=torch.bool, device=x.device))[:, None]
        att = None
        if explicit:
            s = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
            s = s.masked_fill(future if blocked is None else future | blocked, float("-inf"))
            att = s.float().softmax(-1)
            y = self.attn_drop(att).to(v.dtype) @ v
        elif blocked is None:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=~(future | blocked))
        return self.resid_drop(self.c_proj(y.transpose(1, 2).reshape(B, T, E))), att if return_attn else None


class Block(nn.Module):
    def __init__(self, cfg, layer):
        super().__init__()
        self.ln_1 = nn.LayerNorm(cfg.n_embd, bias=False)
        self.attn = Attention(cfg, layer)
        self.ln_2 = nn.LayerNorm(cfg.n_embd, bias=False)
        self.mlp = nn.Sequential(nn.Linear(cfg.n_embd, 4 * cfg.n_embd, bias=False), nn.GELU(),
                                 nn.Linear(4 * cfg.n_embd, cfg.n_embd, bias=False), Dropout(cfg.dropout))

    def forward(self, x, C, rotary, return_attn=False, blocked=None):
        a, att = self.attn(self.ln_1(x), C, rotary, return_attn, blocked)
        x = x + a
        return x + self.mlp(self.ln_2(x)), att


class GPT(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        if cfg.n_embd % cfg.n_head:
            raise ValueError(f"n_embd {cfg.n_embd} is not a multiple of n_head {cfg.n_head}")
        self.cfg = cfg
        self.wte = nn.Embedding(cfg.vocab_size, cfg.n_embd)
        self.drop = Dropout(cfg.dropout)   # nanoGPT's places: embeddings, attention, residual branches
        self.blocks = nn.ModuleList(Block(cfg, i) for i in range(cfg.n_layer))
        self.ln_f = nn.LayerNorm(cfg.n_embd, bias=False)
        self.lm_head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)
        self.lm_head.weight = self.wte.weight                   # tied input/output embeddings
        self.apply(self._init)
        for name, p in self.named_parameters():                 # GPT-2 scaled residual init
            if name.endswith("c_proj.weight") or name.endswith("mlp.2.weight"):
                nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * cfg.n_layer))
        # Built last and drawing no random numbers: every configuration at one seed has
        # identical weights outside the rotary parameters (appendix §5).
        self.rotary = Rotary(cfg.configuration, cfg.n_embd // cfg.n_head, cfg.n_layer, cfg.corpus)
        self.rotary.check_heads(cfg.n_head)

    @staticmethod
    def _init(m):
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, 0.0, 0.02)

    def non_embedding_params(self):
        return sum(p.numel() for n, p in self.named_parameters()
                   if n not in ("wte.weight",) and not n.startswith("rotary"))

    def forward(self, idx, C, targets=None, return_attn=False, blocked=None):
        """idx (B, T) token ids; C (B, T, K) coordinates from rotary.coords(); targets (B, T)
        with -1 where no loss is taken; blocked (B, T, T) bool, optional: (query, key) pairs whose
        attention is blocked (evaluate.py's hub masking; train.py's packed blocks, where a record
        attends only inside itself), off by default and free when off.
        Returns (logits, or None when targets are given; per-token NLL or None; attention list)."""
        x = self.drop(self.wte(idx))
        atts = []
        for block in self.blocks:
            x, att = block(x, C, self.rotary, return_attn, blocked)
            atts.append(att)
        x, atts = self.ln_f(x), (atts if return_attn else None)
        if targets is None:
            return self.lm_head(x), None, atts
        # every position's loss, 0 where the target is -1 (padding, a record's last token): no
        # data-dependent shape, so the compiler traces the step whole
        nll = F.cross_entropy(self.lm_head(x).float().flatten(0, 1), targets.flatten(), ignore_index=-1,
                              reduction="none")
        return None, nll.view(targets.shape), atts

    def num_params(self):
        """nanoGPT's N (get_num_params): every parameter, the embedding tied to the output head counted
        once and so counted (nanoGPT leaves out only position embeddings; here there are none)."""
        return sum(p.numel() for p in self.parameters())

    def flops_per_token(self, T):
        """nanoGPT's estimate (estimate_mfu): 6N + 12 L H Q T for a token attending over T positions.
        nanoGPT's T is the block size; here a record's own length (our reading: records are shorter
        than the context and attend only inside themselves)."""
        c = self.cfg
        return 6 * self.num_params() + 12 * c.n_layer * c.n_head * (c.n_embd // c.n_head) * T

    def flops(self, lengths):
        """Model FLOPs of training on records of `lengths` tokens (an integer array): each token's
        flops_per_token at its record's length. Rows of T tokens as laid (padding and masked-out
        pairs included) give the FLOPs the hardware executes: flops(np.full(rows, T))."""
        return float((lengths * self.flops_per_token(lengths)).sum())
