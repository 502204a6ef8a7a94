"""The thread rule (corekit.device.cpu_threads): a run uses the cores that are free, never torch's default of all of
them, and the count a notebook prints is the count its run record keeps."""
import json
import multiprocessing
import os
import time

import pytest
import torch
from threadpoolctl import threadpool_info, threadpool_limits

from corekit import device


@pytest.fixture(autouse=True)
def _restore_threads(monkeypatch):
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    threads = torch.get_num_threads()
    with threadpool_limits(limits=None):                 # restores the BLAS limits on the way out
        yield
    torch.set_num_threads(threads)


def _spin(seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


def test_requested_count_is_kept_up_to_the_usable_cores():
    cores = len(device.usable_cores())
    assert device.cpu_threads(1) == 1
    assert device.cpu_threads(cores + 3) == cores


@pytest.mark.parametrize("free, expected", [(0.0, 1), (0.3, 1), (0.6, 1), (1.6, 2), (7.9, None)])
def test_automatic_count_is_the_free_cores_at_least_one(free, expected):
    cores = len(device.usable_cores())
    expected = cores if expected is None else min(expected, cores)
    assert device.cpu_threads(0, free=free) == expected


def test_one_thread_in_a_pytest_xdist_worker(monkeypatch):
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw1")
    assert device.cpu_threads(0, free=64.0) == 1 and device.cpu_threads(4) == 1


@pytest.mark.parametrize("bad", [-1, 1.5, "2", True, None])
def test_bad_counts_are_refused_by_name(bad):
    with pytest.raises(ValueError, match="cpu_threads must be an integer >= 0"):
        device.cpu_threads(bad)
    with pytest.raises(ValueError, match="threads must be a positive integer"):
        device.use_cpu_threads(0)


def test_free_cores_sees_busy_processes():
    """With one spinning process per usable core, fewer than half a core is free (whatever else the machine runs)."""
    cores = device.usable_cores()
    ctx = multiprocessing.get_context("fork")
    spinners = [ctx.Process(target=_spin, args=(3.0,)) for _ in cores]
    for proc in spinners:
        proc.start()
    try:
        time.sleep(0.3)
        busy_free = device.free_cores(0.5)
    finally:
        for proc in spinners:
            proc.join()
    assert busy_free < 0.5 * len(cores), busy_free
    assert 0.0 <= device.free_cores(0.05) <= len(cores) + 1e-9


def test_use_cpu_threads_limits_torch_and_blas():
    assert device.use_cpu_threads(1) == 1
    assert torch.get_num_threads() == 1
    assert all(pool["num_threads"] == 1 for pool in threadpool_info())


@pytest.mark.parametrize("requested", [1, 0])
def test_printed_count_is_the_recorded_count(requested, tmp_path, capsys, monkeypatch):
    """setup() prints the thread count it chose, and the metrics file records that count, twice."""
    from corekit.runs import claims, parameters
    from corekit.runs.session import setup
    monkeypatch.chdir(tmp_path)
    namespace = {"device": "cpu", "cpu_threads": requested}
    monkeypatch.setattr(claims, "captured_parameters", lambda notebook, ns: dict(ns))   # a probe with no .py
    monkeypatch.setattr(claims, "check_parameters", lambda notebook, values: None)
    monkeypatch.setattr(parameters, "check_namespace", lambda notebook, ns: dict(ns))
    cores = len(device.usable_cores())
    monkeypatch.setattr(device, "free_cores", lambda interval=0.2: float(cores))       # an idle machine
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    session = setup("00_thread_probe", namespace)
    chosen = torch.get_num_threads()
    assert chosen == (min(requested, cores) if requested else cores)
    assert f"computing on cpu with {chosen} CPU thread{'s' * (chosen != 1)}" in capsys.readouterr().out
    record = json.loads(session.claims.write(tmp_path / "probe.metrics.json").read_text())
    assert record["threads"] == chosen and record["environment"]["threads"] == chosen


if os.name != "posix":
    pytest.skip("the thread rule reads /proc/stat and sched_getaffinity", allow_module_level=True)
