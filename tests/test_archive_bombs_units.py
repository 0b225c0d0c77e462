"""Archive bombs in the headers: every size an uploaded archive declares is bounded before tarfile reads it.

tarfile reads a pax or GNU extension header whole; a small upload declaring a huge one used to take the API
process to hundreds of MiB. Each flavour here must be refused with a 413 naming the header, at a peak memory of
about the upload's own size (tracemalloc, in the process that normalizes uploads).
"""

from __future__ import annotations

import io
import tarfile
import tracemalloc
import zlib
from collections.abc import Iterable

import pytest

from service.repos.archive import ArchiveLimits, BadArchive, normalize

DECLARED = 256 << 20  # what each bomb's header claims; the archive really holds ZEROS of it
ZEROS = 32 << 20  # compresses to ~32 KiB


def _block(name: str, kind: bytes, size: int) -> bytes:
    info = tarfile.TarInfo(name)
    info.type, info.size = kind, size
    return info.tobuf(tarfile.USTAR_FORMAT)


def _gz(parts: Iterable[bytes]) -> bytes:
    z = zlib.compressobj(6, zlib.DEFLATED, 31)
    out = [z.compress(p) for p in parts]
    return b"".join(out) + z.flush()


def _zeros(n: int) -> Iterable[bytes]:
    chunk = bytes(1 << 20)
    for _ in range(n >> 20):
        yield chunk


def _bomb(kind: bytes, first: bytes) -> bytes:
    """A header of `kind` declaring DECLARED bytes of content, `first` then zeros, then a file it would apply to."""
    def parts() -> Iterable[bytes]:
        yield _block("././@Header", kind, DECLARED)
        yield first
        yield from _zeros(ZEROS)
    return _gz(parts())


def _pax_record(key: str, value_len: int) -> bytes:
    body = f" {key}=".encode() + b"a" * 64
    return str(value_len).encode() + body


BOMBS = {
    "pax path": (_bomb(b"x", _pax_record("path", DECLARED)), "pax extended header"),
    "pax linkpath": (_bomb(b"x", _pax_record("linkpath", DECLARED)), "pax extended header"),
    "pax comment": (_bomb(b"x", _pax_record("comment", DECLARED)), "pax extended header"),
    "pax arbitrary record": (_bomb(b"x", _pax_record("VENDOR.anything", DECLARED)), "pax extended header"),
    "pax global": (_bomb(b"g", _pax_record("comment", DECLARED)), "pax global header"),
    "gnu long name": (_bomb(b"L", b"a" * 512), "GNU long name"),
    "gnu long link": (_bomb(b"K", b"a" * 512), "GNU long link name"),
    "solaris pax": (_bomb(b"X", _pax_record("path", DECLARED)), "pax extended header (Solaris)"),
}


def _many_small_headers() -> bytes:
    """A chain of small global pax headers: each is tiny, but tarfile follows them all inside one next()."""
    record = b"20 comment=aaaaaaaa\n"
    block = _block("././@PaxHeader", b"g", len(record)) + record.ljust(512, b"\0")
    return _gz([block * 5000, _block("f.txt", b"0", 0), bytes(1024)])


def _sparse() -> bytes:
    """A GNU sparse member ('S') whose map continues over many extension blocks, then a pax sparse 1.0 one."""
    info = tarfile.TarInfo("s.bin")
    info.type, info.size = tarfile.GNUTYPE_SPARSE, 0
    header = bytearray(info.tobuf(tarfile.GNU_FORMAT))
    header[482] = 1  # isextended: another sparse block follows
    header[148:156] = b" " * 8  # the checksum, recomputed over the changed block
    header[148:156] = b"%06o\0 " % sum(header)
    ext = bytearray(512)
    ext[504] = 1  # every extension block says one more follows
    return _gz([bytes(header), bytes(ext) * 20000, bytes(1024)])


def _measured(upload: bytes, limits: ArchiveLimits) -> tuple[BadArchive, int]:
    tracemalloc.start()
    try:
        with pytest.raises(BadArchive) as refused:
            normalize(upload, limits)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return refused.value, peak


@pytest.mark.parametrize("flavour", sorted(BOMBS))
def test_a_huge_extension_header_is_refused_naming_it_before_it_is_read(flavour: str) -> None:
    upload, named = BOMBS[flavour]
    refused, peak = _measured(upload, ArchiveLimits())
    assert refused.status == 413
    assert f"a {named} asks for " in str(refused)
    assert peak < 4 * len(upload) + (2 << 20), f"{flavour}: peak {peak} bytes for a {len(upload)}-byte upload"


def test_a_long_chain_of_small_headers_is_refused_at_the_same_bound() -> None:
    upload = _many_small_headers()
    refused, peak = _measured(upload, ArchiveLimits())
    assert refused.status == 413 and "pax global header" in str(refused)
    assert peak < 4 * len(upload) + (2 << 20)


def test_a_sparse_map_that_never_ends_is_refused_at_the_same_bound() -> None:
    refused, peak = _measured(_sparse(), ArchiveLimits())
    assert refused.status == 413 and "GNU sparse header" in str(refused)
    assert peak < 4 << 20


def test_a_small_sparse_member_is_refused_as_unsupported() -> None:
    info = tarfile.TarInfo("s.bin")
    info.type, info.size = tarfile.GNUTYPE_SPARSE, 0
    upload = _gz([info.tobuf(tarfile.GNU_FORMAT), bytes(1024)])
    with pytest.raises(BadArchive, match="sparse"):
        normalize(upload, ArchiveLimits())


def test_honest_long_names_and_pax_headers_still_load() -> None:
    deep = "/".join(["d" * 200] * 30) + "/f.py"
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz", format=tarfile.PAX_FORMAT) as tar:
        info = tarfile.TarInfo(deep)
        info.size, info.pax_headers = 2, {"comment": "x" * 1000}
        tar.addfile(info, io.BytesIO(b"1\n"))
    with tarfile.open(fileobj=(gnu := io.BytesIO()), mode="w:gz", format=tarfile.GNU_FORMAT) as tar:
        info = tarfile.TarInfo(deep)
        info.size = 2
        tar.addfile(info, io.BytesIO(b"2\n"))
    assert normalize(out.getvalue(), ArchiveLimits()).unpacked_bytes == 2
    assert normalize(gnu.getvalue(), ArchiveLimits()).unpacked_bytes == 2


def test_an_upload_at_the_limit_of_zeros_is_refused_by_the_stream_bound() -> None:
    limits = ArchiveLimits(unpacked_bytes=1 << 20, files=4)
    info = tarfile.TarInfo("dir")
    info.type, info.size = tarfile.DIRTYPE, 0
    upload = _gz([info.tobuf(tarfile.USTAR_FORMAT), *_zeros(8 << 20)])  # zeros end the archive: nothing more read
    assert normalize(upload, limits).files == 1
