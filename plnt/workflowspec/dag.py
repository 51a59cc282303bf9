"""The step graph: duplicate ids, unknown `needs`, cycles, and the order steps may run in.

Kept apart from the model so that the checks return *every* problem with its path at once
(a spec author fixes them in one pass), and so the runner can ask for ancestors without
re-deriving the graph.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from plnt.workflowspec import model


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a spec: where (a path like `steps[1].needs[0]`) and what."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


def step_path(index: int, step_id: str, field: str | None = None) -> str:
    """The path of a step (and optionally one of its fields), naming the step id."""
    base = f"steps[{index}](id={step_id})"
    return f"{base}.{field}" if field else base


def check_graph(
    steps: Sequence[model.AnyStep],
) -> list[Problem]:
    """Every duplicate id, unknown or self reference and cycle among `steps`."""
    problems: list[Problem] = []
    first_index: dict[str, int] = {}
    for index, step in enumerate(steps):
        if step.id in first_index:
            problems.append(
                Problem(
                    step_path(index, step.id, "id"),
                    f"duplicate step id {step.id!r} (first used by steps[{first_index[step.id]}])",
                )
            )
        else:
            first_index[step.id] = index
    for index, step in enumerate(steps):
        seen: set[str] = set()
        for position, need in enumerate(step.needs):
            path = step_path(index, step.id, f"needs[{position}]")
            if need == step.id:
                problems.append(Problem(path, f"step {step.id!r} cannot need itself"))
            elif need not in first_index:
                problems.append(Problem(path, f"unknown step {need!r}"))
            elif need in seen:
                problems.append(Problem(path, f"{need!r} is listed twice"))
            seen.add(need)
    if problems:
        return problems
    cycle = find_cycle(steps)
    if cycle:
        index = first_index[cycle[0]]
        problems.append(
            Problem(
                step_path(index, cycle[0], "needs"),
                "cycle: " + " -> ".join([*cycle, cycle[0]]),
            )
        )
    return problems


def find_cycle(
    steps: Sequence[model.AnyStep],
) -> list[str]:
    """One cycle as a list of step ids (each needs the next), or [] when the graph is a DAG."""
    needs = {step.id: list(step.needs) for step in steps}
    state: dict[str, int] = {}  # 1 = on the current path, 2 = finished
    path: list[str] = []

    def visit(node: str) -> list[str]:
        state[node] = 1
        path.append(node)
        for need in needs.get(node, []):
            if state.get(need) == 1:
                return path[path.index(need) :]
            if need not in state:
                found = visit(need)
                if found:
                    return found
        path.pop()
        state[node] = 2
        return []

    for step in steps:
        if step.id not in state:
            found = visit(step.id)
            if found:
                return found
    return []


def ancestors(
    steps: Sequence[model.AnyStep],
) -> dict[str, set[str]]:
    """For each step, every step that finishes before it starts (its transitive `needs`)."""
    needs = {step.id: list(step.needs) for step in steps}
    result: dict[str, set[str]] = {}

    def collect(node: str) -> set[str]:
        if node not in result:
            found: set[str] = set()
            for need in needs.get(node, []):
                found.add(need)
                found |= collect(need)
            result[node] = found
        return result[node]

    for step in steps:
        collect(step.id)
    return result
