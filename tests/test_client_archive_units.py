"""rewardbox.archive: the client's repository archives, checked against the server's own reading of them."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

from rewardbox.archive import directory_files, repo_archive
from service.repos.archive import ArchiveLimits, normalize

FILES = {"pkg/mod.py": b"def f():\n    return 1\n", "tests/test_mod.py": b"from pkg.mod import f\n", "README": b""}


def test_same_files_same_bytes_and_so_the_same_repo_id() -> None:
    reordered = dict(reversed(list(FILES.items())))
    assert repo_archive(FILES) == repo_archive(reordered)
    assert normalize(repo_archive(FILES), ArchiveLimits()).id == normalize(repo_archive(reordered), ArchiveLimits()).id
    assert repo_archive(FILES) != repo_archive({**FILES, "README": b"x"})


def test_the_server_reads_back_every_file_under_the_top_folder_stripped() -> None:
    got = normalize(repo_archive(FILES, top="myrepo"), ArchiveLimits())
    assert got.stripped == "myrepo"
    with tarfile.open(fileobj=io.BytesIO(got.data), mode="r:gz") as tar:
        files = {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}  # type: ignore[union-attr]
    assert files == FILES


def test_directory_files_reads_a_checkout_without_its_git_folder_or_caches(tmp_path: Path) -> None:
    for rel, data in {**FILES, ".git/HEAD": b"ref", "pkg/__pycache__/mod.pyc": b"\0"}.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes(data)
    (tmp_path / "link").symlink_to("pkg/mod.py")
    assert directory_files(tmp_path) == FILES
