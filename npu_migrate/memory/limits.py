"""What the snapshot loaders accept: the caps on a file's size and contents, and the error for a
file that is not a readable snapshot. Shared by the pickle loader and the msMemScope importer."""

from __future__ import annotations

# Caps: a snapshot beyond them is refused with a one-line message rather than analysed for
# minutes (the largest real dumps hold a few million events).
MAX_FILE_BYTES = 32 << 30
MAX_EVENTS = 20_000_000
MAX_SEGMENTS = 1_000_000
MAX_BLOCKS = 20_000_000
MAX_FRAMES = 1024  # frames kept per stack (innermost first)
MAX_TEXT = 1024  # characters kept per frame name or file name
MAX_ADDRESS = (1 << 63) - 1
MAX_SIZE = 1 << 50  # 1 PiB: any larger size or total is corrupt
MAX_TIME = 1 << 62


class SnapshotError(Exception):
    """A file that is not a readable snapshot; the message is one line naming the file."""
