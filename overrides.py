"""Model overrides on train.py's command line, nanoGPT's configurator: `--n_layer=2`, `--n_embd=64`,
... each a Python literal of the model field's type, refused in one line otherwise. train.py imports
it only where the command line holds more than its own flags (DEFAULTS, through argparse).
"""
import ast
import sys

from model import GPTConfig


def typed(key, text, default):
    """nanoGPT's configurator: a --key=value override is a Python literal of the default's type."""
    try:
        v = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        v = text                                  # a bare word is a string
    if isinstance(default, float) and type(v) is int:
        v = float(v)
    if type(v) is not type(default):
        sys.exit(f"error: --{key}={text} must be {type(default).__name__} (default {default!r})")
    return v


def model_overrides(extra):
    """--key=value overrides of model fields (n_layer, n_embd, n_head, max_len), typed."""
    over, fields = {}, GPTConfig.__dataclass_fields__
    for e in extra:
        if not e.startswith("--") or "=" not in e:
            sys.exit(f"error: unrecognised argument {e!r}; use --key=value")
        k, v = e[2:].split("=", 1)
        if k in ("rotary", "corpus", "vocab_size"):   # set by --config and by the prepared data
            sys.exit(f"error: --{k} cannot be overridden; it comes from "
                     f"{'--config' if k == 'rotary' else 'the prepared data'}")
        if k not in fields:
            sys.exit(f"error: unknown option --{k}")
        over[k] = typed(k, v, fields[k].default)
    return over
