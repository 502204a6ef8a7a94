"""Where a run computes: the device (CUDA when present, the CPU otherwise, with a clear error for a missing GPU) and
how many CPU threads it uses (chosen from the cores that are free, never torch's default of every core)."""
from __future__ import annotations

import os
import time

import torch
from threadpoolctl import threadpool_limits


def default_device(requested: str | None = None) -> torch.device:
    """Return ``requested`` as a torch.device ("cpu", "cuda", "cuda:1", "auto"/None = best available)."""
    if requested in (None, "auto"):
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(requested)
    except (RuntimeError, TypeError) as err:
        raise ValueError(f"device must be 'auto', 'cpu', 'cuda' or 'cuda:N', got {requested!r}") from err
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"device {requested!r} was asked for but this machine has no CUDA GPU; "
                             "use device='cpu' or 'auto'")
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise ValueError(f"device {requested!r} does not exist: {torch.cuda.device_count()} GPU(s) present")
    return device


def usable_cores() -> list[int]:
    """Return the CPU cores this process may run on (``os.sched_getaffinity``; every core where it is unknown)."""
    if hasattr(os, "sched_getaffinity"):
        return sorted(os.sched_getaffinity(0))
    return list(range(os.cpu_count() or 1))


def _core_times(cores: list[int]) -> tuple[int, int] | None:
    """Return (busy, total) clock ticks summed over ``cores`` from /proc/stat, or None where it cannot be read."""
    try:
        lines = open("/proc/stat").read().splitlines()
    except OSError:
        return None
    busy = total = 0
    wanted = {f"cpu{c}" for c in cores}
    for line in lines:
        name, *ticks = line.split()
        if name in wanted:
            values = [int(t) for t in ticks[:8]]      # user nice system idle iowait irq softirq steal
            total += sum(values)
            busy += sum(values) - values[3] - values[4]
    return (busy, total) if total else None


def free_cores(interval: float = 0.2) -> float:
    """Return how many of the usable cores sat idle over the next ``interval`` seconds (/proc/stat; every usable
    core where /proc/stat cannot be read)."""
    cores = usable_cores()
    before = _core_times(cores)
    time.sleep(interval)
    after = _core_times(cores)
    if before is None or after is None or after[1] <= before[1]:
        return float(len(cores))
    busy = (after[0] - before[0]) / (after[1] - before[1])
    return len(cores) * (1.0 - busy)


def cpu_threads(requested: int = 0, free: float | None = None) -> int:
    """Return the CPU thread count a run uses: ``requested`` when above 0, at most the usable cores; with 0, the
    cores free now (``free``, measured by :func:`free_cores` when None), at least 1; always 1 in a pytest-xdist
    worker, whose siblings share the cores.

    torch's default, one thread per core whatever else runs, makes its threads wait on one another on a busy
    machine: a run then spends several times the CPU time of the same run on one thread.
    """
    if not isinstance(requested, int) or isinstance(requested, bool) or requested < 0:
        raise ValueError(f"cpu_threads must be an integer >= 0 (0: as many as cores are free), got {requested!r}")
    cores = len(usable_cores())
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return 1
    if requested:
        return min(requested, cores)
    free = free_cores() if free is None else free
    return max(1, min(cores, int(free + 0.5)))


def use_cpu_threads(threads: int) -> int:
    """Limit torch and the BLAS/OpenMP libraries numpy and scipy load to ``threads`` threads; return ``threads``."""
    if not isinstance(threads, int) or threads < 1:
        raise ValueError(f"threads must be a positive integer, got {threads!r}")
    torch.set_num_threads(threads)
    threadpool_limits(threads)
    return threads
