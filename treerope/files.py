"""Files written so that a kill never leaves half of one: atomic replacement, JSON in and out, a
folder checked writable before work starts, and the lock a writer holds (`owned`), taken over once
the process it names is gone. No torch: prepare.py writes with these too.
"""
import contextlib
import json
import os
import sys
import time


@contextlib.contextmanager
def replacing(path):
    """Yield a temporary name beside `path`, then rename it over `path`: a kill never leaves a
    half-written file, and readers see either the old file or the new one."""
    root, ext = os.path.splitext(path)
    tmp = f"{root}.tmp{os.getpid()}{ext}"        # keeps the extension: np.savez appends .npz
    try:
        yield tmp
        os.replace(tmp, path)
    except OSError as e:                         # a full disk (or `ulimit -f`), a folder made read-only
        sys.exit(f"error: cannot write {path} ({e.strerror or e}); free space or choose a folder you can "
                 "write (the file is as it was)")
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def write_json(obj, path):
    with replacing(path) as tmp, open(tmp, "w") as f:
        json.dump(obj, f, indent=1)


def read_json(path, fix):
    """A JSON file's contents, or one line naming the file and what to do about it (`fix`)."""
    try:
        with open(path) as f:
            return json.load(f)
    except OSError as e:
        sys.exit(f"error: cannot read {path} ({e.strerror}); {fix}")
    except ValueError as e:                     # not JSON (truncated, overwritten) or not UTF-8
        sys.exit(f"error: {path} is damaged (not JSON: {e}); {fix}")


def writable(folder, fix):
    """Make `folder` and check that a file can be written in it, before any work is done there."""
    test = os.path.join(folder, f".write_test{os.getpid()}")
    try:
        os.makedirs(folder, exist_ok=True)
        with open(test, "w") as f:
            f.write("ok")
    except OSError as e:
        sys.exit(f"error: cannot write in {folder} ({e.strerror}); {fix}")
    finally:   # a full disk fails the write after the file was made: nothing is left behind
        with contextlib.suppress(OSError):
            os.remove(test)


@contextlib.contextmanager
def owned(path, what):
    """Hold `path` + ".lock" (holding our pid) while `what` is written: a second writer is refused in
    one line; a lock left by a dead process is taken over."""
    lock = path.rstrip("/") + ".lock"
    writable(os.path.dirname(lock) or ".", "choose a folder you can write")   # a file in the way, read-only
    for _ in range(2):
        try:
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            break
        except FileExistsError:   # another writer's, or a dead one's
            refuse_or_take_over(lock, what, path)
    else:
        sys.exit(f"error: could not take the lock {lock}")
    os.write(fd, str(os.getpid()).encode())
    os.close(fd)
    try:
        yield
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.remove(lock)


def refuse_or_take_over(lock, what, path):
    """Exit with one line naming the writer of `what` at `path` that holds `lock`; where its process
    is gone (or the lock is unreadable), remove the lock so the caller can take it."""
    try:
        text = open(lock).read()
        # empty: its writer is writing its pid now, or was killed before it could (stale after a second)
        writer = f"process {int(text)}" if text else "a process starting now" \
            if time.time() - os.path.getmtime(lock) < 1 else None
    except (ValueError, OSError):   # unreadable, or gone meanwhile
        writer = None
    if writer is None or text and not alive(int(text)):   # stale: its process is gone
        with contextlib.suppress(FileNotFoundError):
            os.remove(lock)
        return
    sys.exit(f"error: {what} {path} is being written by {writer} (lock {lock}); "
             "wait for it, or remove the lock if that process is not this run")


def alive(pid):
    """Whether process `pid` runs (another user's counts as running)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:   # another user's
        pass
    return True
