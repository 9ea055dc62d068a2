"""Reading and writing source files without losing anything: PEP 263 encoding, BOM, newline
style, permissions and owner are kept; writes are atomic (temp file in the same folder +
rename) and conditional (compare-and-swap: a file is replaced only if it still holds the
exact bytes that were migrated); only regular files are ever read or written.

Temp files live in a folder `.npu-migrate-tmp-<pid>-<8 random characters>` beside the target,
holding a `.gitignore` of `*`: git never shows one, even when a run is killed mid-write, and the
next run removes such folders whose process is gone, if they hold only what a run puts there.
"""

from __future__ import annotations

import codecs
import hashlib
import io
import os
import re
import shutil
import stat
import tempfile
import tokenize
from collections.abc import Iterable
from dataclasses import dataclass

TEMP_PREFIX = ".npu-migrate-tmp-"
# `tempfile.mkdtemp(prefix=f"{TEMP_PREFIX}{pid}-")`: the prefix, the pid, 8 characters of its alphabet
_TEMP_NAME = re.compile(re.escape(TEMP_PREFIX) + r"([0-9]+)-[a-z0-9_]{8}")
_GITIGNORE, _NEW = ".gitignore", "new"  # what a temp folder holds
_MARKER = "# npu-migrate temp folder, removed after the write\n*\n"
_READ_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


class SourceError(Exception):
    """A file that cannot be read as Python source; the message names the file."""


@dataclass(frozen=True)
class SourceText:
    text: str
    encoding: str
    bom: bool

    def encode(self, text: str) -> bytes:
        data = text.encode(self.encoding)
        return codecs.BOM_UTF8 + data if self.bom else data


def decode_source(data: bytes, path: str) -> SourceText:
    bom = data.startswith(codecs.BOM_UTF8)
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as exc:
        raise SourceError(f"{path}:1:1: cannot decode: {exc}") from None
    if bom:
        data = data[len(codecs.BOM_UTF8):]
        encoding = "utf-8"
    elif encoding == "utf-8-sig":
        encoding = "utf-8"
    try:
        # newline='' semantics: keep \r\n and \r exactly as they are
        text = data.decode(encoding)
    except (UnicodeDecodeError, LookupError) as exc:
        raise SourceError(f"{path}:1:1: cannot decode as {encoding}: {exc}") from None
    return SourceText(text, encoding, bom)


class Skipped(Exception):
    """Not a regular file (a symbolic link, FIFO, device, socket): left alone, with a note."""


def source_digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def read_regular(path: str) -> bytes:
    """The bytes of `path` if it is a regular file. Raises `Skipped` for anything else (a FIFO
    is opened non-blocking and never read, so it cannot hang the run) and OSError. Symbolic
    links are skipped, not followed: writing through one would replace the link by a copy,
    and its target is migrated where it is found."""
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode):
        raise Skipped(f"{path}: skipped: a symbolic link (to {os.readlink(path)}); links are "
                      "never replaced: migrate the file it points to")
    if not stat.S_ISREG(info.st_mode):
        raise Skipped(f"{path}: skipped: not a regular file ({_kind(info.st_mode)})")
    fd = os.open(path, _READ_FLAGS)
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):  # swapped since the lstat
            raise Skipped(f"{path}: skipped: not a regular file")
        return handle.read()


def open_regular(path: str) -> io.BufferedReader:
    """`path` opened for reading if it is a regular file, a symbolic link followed: for a file the
    user names to a reader (`npu-migrate memory FILE`), where following a link is harmless. A
    FIFO, a device or a socket raises `Skipped` at once (opened non-blocking and never read: a
    blocking open of a FIFO waits for a writer forever); OSError as `open` raises it."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise Skipped(f"{path}: not a regular file ({_kind(mode)})")
        os.set_blocking(fd, True)  # a regular file: ordinary reads from here on
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISDIR, "a folder")):
        if test(mode):
            return name
    return "a special file"


def read_source(path: str) -> SourceText:
    try:
        data = read_regular(path)
    except Skipped as exc:
        raise SourceError(str(exc)) from None
    except OSError as exc:
        raise SourceError(f"{path}:0:0: cannot read: {exc.strerror}") from None
    return decode_source(data, path)


def write_if_unchanged(path: str, data: bytes, expected: str | None, keep_read_only: bool = True) -> str | None:
    """Replace the regular file `path` by `data`, atomically, if it still holds the bytes whose
    `source_digest` is `expected` (None: whatever it holds). Mode, owner and group are kept.
    A file without its owner's write permission is left as it is when `keep_read_only` (a
    source: see `read_only`; a migrated copy of one is ours to write). Returns None when
    written, else one line saying why the file was left as it is; never raises OSError (a
    read-only folder or a full disk costs that one file)."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return f"{path}:0:0: deleted during the run; not re-created"
    except OSError as exc:
        return f"{path}:0:0: cannot write: {exc.strerror}; left as it is"
    if not stat.S_ISREG(info.st_mode):
        return f"{path}:0:0: no longer a regular file; left as it is"
    if keep_read_only and read_only(info.st_mode):
        return (f"{path}:0:0: read-only (mode {stat.S_IMODE(info.st_mode):o}); left as it is "
                "(`chmod u+w` it to migrate it, or use --output-dir)")
    if info.st_uid != os.geteuid() and os.geteuid() != 0:
        return (f"{path}:0:0: owned by another user (uid {info.st_uid}); a rewrite would change "
                "its owner: left as it is (run as its owner)")
    try:
        scratch = _scratch_dir(os.path.dirname(os.path.abspath(path)))
    except OSError as exc:
        return f"{path}:0:0: cannot write in its folder: {exc.strerror}; left as it is"
    try:
        temp = os.path.join(scratch, _NEW)
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o600)
        with os.fdopen(fd, "wb") as handle:
            write_all(handle, data)
            handle.flush()
            os.fsync(handle.fileno())
        if (info.st_uid, info.st_gid) != (os.geteuid(), os.getegid()):
            os.chown(temp, info.st_uid, info.st_gid)
        os.chmod(temp, stat.S_IMODE(info.st_mode))  # after chown, which clears set-id bits
        if expected is not None and _digest_now(path) != expected:
            return f"{path}:0:0: changed during the run; left as it is (run again to migrate it)"
        os.replace(temp, path)
    except FileNotFoundError:
        return f"{path}:0:0: deleted during the run; not re-created"
    except OSError as exc:
        return f"{path}:0:0: cannot write: {exc.strerror}; left as it is"
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return None


def read_only(mode: int) -> bool:
    """A file whose owner may not write it (`chmod a-w`): its owner asked for it to stay as it is.
    The atomic rename would replace it all the same (it needs only the folder's permission), and
    ruff or black, which open the file for writing, would fail on it: it is refused whoever runs
    the tool, root included, so the outcome does not depend on the account."""
    return not mode & stat.S_IWUSR


def write_all(handle: io.BufferedWriter, data: bytes) -> None:
    """The one place new content is written (tests inject faults here: a full disk)."""
    handle.write(data)


def _digest_now(path: str) -> str | None:
    try:
        return source_digest(read_regular(path))
    except FileNotFoundError:
        raise
    except (OSError, Skipped):
        return None


def _scratch_dir(directory: str) -> str:
    scratch = tempfile.mkdtemp(prefix=f"{TEMP_PREFIX}{os.getpid()}-", dir=directory)
    try:
        with open(os.path.join(scratch, _GITIGNORE), "w", encoding="utf-8") as handle:
            handle.write(_MARKER)
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    return scratch


def is_temp_name(name: str) -> bool:
    """Whether `name` is one `_scratch_dir` makes: the prefix, a process id, and `mkdtemp`'s eight
    random characters. Nothing looser: a user's `.npu-migrate-tmp-notes` is not ours."""
    return _TEMP_NAME.fullmatch(name) is not None


def remove_stale_temps(directories: Iterable[str]) -> int:
    """Remove the temp folders of runs that are gone (killed mid-write) from `directories`; a
    live run's folder is left. Only what a run made goes: a folder named exactly as
    `_scratch_dir` names them, whose process is gone, holding nothing but the run's marker
    `.gitignore` and its `new` file (or nothing, if the run died before writing them); anything
    else with a similar name is the user's and stays. Returns how many were removed."""
    removed = 0
    for directory in set(directories):
        try:
            names = os.listdir(directory or ".")
        except OSError:
            continue
        for name in names:
            match = _TEMP_NAME.fullmatch(name)
            path = os.path.join(directory, name)
            if match and not _alive(int(match.group(1))) and _made_by_a_run(path):
                try:
                    for entry in os.listdir(path):
                        os.unlink(os.path.join(path, entry))
                    os.rmdir(path)
                    removed += 1
                except OSError:
                    pass
    return removed


def _made_by_a_run(path: str) -> bool:
    try:
        if not stat.S_ISDIR(os.lstat(path).st_mode):
            return False
        entries = os.listdir(path)
        if not set(entries) <= {_GITIGNORE, _NEW}:
            return False
        if any(not stat.S_ISREG(os.lstat(os.path.join(path, e)).st_mode) for e in entries):
            return False
        if _GITIGNORE not in entries:
            return True  # killed between creating the folder and writing the marker
        with open(os.path.join(path, _GITIGNORE), encoding="utf-8") as handle:
            return handle.read(len(_MARKER) + 1) == _MARKER
    except (OSError, UnicodeDecodeError):
        return False


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's live process
    return True


def write_atomic(path: str, data: bytes) -> None:
    """Create or replace `path` with `data` in one rename, keeping its permission bits (a new
    file gets the umask's). An interrupt leaves either the old file or the new one, never half
    of either. Raises OSError; `write_if_unchanged` is the checked variant for sources."""
    directory = os.path.dirname(os.path.abspath(path))
    try:
        mode = os.stat(path).st_mode & 0o7777
    except FileNotFoundError:
        mode = 0o644 & ~_umask()
    scratch = _scratch_dir(directory)
    try:
        temp = os.path.join(scratch, _NEW)
        with open(temp, "xb") as handle:
            write_all(handle, data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temp, mode)
        os.replace(temp, path)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
