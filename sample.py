"""Sample from a trained run, with each new token's coordinates computed from the text so far.

    python sample.py out/json/seq_depth/seed0 --num_samples 20
    python sample.py out/json/seq_depth/seed0 --prompt '{"name":' --temperature 0.8 --top_k 50
    python sample.py out/markdown/hrope_axial/seed0 --prompt '# Install' --max_new_tokens 150

Structured rotary needs every token's place in its tree before the model reads it. Where the
text alone determines the tree and a token's node depends only on the text up to it (appendix
§5's no-look-ahead rule), generation can compute that place as it goes: after each sampled token
the growing text is re-read by the corpus's online builder, and the new token's coordinates are
recorded once, at its own step, never recomputed from later text.

Served: json, xml and markdown (formats.*_coords: left-to-right scanners). Not served: python (its
dense serialisation keeps nesting only in the depths, so the text alone does not fix the tree), web
and sheets (their text is extracted from the document, not the document), prose and code (their
paragraphs are cleaned and cut into sentences with rules that read past the token), and any
configuration that reads coordinates the text cannot give (references, symbols, the hRoPE controls).
A configuration that reads the sequence position alone (seq_only, flat, no_position) reads no tree:
it samples from any corpus, given a --prompt.
"""
import argparse
import dataclasses
import json
import os
import re
import sys

import numpy as np
import torch

from model import GPT, GPTConfig
from treerope import tokenizer
from treerope.batches import coords_for
from treerope.corpora import formats
from treerope.fields import token_coords
from treerope.prepared import check_identity, check_tokenizer, corpus_stats
from treerope.runs import checked_checkpoint, no_checkpoint
from treerope.settings import SEED_LIMIT

ONLINE = {"json": formats.json_coords, "xml": formats.xml_coords, "markdown": formats.markdown_coords}
PROMPT = {"json": "{", "xml": "<", "markdown": "# "}   # how the corpus's documents begin
# what can begin one: each PROMPT does (xml's "<" ends before the name it opens)
START = {"json": r"\s*[-{\[\"0-9tfn]", "xml": r"\s*<(?:[A-Za-z_?!]|$)", "markdown": ""}


def parses(corpus, text):
    """Is the text a whole document of its format? (None: every text is one, as in Markdown.)"""
    if corpus == "json":
        try:
            json.loads(text)
            return True
        except ValueError:
            return False
    if corpus == "xml":
        import lxml.etree
        try:
            lxml.etree.fromstring(text.encode(), lxml.etree.XMLParser(no_network=True, load_dtd=False))
            return True
        except lxml.etree.XMLSyntaxError:
            return False
    return None


def online_text(ids, enc):
    """The text of token ids. A byte that is not (yet) part of a whole UTF-8 character, as when
    a token ends inside one, reads as one 'x': byte offsets stay those of the tokens, and in the
    served grammars such a character is ordinary content, owned by the node an 'x' would be."""
    return re.sub("[\udc80-\udcff]", "x", enc.decode_bytes(ids).decode("utf-8", "surrogateescape"))


def online_coords(corpus, ids, enc, tok_len):
    """Coordinates of the last token of `ids`, from the text of `ids` alone (a model that reads the
    position alone, corpus None: the position alone)."""
    if corpus is None:
        return {"pos": np.int64(len(ids) - 1)}
    doc = ONLINE[corpus](online_text(ids, enc))
    if not len(doc.parent):      # no node yet (a heading's `#`s): an unused node keeps the arrays
        doc = dataclasses.replace(doc, parent=np.array([-1], np.int32), rank=np.array([0], np.int32),
                                  label=np.array([0], np.int32))   # non-empty; every token reads "absent"
    c = token_coords(doc, np.asarray(ids), tok_len)
    return {k: v[-1] for k, v in c.items() if k != "node"}


def load(run_dir, device, data=None):
    ck, cfg = checked_checkpoint(run_dir, device)   # the checkpoint is the run its config.json describes
    run, mcfg = cfg["run"], GPTConfig(**cfg["model"])
    model = GPT(mcfg)
    if run["corpus"] not in ONLINE and not set(model.rotary.names) <= {"t"}:   # it reads a tree
        sys.exit(f"error: sample.py cannot serve {run['config']} on the {run['corpus']} corpus: its text "
                 f"does not determine its tree (served: {', '.join(ONLINE)}, or a configuration that reads "
                 "the position alone; the docstring says why)")
    model.load_state_dict(ck["model"])
    run = {**run, "checkpoint_step": ck["step"],
           "finished": os.path.exists(os.path.join(run_dir, "final.json"))}
    data_dir = os.path.join(data or run["data"], run["corpus"])
    meta = corpus_stats(data_dir)[0]                  # first: a missing folder is one line
    check_tokenizer(data_dir, run.get("tokenizer"))
    check_identity(data_dir, meta, run.get("data_identity"), run_dir)
    return model.to(device).eval(), run, data_dir


@torch.no_grad()
def sample(model, corpus, stats, enc, tok_len, prompt, max_new_tokens, temperature, top_k, generator):
    """One sample: (text, per-token coordinates as recorded at each token's step)."""
    ids = enc.encode(prompt)
    if not ids:
        sys.exit("error: --prompt is empty")
    if len(ids) >= model.cfg.max_len:
        sys.exit(f"error: the prompt is {len(ids):,} tokens and the model's context {model.cfg.max_len:,}: "
                 "no room to generate; shorten --prompt")
    if parses(corpus, prompt):
        sys.exit(f"error: the prompt is already a whole {corpus} document: nothing to generate")
    read = corpus if corpus in ONLINE and not set(model.rotary.names) <= {"t"} else None   # None: position
    try:
        if read and not re.match(START[read], prompt):
            raise ValueError
        steps = [online_coords(read, ids[:i + 1], enc, tok_len) for i in range(len(ids))]
    except (ValueError, IndexError, KeyError):        # e.g. "</close>": a closing tag with nothing open
        sys.exit(f"error: --prompt {prompt[:40]!r} cannot begin a {corpus} document "
                 f"(documents begin like {PROMPT.get(corpus)!r})")
    for _ in range(min(max_new_tokens, model.cfg.max_len - len(ids))):
        b = {k: torch.as_tensor(np.stack([s[k] for s in steps]))[None] for k in steps[0]}
        b["tokens"] = torch.as_tensor(ids)[None]
        logits, _, _ = model(b["tokens"], coords_for(model, b, stats, generator))
        logits = logits[0, -1].float() / max(temperature, 1e-6)
        if top_k:
            kth = torch.topk(logits, min(top_k, logits.numel())).values[-1]
            logits = logits.masked_fill(logits < kth, float("-inf"))
        ids.append(int(torch.multinomial(logits.softmax(-1), 1, generator=generator)))
        try:
            steps.append(online_coords(read, ids, enc, tok_len))   # recorded once, at its own step
        except (ValueError, IndexError, KeyError):    # the token left the grammar: the sample ends before it
            ids.pop()
            break
        if parses(corpus, online_text(ids, enc)):     # the text closed its tree: stop
            break
    return enc.decode_bytes(ids).decode("utf-8", errors="replace"), steps


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run", help="out/<corpus>/<config>/seed<k>")
    ap.add_argument("--prompt", default=None, help="text to continue (default: the corpus's document start; "
                    "needed for the corpora sample.py serves without a tree)")
    ap.add_argument("--num_samples", type=int, default=5)
    ap.add_argument("--max_new_tokens", type=int, default=200)
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--top_k", type=int, default=None)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--data", default=None,
                    help="the data root the run trained on (default: the one it recorded)")
    args = ap.parse_args(argv)
    if args.num_samples < 1 or args.max_new_tokens < 1 or (args.top_k is not None and args.top_k < 1):
        ap.error("--num_samples, --max_new_tokens and --top_k must be at least 1")
    if not args.temperature > 0:   # `not` so that nan fails too
        ap.error("--temperature must be positive")
    if not 0 <= args.seed < SEED_LIMIT:   # torch's generator, as train.py's seeds
        sys.exit(f"error: --seed must be in [0, {SEED_LIMIT:,}), not {args.seed}")
    if not os.path.exists(os.path.join(args.run, "ckpt.pt")):
        sys.exit(f"error: {no_checkpoint(args.run)}")
    model, run, data_dir = load(args.run, "cpu", args.data)
    if args.prompt is None and run["corpus"] not in PROMPT:
        sys.exit(f"error: give --prompt: the {run['corpus']} corpus has no one way its documents begin")
    enc = tokenizer.load(data_dir)
    stats = corpus_stats(data_dir)[1]        # the hRoPE controls' densities, where the corpus has them
    tok_len = tokenizer.token_lengths(enc)
    prompt = PROMPT[run["corpus"]] if args.prompt is None else args.prompt
    g = torch.Generator().manual_seed(args.seed)
    texts = []
    for i in range(args.num_samples):
        text, _ = sample(model, run["corpus"], stats, enc, tok_len, prompt, args.max_new_tokens,
                         args.temperature, args.top_k, g)
        texts.append(text)
        print(f"--- sample {i}\n{text}")
    ok = [parses(run["corpus"], t) for t in texts]
    trained = (f"{args.run}: trained {run['checkpoint_step']} steps of {run['docs_per_step']} records"
               + ("" if run["finished"] else f", of the {run['steps']} planned (unfinished: no final.json)"))
    if None in ok:
        what = "any text is a document" if run["corpus"] == "markdown" else "not checked as documents"
        print(f"\n{len(texts)} samples ({run['corpus']}: {what}; {trained})")
    else:   # generation stops when the text parses, so the others ran out of tokens unclosed
        print(f"\n{sum(ok)}/{len(texts)} samples parse as {run['corpus']}; {len(ok) - sum(ok)} ran out of "
              f"tokens (--max_new_tokens {args.max_new_tokens}, context {model.cfg.max_len}) or left the "
              f"grammar before their document closed ({trained})")
    return texts


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit("\ninterrupted")
