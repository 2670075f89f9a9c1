"""Web archives: the HTML responses a .warc or .warc.gz file holds (`prepare.py web --src DIR`).
corpora/web.py reads them only where a --src holds such a file; the quickstart's pages are .html.
"""
import zlib

from trees import MAX_FILE_BYTES, Skip


def warc_records(path, cut=None):
    """(uri, html bytes) of every HTML response record in a .warc or .warc.gz file. A file that
    ends early, or holds a gzip member over MAX_FILE_BYTES, yields the records before that point
    and appends the reason to `cut`."""
    cut = [] if cut is None else cut
    truncated = "truncated warc (records before the cut kept)"
    with open(path, "rb") as f:
        data = f.read()
    if path.endswith(".gz"):   # one gzip member per record, usually; a cut archive keeps its prefix
        raw, parts = data, []
        while raw:
            z = zlib.decompressobj(wbits=31)
            try:
                part = z.decompress(raw, MAX_FILE_BYTES + 1)   # a bomb stops here, not in memory
            except zlib.error:
                part = b""
            if len(part) > MAX_FILE_BYTES:
                cut.append(f"too large: a warc record over {MAX_FILE_BYTES:,} bytes (records before it kept)")
                break
            parts.append(part)
            if not z.eof:
                cut.append(truncated)
                break
            raw = z.unused_data
        data = b"".join(parts)
    pos = 0
    while True:
        start = data.find(b"WARC/", pos)
        if start < 0:
            return
        head_end = data.find(b"\r\n\r\n", start)
        if head_end < 0:
            return
        headers = {}
        for line in data[start:head_end].split(b"\r\n")[1:]:
            k, _, v = line.partition(b":")
            headers[k.strip().lower()] = v.strip()
        try:
            length = int(headers.get(b"content-length", b"0"))
        except ValueError:
            return
        body = data[head_end + 4:head_end + 4 + length]
        if len(body) < length:                     # the last record was cut off: not used
            cut += [] if cut else [truncated]
            return
        pos = head_end + 4 + length
        if headers.get(b"warc-type") != b"response":
            continue
        http_head, _, payload = body.partition(b"\r\n\r\n")
        if b"html" in http_head.lower() and payload:
            yield headers.get(b"warc-target-uri", b"").decode("utf-8", "replace"), payload



def warc_items(name, path):
    """web_sources' items of the archive `name` at `path`: (name#i:uri, html bytes) per HTML response,
    and a counted skip where the archive was cut or holds none."""
    cut = []
    try:
        found = [(f"{name}#{i}:{uri}", payload) for i, (uri, payload) in enumerate(warc_records(path, cut))]
    except OSError as e:                           # as corpora.build counts a file it cannot read
        return [(name, Skip(f"unreadable ({e.strerror})"))]
    if cut:   # counted like a skipped document: the records after the cut are lost
        found.append((f"{name}#cut", Skip(cut[0])))
    return found or [(name, Skip("warc without html responses"))]
