"""Output files that cannot lose a report: proven writable first, then replaced whole.

Every file the command line writes (the JSON report, a comparison, a plot) goes through
:func:`replace_atomically`: it is written to a temporary file beside its target and
renamed into place, so a kill or a full disk leaves either the old file or the new one,
never half of one; on failure the temporary is removed. :func:`check_writable` proves a
path can be written before any table prints. No rich, no click: the plots use it too.
"""

from __future__ import annotations

import errno
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager

from ..errors import InputFileError

__all__ = ["check_writable", "replace_atomically", "target_of"]

_TEMP_PREFIX = ".einsum-analyze-"


def target_of(path: str) -> str:
    """The file a write to ``path`` replaces: a symbolic link's target, not the link."""
    return os.path.realpath(path) if os.path.islink(path) else path


def check_writable(path: str, what: str) -> None:
    """Raise :class:`InputFileError` unless ``path`` can be written; write nothing there.

    ``what`` names the file in the one-line error (``"the JSON report"``). Proof: a
    temporary file is created and removed in the target's folder (the folder exists, is
    writable, on a filesystem that takes a byte), and a target that does not exist yet
    is created and removed (the name is valid there: not too long).

    Example:
        >>> check_writable("", "the JSON report")
        Traceback (most recent call last):
        ...
        einsum_analyze.errors.InputFileError: cannot write the JSON report to '': the path is empty
    """
    def refuse(reason: str) -> InputFileError:
        return InputFileError(f"cannot write {what} to {path!r}: {reason}")

    if not path:
        raise refuse("the path is empty")
    target = target_of(path)
    if os.path.isdir(target):
        raise refuse("it is a folder")
    folder = os.path.dirname(os.path.abspath(target))
    if not os.path.isdir(folder):
        reason = ("it is a link to a missing file in a folder that does not exist"
                  if target != path else "its folder does not exist")
        raise refuse(reason)
    if os.path.exists(target) and not os.path.isfile(target):
        raise refuse("it is not a regular file")
    try:
        handle, temporary = tempfile.mkstemp(prefix=_TEMP_PREFIX, dir=folder)
        try:
            os.write(handle, b"\n")
            os.fsync(handle)
        finally:
            os.close(handle)
            os.unlink(temporary)
        if not os.path.exists(target):
            os.close(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
            os.unlink(target)
    except OSError as err:
        raise refuse(_reason(err)) from err


@contextmanager
def replace_atomically(path: str, what: str) -> Iterator[str]:
    """Yield a temporary path beside ``path``; on success rename it over ``path``.

    The caller writes the whole file to the yielded path. If the block raises, the
    temporary is removed, ``path`` is left as it was, and an :class:`OSError` becomes an
    :class:`InputFileError` naming ``what``.
    """
    target = target_of(path)
    folder = os.path.dirname(os.path.abspath(target))
    suffix = os.path.splitext(target)[1]
    try:
        handle, temporary = tempfile.mkstemp(prefix=_TEMP_PREFIX, suffix=suffix, dir=folder)
    except OSError as err:
        raise InputFileError(f"cannot write {what} to {path!r}: {_reason(err)}") from err
    os.close(handle)
    try:
        yield temporary
        mode = os.stat(target).st_mode & 0o777 if os.path.exists(target) else _default_mode()
        os.chmod(temporary, mode)
        os.replace(temporary, target)
    except OSError as err:
        _remove(temporary)
        raise InputFileError(f"cannot write {what} to {path!r}: {_reason(err)}") from err
    except BaseException:
        _remove(temporary)
        raise


def _default_mode() -> int:
    """What ``open(path, "w")`` would give a new file: 0o666 less the umask."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def _reason(err: OSError) -> str:
    if err.errno == errno.ENAMETOOLONG:
        return "the file name is too long for its filesystem"
    return err.strerror or str(err)
