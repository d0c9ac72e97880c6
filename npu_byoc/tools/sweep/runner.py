"""Where a sweep's tasks run: in this process, a local process pool, or Ray tasks.

A task is ``(kind, model, hw_fields)`` with kind ``"point"`` or ``"verify"``
(npu_byoc.tools.sweep.point.TASKS); each executor calls ``on_result(index, result)`` as results
arrive, in whatever order they finish — the caller stores and sorts them, so the results do
not depend on the executor. Every result carries the worker's code version: a Ray node with
another npu_byoc would give other numbers, and the sweep refuses them.
"""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import signal
from collections.abc import Callable, Sequence

from ...errors import NpuByocError
from .point import TASKS, ModelRef, materialize, model_bytes

Task = tuple[str, ModelRef, dict]
OnResult = Callable[[int, dict], None]


def run_task(kind: str, model: ModelRef, hw_fields: dict) -> tuple[str, dict]:
    """One task in this process: (code version, result)."""
    from .store import code_version

    return code_version(), TASKS[kind](model, hw_fields)


def _ray_task(kind: str, model: ModelRef, data: bytes, hw_fields: dict) -> tuple[str, dict]:
    return run_task(kind, materialize(model, data), hw_fields)


def run_serial(tasks: Sequence[Task], on_result: OnResult) -> None:
    for k, task in enumerate(tasks):
        on_result(k, run_task(*task)[1])


def run_pool(tasks: Sequence[Task], jobs: int, on_result: OnResult) -> None:
    """A pool of ``jobs`` processes (spawned: TVM's threads do not survive a fork)."""
    if jobs <= 1 or len(tasks) <= 1:
        return run_serial(tasks, on_result)
    ctx = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(min(jobs, len(tasks)), mp_context=ctx,
                                                initializer=_ignore_sigint) as pool:  # fmt: skip
        futures = {pool.submit(run_task, *task): k for k, task in enumerate(tasks)}
        try:
            for future in concurrent.futures.as_completed(futures):
                on_result(futures[future], future.result()[1])
        except BaseException:
            # Ctrl-C or a failed point: the workers stop now, not after their current point.
            for process in list((pool._processes or {}).values()):
                process.terminate()
            pool.shutdown(wait=False, cancel_futures=True)
            raise


def _ignore_sigint() -> None:
    """A worker leaves Ctrl-C to the parent (the terminal sends it to the whole process group):
    the parent stops the pool, and no worker prints a KeyboardInterrupt traceback."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


class PoolExecutor:
    """The local executor: this process (``jobs`` 1) or a pool of ``jobs`` processes."""

    def __init__(self, jobs: int = 1):
        self.jobs = jobs

    def run(self, tasks: Sequence[Task], on_result: OnResult) -> None:
        run_pool(tasks, self.jobs, on_result)

    def close(self) -> None:
        pass


class RayExecutor:
    """Ray tasks on the cluster at ``address`` (None: a local Ray instance of ``jobs`` CPUs),
    connected on first use and disconnected by ``close``. The model files travel as objects
    in Ray's store, so the nodes need npu_byoc, not the files."""

    def __init__(self, address: str | None = None, jobs: int = 1):
        self.address, self.jobs = address, jobs
        self.ray = None
        self.started = False

    def _connect(self):
        if self.ray is None:
            try:
                import ray
            except ImportError:
                raise NpuByocError("--ray needs Ray: pip install 'npu_byoc[ray]'") from None
            self.ray = ray
            if not ray.is_initialized():
                if self.address:
                    ray.init(address=self.address, log_to_driver=False)
                else:
                    ray.init(num_cpus=max(self.jobs, 1), include_dashboard=False, log_to_driver=False)
                self.started = True
        return self.ray

    def run(self, tasks: Sequence[Task], on_result: OnResult) -> None:
        from .store import code_version

        if not tasks:
            return
        ray = self._connect()
        remote = ray.remote(_ray_task)
        data = {}
        for _, model, _ in tasks:
            if model.sha256 not in data:
                data[model.sha256] = ray.put(model_bytes(model.path))
        refs = {remote.remote(kind, model, data[model.sha256], hw): k for k, (kind, model, hw) in enumerate(tasks)}
        pending = list(refs)
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            for ref in done:
                version, result = ray.get(ref)
                if version != code_version():
                    raise NpuByocError(f"a Ray worker runs npu_byoc code version {version}, this driver "
                                       f"{code_version()}: install the same npu_byoc on every node")  # fmt: skip
                on_result(refs[ref], result)

    def close(self) -> None:
        if self.started:
            self.ray.shutdown()
            self.started = False


__all__ = ["run_task", "run_serial", "run_pool", "PoolExecutor", "RayExecutor"]
