"""The tokeniser: a byte-level BPE trained here by rustbpe and run by tiktoken (nanochat's split).

Nothing is downloaded. `train` learns merges from the training split's text with the pattern
below; the ranks are saved as data/<corpus>/tokenizer.json (a list of byte strings, in rank
order) and every later step encodes with tiktoken built from them.
"""
import hashlib
import json
import os
import sys

import numpy as np
import tiktoken

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


def read(data_dir):
    """(tokenizer.json's bytes, its {pattern, ranks}); a missing or damaged file is one line."""
    path = os.path.join(data_dir, "tokenizer.json")
    fix = f"rerun `python prepare.py {os.path.basename(os.path.normpath(data_dir))} --force` (with its --out)"
    try:
        with open(path, "rb") as f:
            raw = f.read()
        saved = json.loads(raw)
        if isinstance(saved, list):           # written before the pattern was saved with the ranks
            saved = {"pattern": PAT, "ranks": saved}
        ranks = {bytes(t): i for i, t in enumerate(saved["ranks"])}
        return raw, {"pattern": saved["pattern"], "ranks": ranks}
    except OSError as e:
        sys.exit(f"error: cannot read {path} ({e.strerror}); {fix}")
    except (ValueError, TypeError, KeyError) as e:    # truncated, overwritten, or not a list of byte lists
        sys.exit(f"error: {path} is damaged ({type(e).__name__}: {e}); {fix}")


def load(data_dir):
    saved = read(data_dir)[1]
    return encoding(saved["ranks"], saved["pattern"])


def fingerprint(data_dir):
    """A short hash of the saved ranks and pattern: train.py writes it into config.json, and
    sample.py and evaluate.py refuse a run whose data folder was since re-prepared with another
    tokeniser (its token ids would decode to other text: fluent garbage, not an error)."""
    return hashlib.sha256(read(data_dir)[0]).hexdigest()[:16]


def check(data_dir, trained_with):
    """Exit with one line if data_dir's tokeniser is not the one the run trained with (None: a run
    written before the fingerprint was kept, not checked)."""
    if trained_with is not None and fingerprint(data_dir) != trained_with:
        sys.exit(f"error: {data_dir} was prepared again after this run trained (its tokeniser differs); "
                 f"evaluate or sample with the data it trained on (--data), or retrain")


def token_lengths(enc):
    """Bytes per token id: data.token_coords maps tokens onto characters with it."""
    return np.array([len(enc.decode_single_token_bytes(i)) for i in range(enc.n_vocab)], np.int64)
