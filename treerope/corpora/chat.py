"""Chat: conversations whose coordinates are exchange, speaker and position.

The appendix names the setting once (Figure 4: "a grid (the statement grid on code; row and column
on spreadsheets; exchange, speaker and position on chat)") and describes it nowhere else; the
tree below, and what an exchange is, are this repository's reading (REFERENCE.md "Chat").

The corpus is real: the Chit-Chat Challenge dataset of BYU's PCC lab (MIT licence), 7,168
conversations between people on a chat website in 2018, 258,145 messages, shipped as one JSON file
by the `chitchat_dataset` package (requirements.txt). Nothing else conversational was on this
machine (REFERENCE.md says what was searched).

    python prepare.py chat                              # the installed dataset
    python prepare.py chat --src my.json                # any file in its format (a folder: its .json files)
    python prepare.py chat --conversations 200          # its first 200 conversations
"""
import functools
import json
import os
import sys

import numpy as np

import trees
from treerope.corpora import Corpus, build, find_files


def default_source():
    """dataset.json of the installed chitchat_dataset package, or None."""
    try:
        import chitchat_dataset  # optional: the one real multi-speaker corpus found offline
    except ImportError:
        return None
    path = os.path.join(os.path.dirname(chitchat_dataset.__file__), "dataset.json")
    return path if os.path.exists(path) else None


def conversations(path):
    """[(id, [(sender, text)] in order)] of one file in the dataset's format: {id: {"messages":
    [[{"text", "sender", ...}, ...], ...]}}, a list of turns, each a list of messages. A
    conversation not in that shape, or a file not JSON or not such an object, is a trees.Skip, counted
    like a bad document, as is a file that cannot be read (corpora.build's reasons)."""
    try:
        with open(path, "rb") as f:
            trees.check_size("a file", os.fstat(f.fileno()).st_size, trees.MAX_FILE_BYTES, "bytes")
            data = json.load(f)
    except ValueError as e:              # empty, truncated, not UTF-8
        return [("", trees.Skip(f"not JSON ({type(e).__name__})"))]
    except OSError as e:
        return [("", trees.Skip(f"unreadable ({e.strerror})"))]
    except RecursionError:               # read here, before build's guard: 10,000 nested lists
        return [("", trees.Skip("too deeply nested"))]
    if not isinstance(data, dict):
        return [("", trees.Skip("not a chat file (a JSON object of conversations by id)"))]
    out = []
    for cid, conv in data.items():
        try:
            out.append((cid, [(str(m["sender"]), str(m["text"])) for turn in conv["messages"] for m in turn]))
        except (KeyError, TypeError):
            out.append((cid, trees.Skip("not a conversation (messages with text and sender)")))
    return out


def sources(args):
    """prepare.py's sources: the conversations of --src files, or of the installed dataset; with
    --conversations N, the first N (in file order)."""
    files = find_files(args.src, (".json",)) if args.src else [(default_source(),) * 2]
    if files == [(None, None)]:
        sys.exit("error: no chat corpus found: pip install chitchat_dataset (requirements.txt), "
                 "or pass a file in its format: python prepare.py chat --src FILE.json")
    items = []
    for name, p in files:
        if isinstance(p, trees.Skip):   # not a regular file (find_files): counted, never opened
            items.append((name, p))
        else:
            items += [(f"{os.path.basename(p)}:{cid}", conv) for cid, conv in conversations(p)]
    if not items:
        sys.exit(f"error: no .json files under {args.src}")
    return items[:args.conversations], args.src or [p for _, p in files]


def chat_doc(messages):
    """[(sender, text)] in order -> Doc. Tree: exchange (level 1, rank: its index) -> turn (level 2,
    rank in its exchange) -> message (level 3, rank in its turn). A turn is a run of messages by
    one sender; speakers are numbered by first appearance; an exchange starts at each turn of the
    first speaker, so between two people it is an opening turn and its reply. Only the messages
    write text, one a line, and the newline after a message belongs to no node (as the sheets'
    separators): a message's tokens sit at depth 3, a newline at 0. char_chat: exchange and
    speaker per character, a newline taking those of its message: nothing depends on later text."""
    ids = {}
    speaker = [ids.setdefault(s, len(ids)) for s, _ in messages]
    if len(ids) < 2:
        raise trees.Skip("one speaker only (no exchange)")
    parent, rank, spans = [], [], []
    exchange, at = -1, 0
    for i, (sp, (_, text)) in enumerate(zip(speaker, messages)):
        if i == 0 or sp != speaker[i - 1]:          # a new turn
            if sp == 0:                             # the first speaker opens an exchange
                exchange += 1
                ex_node, turns = len(parent), 0
                parent.append(-1)
                rank.append(exchange)
            turn_node, in_turn = len(parent), 0
            parent.append(ex_node)
            rank.append(turns)
            turns += 1
        spans.append((at, at + len(text), len(parent), exchange, sp))
        parent.append(turn_node)
        rank.append(in_turn)
        in_turn += 1
        at += len(text) + 1                         # its newline
    text = "\n".join(t for _, t in messages)
    char_node = np.full(len(text), -1, np.int32)
    char_chat = np.zeros((len(text), 2), np.int32)
    for start, end, node, ex, sp in spans:
        char_node[start:end] = node
        char_chat[start:end + 1] = ex, sp           # the newline after it too
    return trees.Doc(text, char_node, np.asarray(parent, np.int32), np.asarray(rank, np.int32),
                     char_chat=char_chat)


def turns(c, doc):
    """Where a record may start: a new turn."""
    return np.r_[True, (c["chat"][1:, :2] != c["chat"][:-1, :2]).any(1)]


CORPORA = {"chat": Corpus(sources, functools.partial(build, builder=chat_doc), turns,
                          reads=(("conversations", True),))}
