"""The tokeniser: a byte-level BPE trained here by rustbpe and run by tiktoken (nanochat's split).

Nothing is downloaded. `train` learns merges from the training split's text with the pattern
below; the ranks are saved as data/<corpus>/tokenizer.json (a list of byte strings, in rank
order) and every later step encodes with tiktoken built from them.
"""
import json

import numpy as np
import tiktoken

from treerope.prepared import read_tokenizer

# GPT-2-style pre-tokenisation in a form both rustbpe's regex engine and tiktoken accept.
PAT = r"""'(?:[sdmt]|ll|ve|re)| ?[A-Za-z_]+| ?[0-9]{1,3}| ?[^\sA-Za-z0-9_]+|\s+(?!\S)|\s+"""
# The Python serialisation's: an identifier keeps its digits (x12) and the sigils put before it (.attr,
# :param, @key, =field, a string's opening quote; ^def $class !alias |from), so each is one pre-token;
# no English contractions. ^$!| were chosen rare before a letter in Python's strings.
CODE_PAT = r"""[ ]?[.=:@'"^$!|]*[A-Za-z_][A-Za-z_0-9]*| ?[0-9]{1,3}| ?[^\sA-Za-z0-9_]+|\s+(?!\S)|\s+"""


def train(texts, vocab_size, max_bytes=30_000_000, pattern=PAT):
    """Byte-level BPE: 256 byte tokens, then merges of the most frequent adjacent pair until
    `vocab_size` entries (fewer if the text runs out of repeated pairs). Trained on at most
    `max_bytes` of `texts`, in order. Returns tiktoken's mergeable ranks {token bytes: rank}."""
    def capped():
        seen = 0
        for t in texts:
            yield t
            seen += len(t)
            if seen >= max_bytes:
                return
    import rustbpe  # only preparing trains a BPE: training, evaluating, sampling need tiktoken alone
    tok = rustbpe.Tokenizer()
    tok.train_from_iterator(capped(), vocab_size, pattern=pattern)
    return dict(tok.get_mergeable_ranks())


def encoding(ranks, pattern=PAT, name="treerope"):
    return tiktoken.Encoding(name, pat_str=pattern, mergeable_ranks=ranks, special_tokens={})


def save(ranks, path, pattern=PAT):
    with open(path, "w") as f:
        json.dump({"pattern": pattern,
                   "ranks": [list(tok) for tok, _ in sorted(ranks.items(), key=lambda kv: kv[1])]}, f)


def load(data_dir):
    saved = read_tokenizer(data_dir)[1]
    return encoding(saved["ranks"], saved["pattern"] or PAT)


def token_lengths(enc):
    """Bytes per token id: fields.token_coords maps tokens onto characters with it."""
    return np.array([len(enc.decode_single_token_bytes(i)) for i in range(enc.n_vocab)], np.int64)
