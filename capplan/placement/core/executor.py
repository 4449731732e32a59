"""Executors: run one function over many items, locally or on Ray.

An :class:`Executor` has one method, ``map(fn, items)``, returning results in the order of
``items``. ``fn`` and the items must be picklable (a module-level function and plain data).
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from typing import Any, Protocol, TypeVar

from capplan.model.errors import InputError
from capplan.model.signals import signals_deferred

T = TypeVar("T")
R = TypeVar("R")


class Executor(Protocol):
    """Runs ``fn`` on every item; results come back in input order."""

    def map(self, fn: Callable[[T], R], items: Iterable[T]) -> Iterator[R]:
        """Apply ``fn`` to each item."""
        ...


class SerialExecutor:
    """Runs everything in this process, one item after the other (debugging, tiny sweeps)."""

    def map(self, fn: Callable[[T], R], items: Iterable[T]) -> Iterator[R]:
        """Apply ``fn`` to each item in turn."""
        return (fn(x) for x in items)


class LocalExecutor:
    """Local worker processes (:class:`concurrent.futures.ProcessPoolExecutor`).

    Parameters
    ----------
    jobs
        Worker processes (default: the number of CPUs).
    """

    def __init__(self, jobs: int | None = None) -> None:
        self.jobs = jobs or os.cpu_count() or 1

    def map(self, fn: Callable[[T], R], items: Iterable[T]) -> Iterator[R]:
        """Apply ``fn`` to the items in worker processes."""
        todo = list(items)
        if not todo:
            return iter(())
        pool = ProcessPoolExecutor(max_workers=min(self.jobs, len(todo)), initializer=_worker_signals)
        try:
            results = list(pool.map(fn, todo))
        except BaseException:  # Ctrl-C or SIGTERM in the parent: stop the workers now, not after their solves
            workers: dict[int, Any] = getattr(pool, "_processes", None) or {}  # no public way to stop them
            for proc in list(workers.values()):
                proc.terminate()
            pool.shutdown(wait=True, cancel_futures=True)
            raise
        with signals_deferred():  # Ctrl-C inside shutdown() left its manager thread blocked: a hang at exit
            pool.shutdown()
        return iter(results)


def _worker_signals() -> None:
    """Workers leave Ctrl-C to the parent, which stops them (a terminal sends SIGINT to the whole group),
    and end at once on SIGTERM (a forked worker inherits the parent's handlers)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


class RayExecutor:
    """Ray tasks (``pip install 'capplan[ray]'``).

    Connects to a running Ray instance when one is initialised (or ``address`` is given, e.g.
    ``auto``); otherwise starts a local one with ``jobs`` CPUs and shuts it down afterwards.
    """

    def __init__(self, jobs: int | None = None, address: str | None = None) -> None:
        try:
            import ray
        except ImportError:
            raise InputError(
                "--executor",
                "the ray executor needs Ray: pip install 'capplan[ray]' (or use --executor local)",
            ) from None
        self.ray: Any = ray
        self.jobs = jobs
        self.address = address

    def map(self, fn: Callable[[T], R], items: Iterable[T]) -> Iterator[R]:
        """Apply ``fn`` to the items as Ray tasks."""
        ray = self.ray
        todo = list(items)
        started = False
        if not ray.is_initialized():
            address = self.address or os.environ.get("RAY_ADDRESS")
            kw: dict[str, Any] = {"address": address} if address else {"num_cpus": self.jobs}
            ray.init(include_dashboard=False, log_to_driver=False, **kw)
            started = True
        try:
            remote = ray.remote(fn)
            refs = [remote.remote(x) for x in todo]
            return iter(ray.get(refs))
        finally:
            if started:
                ray.shutdown()


def make_executor(name: str, jobs: int | None = None) -> Executor:
    """``local`` (default), ``serial`` or ``ray``."""
    if name == "local":
        return LocalExecutor(jobs)
    if name == "serial":
        return SerialExecutor()
    if name == "ray":
        return RayExecutor(jobs)
    raise InputError("--executor", f"unknown executor {name!r}; choose local, serial or ray")
