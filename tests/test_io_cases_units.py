"""The host's side of cases jobs (graders/io_cases.py): how an item's stdins are cut into jobs and how a job's
reply becomes one Result per case. Pure: no sandbox."""

from __future__ import annotations

import importlib.util
import json
import os
import socket
from pathlib import Path

import pytest

from graders.io_cases import COMPILED_ONCE_PATH, PATH, case_results, chunks, path_of
from sandboxes import Result, Status
from sandboxes.connection import HEADER, StdinsFiles, raw_stdins, stdins_memfd


def test_the_stdins_of_an_item_fit_one_job_when_small() -> None:
    assert chunks(["a", "b", "c"]) == [["a", "b", "c"]]


def test_the_stdins_are_cut_in_order_at_the_input_cap() -> None:
    assert chunks(["aa", "bb", "c", "dddd", "e"], limit=4) == [["aa", "bb"], ["c"], ["dddd"], ["e"]]


def test_a_stdin_over_the_cap_goes_alone_and_is_never_dropped() -> None:
    assert chunks(["x" * 10, "y"], limit=4) == [["x" * 10], ["y"]]


def test_the_cap_counts_encoded_bytes_not_characters() -> None:
    assert chunks(["éé", "é"], limit=4) == [["éé"], ["é"]]


def test_each_case_record_becomes_its_own_result() -> None:
    job = Result.from_wire({"status": "ok", "cases": [{"status": "ok", "stdout": "1\n", "cpu_ms": 2.0},
                                                      {"status": "timeout", "cpu_ms": 1000.0}]})
    job.sandbox_id = "sb"
    cases = case_results(job, 2)
    assert [(c.status, c.stdout, c.cpu_ms, c.sandbox_id) for c in cases] == [
        (Status.OK, "1\n", 2.0, "sb"), (Status.TIMEOUT, "", 1000.0, "sb")]


def test_a_job_that_ran_no_case_gives_its_own_result_to_every_case() -> None:
    fault = Result.infra("sandbox x failed during the job")
    assert case_results(fault, 3) == [fault] * 3


def test_the_io_path_is_compiled_once_only_when_every_job_of_the_item_said_so() -> None:
    once = Result.from_wire({"status": "ok", "timings": {"compiled_once": 1, "compile_cpu_ms": 0.2}})
    each = Result.from_wire({"status": "ok", "timings": {"compiled_once": 0}})
    assert path_of([once, once]) == COMPILED_ONCE_PATH
    assert path_of([once, each]) == PATH
    assert path_of([Result.infra("gone")]) == PATH
    assert path_of([]) == PATH


def inside(name: str):
    """A module of sandboxes/inside as the sandbox loads it (runner.py puts its own directory on sys.path)."""
    folder = Path(__file__).resolve().parent.parent / "sandboxes" / "inside"
    loaded = []
    for module in ("runner", name):
        spec = importlib.util.spec_from_file_location(f"rewardbox_inside_{module}", folder / f"{module}.py")
        assert spec is not None and spec.loader is not None
        loaded.append(importlib.util.module_from_spec(spec))
        spec.loader.exec_module(loaded[-1])
    return loaded[-1]


def test_only_a_python_program_run_as_main_is_compiled_once() -> None:
    compiled_once = inside("cases")._compiled_once
    assert compiled_once({"code": "print(1)", "filename": "solution.py"})
    assert not compiled_once({"argv": ["./main"]})
    assert not compiled_once({"code": "x", "host": True})  # our own in-sandbox programs keep their path
    assert not compiled_once({"code": "x", "lint": True})
    assert not compiled_once({"code": None})


def sent_and_read(message: dict) -> object:
    """message through the host's framing (raw_stdins: the stdins in a memfd sent with the frame) and the runner's
    reading (wire.read_request)."""
    wire = inside("wire")
    message, fd = raw_stdins(message, StdinsFiles())
    data = json.dumps(message).encode()
    a, b = socket.socketpair()
    with a, b:
        socket.send_fds(a, [HEADER.pack(len(data)) + data], [fd] if fd is not None else [])
        if fd is not None:
            os.close(fd)
        return wire.read_request(b)


def test_a_cases_jobs_stdins_travel_as_raw_bytes_and_arrive_whole_and_in_order() -> None:
    stdins = ["1 2\n", "", "héllo\n" * 1000, "\x00\x01"]
    message, fd = raw_stdins({"op": "cases", "job": {"program": {"code": "x"}, "stdins": stdins}}, StdinsFiles())
    assert fd is not None and "stdins" not in json.dumps(message)
    assert os.pread(fd, 1 << 20, 0) == "".join(stdins).encode()
    os.close(fd)
    got = sent_and_read({"op": "cases", "job": {"program": {"code": "x"}, "stdins": stdins}})
    assert [bytes(s) for s in got["job"]["stdins"]] == [s.encode() for s in stdins]  # type: ignore[index]


def test_the_samples_of_a_group_share_one_memfd_of_their_stdins_and_nothing_else_does() -> None:
    files = StdinsFiles(max_bytes=1 << 20)
    group = ["a" * 1000 + str(i) for i in range(5)]  # the very strings every sample of the group carries
    first, sizes = files.get(group)  # type: ignore[misc]
    again, _ = files.get(list(group))  # type: ignore[misc]
    equal_copy, _ = files.get([s[:500] + s[500:] for s in group])  # equal strings, other objects: not shared
    first_ino = os.fstat(first).st_ino
    try:
        assert first_ino == os.fstat(again).st_ino != os.fstat(equal_copy).st_ino
        assert sizes == [1001] * 5 and os.pread(again, 1 << 20, 0) == "".join(group).encode()
    finally:
        for fd in (first, again, equal_copy):
            os.close(fd)  # the caller's descriptors: the remembered memfd stays open
    kept, _ = files.get(group)  # type: ignore[misc]
    os.close(kept)
    for i in range(300):  # 1 MB of other stdins: the group's memfd is forgotten (and closed), never overflowed
        fd, _ = files.get(["x" * 5000 + str(i)])  # type: ignore[misc]
        os.close(fd)
    assert files._bytes <= files.max_bytes
    fresh, _ = files.get(group)  # type: ignore[misc]
    assert os.fstat(fresh).st_ino != first_ino  # written anew
    os.close(fresh)
    assert files.get(["", ""]) is None and files.get(["\ud800"]) is None


def test_the_stdins_memfd_holds_every_part_in_order_however_many() -> None:
    parts = [str(i).encode() * (i % 7) for i in range(3000)]  # more parts than one writev takes
    fd = stdins_memfd(parts)
    try:
        assert os.pread(fd, 1 << 20, 0) == b"".join(parts)
        with pytest.raises(OSError):  # sealed
            os.write(fd, b"x")
    finally:
        os.close(fd)


def test_other_messages_and_stdins_that_are_not_text_go_as_json() -> None:
    for message in ({"op": "run", "job": {"stdin": "x"}}, {"op": "health"},
                    {"op": "cases", "job": {"stdins": ["\ud800"]}}, {"op": "cases", "job": {"stdins": ["", ""]}}):
        assert raw_stdins(message, StdinsFiles()) == (message, None)
        assert sent_and_read(message) == message


def test_a_blob_whose_parts_do_not_add_up_or_that_comes_without_its_memfd_is_refused() -> None:
    wire = inside("wire")
    data = json.dumps({"op": "cases", "blob": 4, "job": {"stdin_sizes": [1, 2]}}).encode()
    for fds in ([stdins_memfd([b"abcd"])], []):
        a, b = socket.socketpair()
        with a, b:
            socket.send_fds(a, [HEADER.pack(len(data)) + data], fds)
            with pytest.raises(ValueError):
                wire.read_request(b)
        for fd in fds:
            os.close(fd)
