"""Compressed logs: ``.gz`` and ``.zst`` files read as their decompressed bytes.

Rotated logs are gzipped in the wild and trajectories are kept compressed, so
every reader (``scan``, ``eval``, ``watch``) opens a file through :func:`open_log`:
a plain file as it is, a compressed one through :class:`Decompressed`.  The
format is found from the decompressed content and from the name without the
compression suffix (:func:`plain_name`): ``run.traj.gz`` is a SWE-agent
trajectory, ``rollout.jsonl.zst`` a line log.

Decompression is bounded (:data:`MAX_DECOMPRESSED_BYTES`, and a bounded amount
of output per step), so a zip bomb costs its file a clear problem, never the
memory of the monitor.  A truncated or corrupt stream is not an exception
either: what was decompressed before the damage is read, and
:attr:`Decompressed.error` says, in one line, what was wrong.
"""

from __future__ import annotations

import gzip
import zlib
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from monitor.safeopen import open_input, open_regular_stream

if TYPE_CHECKING:
    import zstandard

#: Compression suffixes and the codec each names.
SUFFIXES = {".gz": "gzip", ".zst": "zstd"}
#: Largest decompressed size read from one compressed file; the rest is refused.
MAX_DECOMPRESSED_BYTES = 1 << 30
#: Decompressed bytes asked of gzip per step (its output is bounded by this).
_GZIP_STEP = 1 << 16
#: Compressed bytes fed to zstd per step.  zstd cannot bound one call's output,
#: but a block of at least 5 input bytes decompresses to at most 128 KiB, so
#: 2 KiB of input makes at most ~50 MiB, whatever the file claims.
_ZSTD_STEP = 2048


def _zstd_decompressor() -> zstandard.ZstdDecompressionObj:
    import zstandard  # imported when first needed: most logs are not .zst

    return zstandard.ZstdDecompressor().decompressobj()


def _zstd_errors(codec: str) -> tuple[type[Exception], ...]:
    if codec != "zstd":
        return ()
    import zstandard

    return (zstandard.ZstdError,)


#: How every damage reason begins (:func:`is_damage`).
_DAMAGE = tuple(f"{what} {codec} data" for what in ("truncated", "corrupt") for codec in ("gzip", "zstd")) + (
    "decompresses to more than",
)


def is_damage(reason: str) -> bool:
    """True for a problem that is a compressed file's damage, not its content's."""
    return reason.startswith(_DAMAGE)


def codec_of(path: str | Path) -> str | None:
    """``"gzip"`` or ``"zstd"`` when the name says the file is compressed, else None."""
    return SUFFIXES.get(Path(path).suffix.lower())


def plain_name(name: str) -> str:
    """``name`` without its compression suffix (``a.traj.gz`` → ``a.traj``)."""
    for suffix in SUFFIXES:
        if name.lower().endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)]
    return name


def plain_path(path: Path) -> Path:
    """``path`` as it would be named uncompressed (what formats are recognised by)."""
    return path.with_name(plain_name(path.name))


class Decompressed:
    """A compressed file read as a binary stream of its decompressed bytes.

    ``read`` never raises for bad data: it ends the stream and sets
    :attr:`error`.  ``size`` counts the decompressed bytes read so far."""

    def __init__(self, path: str | Path, limit: int | None = None, fileobj: BinaryIO | None = None):
        self.path = str(path)
        self.codec = codec_of(path) or "gzip"
        self.limit = MAX_DECOMPRESSED_BYTES if limit is None else limit
        self.size = 0
        self.error: str | None = None
        # OSError propagates: the caller reports it.  ``fileobj``: already open (it is closed here).
        self._raw: BinaryIO = fileobj if fileobj is not None else open_regular_stream(path, follow=True)
        self._gzip = gzip.GzipFile(fileobj=self._raw, mode="rb") if self.codec == "gzip" else None
        self._zstd = _zstd_decompressor() if self._gzip is None else None
        self._ended = False
        self._fed = False  # an empty .zst is an empty log, as an empty .gz is
        self._buffer = bytearray()

    def seekable(self) -> bool:
        return False

    def tell(self) -> int:
        """The compressed bytes read so far (what a progress bar over file sizes counts)."""
        return self._raw.tell()

    def read(self, size: int = -1) -> bytes:
        """Up to ``size`` decompressed bytes (all that is left for -1); b"" at the end."""
        while (size < 0 or len(self._buffer) < size) and not self._ended:
            self._fill()
        if size < 0:
            size = len(self._buffer)
        out = bytes(self._buffer[:size])
        del self._buffer[:size]
        return out

    def _fill(self) -> None:
        errors: tuple[type[Exception], ...] = (OSError, zlib.error, *_zstd_errors(self.codec))
        try:
            data = self._gzip.read1(_GZIP_STEP) if self._gzip is not None else self._zstd_step()
        except EOFError:
            self._fail(f"truncated {self.codec} data: the file ends inside its compressed stream")
            return
        except errors as exc:
            self._fail(f"corrupt {self.codec} data ({exc})")
            return
        if not data and self._gzip is not None:
            self._ended = True
            return
        if self.size + len(data) > self.limit:
            data = data[: self.limit - self.size]
            self._fail(
                f"decompresses to more than {self.limit:,} bytes (a zip bomb?): "
                f"the first {self.limit:,} were read, the rest refused"
            )
        self.size += len(data)
        self._buffer += data

    def _zstd_step(self) -> bytes:
        """The output of the next slice of compressed input."""
        assert self._zstd is not None
        raw = self._raw.read(_ZSTD_STEP)
        if not raw:
            if self._fed and not self._zstd.eof:
                self._fail("truncated zstd data: the file ends inside its compressed stream")
            self._ended = True
            return b""
        self._fed = True
        out = self._zstd.decompress(raw)
        while self._zstd.eof and self._zstd.unused_data:  # the next frame
            rest = self._zstd.unused_data
            self._zstd = _zstd_decompressor()
            out += self._zstd.decompress(rest)
        return out

    def _fail(self, reason: str) -> None:
        if self.error is None:
            self.error = reason
        self._ended = True

    def close(self) -> None:
        if self._gzip is not None:
            self._gzip.close()
        self._raw.close()

    def __enter__(self) -> Decompressed:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def open_log(path: str | Path, named: bool = True) -> BinaryIO | Decompressed:
    """``path`` opened for reading its (decompressed) bytes, as :func:`monitor.safeopen.open_input`
    opens it (``named``: the operator named it, so a link is followed and a pipe is theirs to give;
    a file found in a directory must be a regular file, opened without blocking)."""
    raw: BinaryIO = open_input(path, named=named)
    if codec_of(path) is not None:
        return Decompressed(path, fileobj=raw)
    return raw


def read_head(path: str | Path, size: int, named: bool = True) -> bytes:
    """The first ``size`` (decompressed) bytes of ``path``; OSError when it cannot be opened."""
    with open_log(path, named) as stream:
        return stream.read(size)


def read_all(path: str | Path, named: bool = True) -> tuple[bytes, str | None]:
    """The whole (decompressed) content of ``path`` and what was wrong with it, if anything."""
    with open_log(path, named) as stream:
        return stream.read(), getattr(stream, "error", None)
