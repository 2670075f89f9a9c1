"""The tokeniser (tokenizer.py): rustbpe trains, tiktoken encodes, as in nanochat.

A throwaway tokeniser is trained in-process on real text (standard-library files): entries,
merges learned from frequent pairs, non-ASCII round trip, byte lengths, determinism, and the
saved ranks loading back into tiktoken. Run: pytest tests/test_tokenizer.py
"""
import pytest
from conftest import stdlib_files

from treerope import tokenizer

TEXTS = [open(p, encoding="utf-8").read() for p in stdlib_files()[:60]]
SAMPLE = "def f(x):\n    return 'héllo wörld, 日本語 ✓' + x  # naïve café\n"


@pytest.fixture(scope="module")
def ranks():
    return tokenizer.train(TEXTS, 600)


def test_entries_and_merges(ranks):
    assert len(ranks) == 600 and sorted(ranks.values()) == list(range(600))
    assert all(ranks[bytes([i])] == i for i in range(256))          # the 256 byte tokens come first
    assert ranks[b" self"] > 255 and ranks[b" return"] > 255           # frequent code words are merged


def test_round_trip_and_byte_lengths(ranks):
    enc = tokenizer.encoding(ranks)
    ids = enc.encode_ordinary(SAMPLE)
    assert enc.decode(ids) == SAMPLE
    lens = tokenizer.token_lengths(enc)
    assert lens[ids].sum() == len(SAMPLE.encode("utf-8"))
    assert len(ids) < len(SAMPLE.encode("utf-8"))                     # merges shorten the stream


def test_deterministic_and_saved_ranks_load_into_tiktoken(ranks, tmp_path):
    assert tokenizer.train(TEXTS, 600) == ranks
    tokenizer.save(ranks, tmp_path / "tokenizer.json")
    enc = tokenizer.load(tmp_path)
    assert enc.n_vocab == 600 and \
        enc.encode_ordinary(SAMPLE) == tokenizer.encoding(ranks).encode_ordinary(SAMPLE)


def test_byte_cap_limits_the_training_text():
    few = tokenizer.train(TEXTS, 600, max_bytes=len(TEXTS[0]))       # only the first file
    assert few == tokenizer.train(TEXTS[:1], 600)
