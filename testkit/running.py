"""Driving an engine's running set as a scheduler would, at random: sentences join between steps, some are dropped;
and recording which graphs an engine runs."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Any, TypeVar

import numpy as np

K = TypeVar("K", bound=Hashable)


def drive(
    running: Any,
    jobs: Sequence[tuple[K, Any, Any]],
    rng: np.random.Generator,
    watch: Callable[[], None] = lambda: None,
) -> tuple[dict[K, Any], set[K], int]:
    """Admit 1-3 of ``jobs`` (key, source, options) at a random 40 % of the steps (always when the set is empty), drop
    the set's first sentence at 5 % of them, step until every job is answered or dropped; ``watch`` runs after each
    step. Returns (translations by key, dropped keys, the widest the set was). No key is answered twice or after its
    drop."""
    results: dict[K, Any] = {}
    dropped: set[K] = set()
    widest = 0
    while jobs or running:
        if jobs and (not running or rng.random() < 0.4):
            take = int(rng.integers(1, 4))
            running.admit(jobs[:take])
            jobs = jobs[take:]
        if running.keys and rng.random() < 0.05:
            victim = running.keys[0]
            running.drop([victim])
            dropped.add(victim)
        for key, translation in running.step():
            assert key not in results and key not in dropped
            results[key] = translation
        widest = max(widest, len(running))
        watch()
    return results, dropped, widest


def graph_runs(engine: Any) -> list[str]:
    """The roles of the graphs ``engine`` runs from now on (``Engine.run_graph``), in order, as a list that grows."""
    roles: list[str] = []
    run = engine.run_graph

    def recorded(role: str, *args: Any, **kwargs: Any) -> Any:
        roles.append(role)
        return run(role, *args, **kwargs)

    engine.run_graph = recorded
    return roles
