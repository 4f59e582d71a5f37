"""The discrete-event core: a clock with an event heap, and CPUs shared by processor
sharing (every runnable job gets min(1, cores / runnable) of a core, as the kernel's
scheduler roughly gives it). Standard library only; deterministic: events at the same
time run in the order they were scheduled.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Any


class Sim:
    """A clock and the events still to come."""

    def __init__(self) -> None:
        self.now = 0.0
        self._heap: list[tuple[float, int, Callable[..., None], tuple[Any, ...]]] = []
        self._seq = 0
        self.events = 0

    def at(self, when: float, fn: Callable[..., None], *args: Any) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (max(when, self.now), self._seq, fn, args))

    def after(self, delay: float, fn: Callable[..., None], *args: Any) -> None:
        self.at(self.now + max(0.0, delay), fn, *args)

    def run(self, until: float = float("inf"), stop: Callable[[], bool] | None = None) -> None:
        while self._heap:
            when, _, fn, args = self._heap[0]
            if when > until:
                break
            heapq.heappop(self._heap)
            self.now = when
            self.events += 1
            fn(*args)
            if stop is not None and stop():
                break


class CPU:
    """`cores` cores shared by processor sharing among the jobs submitted, plus
    `background` jobs that never end (other users of a shared machine). Every job
    progresses at the same rate, so one counter of the service each job has had so far
    (`_served`) and a heap of the service at which each job ends suffice."""

    def __init__(self, sim: Sim, cores: float, background: float = 0.0) -> None:
        self.sim = sim
        self.cores = cores
        self.background = background
        self._heap: list[tuple[float, int, Callable[[], None]]] = []  # (service at which it ends, id, then)
        self._served = 0.0
        self._last = 0.0
        self._gen = 0
        self._next_id = 0
        self.busy = 0.0  # core-seconds of work done for submitted jobs
        self.background_busy = 0.0  # core-seconds the background jobs got

    def _rate(self) -> float:
        n = len(self._heap)
        return min(1.0, self.cores / (n + self.background)) if n else 0.0

    def _advance(self) -> None:
        dt = self.sim.now - self._last
        self._last = self.sim.now
        if dt <= 0:
            return
        if not self._heap:
            self.background_busy += dt * min(self.background, self.cores)
            return
        rate = self._rate()
        self._served += dt * rate
        self.busy += dt * rate * len(self._heap)
        self.background_busy += dt * rate * self.background

    def _reschedule(self) -> None:
        self._gen += 1
        if not self._heap:
            return
        self.sim.after(max(0.0, self._heap[0][0] - self._served) / self._rate(), self._tick, self._gen)

    def _tick(self, gen: int) -> None:
        if gen != self._gen:
            return
        self._advance()
        finished = []
        # a residue below 100 ns of work is done: at a clock of millions of seconds a
        # smaller step would not move the clock (float resolution) and never end the job
        while self._heap and self._heap[0][0] <= self._served + 1e-7:
            finished.append(heapq.heappop(self._heap)[2])
        self._reschedule()
        for then in finished:
            then()

    def settle(self) -> None:
        """Bring the accounts up to now (call at the end of a run)."""
        self._advance()

    def run(self, seconds: float, then: Callable[[], None]) -> None:
        """Do `seconds` of one core's work, then call `then`."""
        if seconds <= 0:
            self.sim.after(0.0, then)
            return
        self._advance()
        self._next_id += 1
        heapq.heappush(self._heap, (self._served + seconds, self._next_id, then))
        self._reschedule()
