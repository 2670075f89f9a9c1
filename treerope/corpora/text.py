"""Text files: a source's bytes become the str a corpus reads, as Python itself reads source. For
the corpora that read text files (python, paragraphs, formats); web pages go through lxml instead.
"""
import io
import tokenize

from trees import MAX_DOC_CHARS, Skip, check_size


def source_text(raw):
    """Bytes of a text file -> str, or Skip. A UTF-8 byte-order mark is dropped and a Python
    coding cookie (PEP 263) honoured, as Python itself reads source; NUL bytes mean binary."""
    if isinstance(raw, str):
        text = raw
    elif b"\0" in raw[:8192]:
        raise Skip("binary (NUL bytes)")
    else:
        try:
            text = raw.decode(tokenize.detect_encoding(io.BytesIO(raw).readline)[0])
        except (SyntaxError, LookupError, UnicodeDecodeError):
            raise Skip("not utf-8")
    check_size("a document", len(text), MAX_DOC_CHARS)   # before the per-character work
    return text
