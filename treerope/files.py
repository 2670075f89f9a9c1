"""A lock that is already there (data.owned): refused in one line while the process it names lives,
taken over once that process is gone. data.owned imports it only where its lock file exists.
"""
import contextlib
import os
import sys


def refuse_or_take_over(lock, what, path):
    """Exit with one line naming the writer of `what` at `path` that holds `lock`; where its process
    is gone (or the lock is unreadable), remove the lock so the caller can take it."""
    try:
        pid = int(open(lock).read() or os.getpid())   # empty: its writer is writing the pid
        os.kill(pid, 0)
    except (ValueError, ProcessLookupError, FileNotFoundError):   # stale: its process is gone
        with contextlib.suppress(FileNotFoundError):
            os.remove(lock)
        return
    except PermissionError:   # alive, another user's
        pass
    sys.exit(f"error: {what} {path} is being written by process {pid} (lock {lock}); "
             "wait for it, or remove the lock if that process is not this run")
