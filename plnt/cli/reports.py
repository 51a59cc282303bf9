"""What a WorkflowRun's status says, as text: the reports of `status`, `timeline`, `history`.

`status_text` summarises (phase, promoted revision, replicas, conditions, saga
steps, the last quality gate's scores, recent events); `timeline_text` interleaves
saga steps and events in time order; `history_text` lists the promoted revisions
`rollback` can return to. Pure functions of the objects the client returned, so every
report is testable without a server.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from plnt.cli import printing, progress
from plnt.client import event_time

RECENT_EVENTS = 10


def history_text(run: Mapping[str, Any]) -> str | None:
    """The revision history as columns, the promoted revision marked `*`; None if empty.

    A `Signed By` column appears once any revision was verified against a signer (a run
    whose specs are unsigned shows the columns it always had)."""
    status = run.get("status") or {}
    current = status.get("revision")
    history = status.get("history") or []
    if not history:
        return None
    signed = any(r.get("signedBy") for r in history)
    rows = [
        [
            f"{r.get('revision')}{'*' if r.get('revision') == current else ''}",
            r.get("digest"),
            r.get("backend"),
            r.get("promotedAt"),
            r.get("reason"),
            *([r.get("signedBy") or "-"] if signed else []),
        ]
        for r in history
    ]
    header = ["Revision", "Digest", "Backend", "Promoted At", "Reason"]
    return printing.columns([*header, *(["Signed By"] if signed else [])], rows)


def _condition_rows(status: Mapping[str, Any]) -> list[list[Any]]:
    return [
        [
            c.get("type"),
            c.get("status"),
            c.get("reason"),
            printing.age(c.get("lastTransitionTime")),
            c.get("message"),
        ]
        for c in status.get("conditions") or []
    ]


def _step_rows(status: Mapping[str, Any]) -> list[list[Any]]:
    return [
        [
            f"{progress.SYMBOLS.get(str(s.get('state')), '?')} {s.get('name')}",
            s.get("state"),
            s.get("attempts", 0),
            printing.step_duration(s.get("startTime"), s.get("endTime")) or "-",
            s.get("message") or "",
        ]
        for s in status.get("saga") or []
    ]


def _event_rows(events: list[dict[str, Any]]) -> list[list[Any]]:
    return [
        [
            printing.age(event_time(e) or None),
            e.get("type"),
            e.get("reason"),
            e.get("message"),
        ]
        for e in events
    ]


def _indent(text: str) -> str:
    return "\n".join("  " + line for line in text.splitlines())


def _rate(value: Any) -> str:
    return f"{value:.2f}" if isinstance(value, int | float) else "-"


def evaluation_lines(record: Mapping[str, Any] | None) -> list[str]:
    """The last quality gate: its verdict, then each scorer's numbers against its limits
    beside the stable's, then each case's answers side by side ([] without one)."""
    if not record:
        return []
    verdict = "passed" if record.get("passed") else "failed"
    stable = record.get("stableRevision")
    beside = f" beside stable {stable}" if stable is not None else " (no stable)"
    lines = [f"Evaluation:  revision {record.get('revision')}{beside}: {verdict}"]
    rows = [
        [
            v.get("name"),
            v.get("type"),
            v.get("checks"),
            _rate(v.get("winRate") if v.get("type") == "judge" else v.get("canaryPassRate")),
            _rate(v.get("stablePassRate")),
            _limits(v),
            "ok" if v.get("passed") else "FAIL",
        ]
        for v in record.get("scorers") or []
    ]
    headers = ["Scorer", "Type", "Checks", "Canary", "Stable", "Limits", "Verdict"]
    lines.append(_indent(printing.columns(headers, rows)) if rows else "  <no scorers>")
    cases = [
        [
            c.get("name"),
            _answer(c.get("canary")),
            _answer(c.get("stable")) if c.get("stable") else "-",
        ]
        for c in record.get("cases") or []
    ]
    if cases:
        lines.append(_indent(printing.columns(["Case", "Canary", "Stable"], cases)))
    return lines


def _limits(verdict: Mapping[str, Any]) -> str:
    parts = []
    if verdict.get("minPassRate") is not None:
        parts.append(f"min {_rate(verdict['minPassRate'])}")
    if verdict.get("maxRegression") is not None:
        parts.append(
            f"regression {_rate(verdict.get('regression'))} <= {_rate(verdict['maxRegression'])}"
        )
    if verdict.get("minWinRate") is not None:
        parts.append(f"min win {_rate(verdict['minWinRate'])}")
    return ", ".join(parts) or "-"


def _answer(answer: Mapping[str, Any] | None) -> str:
    """One answer in a cell: ✓/✗ per scorer, then the output on one line, cut."""
    if not answer:
        return "-"
    marks = "".join("✓" if s.get("passed") else "✗" for s in answer.get("scores") or [])
    shown = answer.get("error") or answer.get("output")
    text = " ⏎ ".join(str(shown if shown is not None else "").splitlines())
    text = text if len(text) <= 40 else text[:39] + "…"
    return f"{marks} {text!r}".strip()


def slo_lines(objectives: Any, slo: Any) -> list[str]:
    """`plnt status`'s SLO section: each objective's measured value against it, attainment
    and budget left over the window, and the cost so far (nothing without spec.slo)."""
    if not isinstance(objectives, Mapping):
        return []
    if not isinstance(slo, Mapping):
        return ["SLO:         not measured yet (status.slo is written from live calls)"]
    budget = slo.get("errorBudgetRemaining")
    verdict = {True: "met", False: "MISSED", None: "nothing measured"}[slo.get("met")]
    head = f"SLO:         {verdict} over {slo.get('calls', 0)} calls in {slo.get('windowSeconds')}s"
    if isinstance(budget, int | float):
        head += f", error budget left {budget:.0%}"
    rows = []
    for judged in slo.get("objectives") or []:
        if not isinstance(judged, Mapping):
            continue
        percentile = judged.get("percentile")
        attained = judged.get("attainment")
        left = judged.get("budgetRemaining")
        rows.append(
            [
                judged.get("name"),
                f"p{percentile:g}" if isinstance(percentile, int | float) else "-",
                _figure(judged.get("measured")),
                _figure(judged.get("objective")),
                f"{attained:.1%}" if isinstance(attained, int | float) else "-",
                f"{left:.0%}" if isinstance(left, int | float) else "-",
                {True: "met", False: "MISSED"}.get(judged.get("met"), "-"),  # type: ignore[arg-type]
            ]
        )
    lines = [head]
    if rows:
        headers = ["Objective", "At", "Measured", "Objective", "Attained", "Budget", "Result"]
        lines.append(_indent(printing.columns(headers, rows)))
    cost = slo.get("cost")
    if isinstance(cost, Mapping):
        per_million = cost.get("perMillionTokens")
        lines.append(
            f"Cost:        {cost.get('amount')} {cost.get('currency')} over the window"
            f" ({cost.get('basis')}"
            + (f", {per_million} per million tokens)" if per_million is not None else ")")
        )
    return lines


def _figure(value: Any) -> str:
    if not isinstance(value, int | float):
        return "-"
    return f"{value:.4g}"


def status_text(run: Mapping[str, Any], events: list[dict[str, Any]]) -> str:
    """The `plnt status` report."""
    meta = run.get("metadata") or {}
    spec = run.get("spec") or {}
    st = run.get("status") or {}
    workflow = spec.get("workflow") or {}
    lines = [
        f"Name:        {meta.get('name')}",
        f"Namespace:   {meta.get('namespace')}",
        f"Workflow:    {workflow.get('ref')}@{printing.short_digest(workflow.get('digest'))}",
        f"Phase:       {st.get('phase') or 'Pending'}"
        f" (generation {meta.get('generation')}, observed {st.get('observedGeneration', '-')})",
    ]
    if st.get("revision") is not None:
        lines.append(
            f"Revision:    {st['revision']} ({printing.short_digest(st.get('digest'))})"
            f" on backend {st.get('backend') or '-'}"
        )
    lines.append(f"Replicas:    {st.get('readyReplicas', 0)}/{spec.get('replicas', 1)} ready")
    if st.get("endpoint"):
        lines.append(f"Endpoint:    {st['endpoint']}")
    for target in st.get("traffic") or []:
        lines.append(
            f"Traffic:     revision {target.get('revision')} {target.get('weight')}%"
            f" ({len(target.get('endpoints') or [])} endpoints)"
        )
    conditions = _condition_rows(st)
    lines.append("Conditions:")
    headers = ["Type", "Status", "Reason", "Age", "Message"]
    lines.append(_indent(printing.columns(headers, conditions)) if conditions else "  <none>")
    steps = _step_rows(st)
    lines.append("Saga:")
    headers = ["Step", "State", "Attempts", "Duration", "Message"]
    lines.append(_indent(printing.columns(headers, steps)) if steps else "  <none>")
    evaluation = evaluation_lines(st.get("lastEvaluation"))
    if evaluation:
        lines.extend(evaluation)
    lines.extend(slo_lines(spec.get("slo"), st.get("slo")))
    recent = events[-RECENT_EVENTS:]
    lines.append("Events:")
    headers = ["Age", "Type", "Reason", "Message"]
    lines.append(_indent(printing.columns(headers, _event_rows(recent))) if recent else "  <none>")
    return "\n".join(lines)


def timeline_text(run: Mapping[str, Any], events: list[dict[str, Any]]) -> str:
    """Saga steps and events merged into one list, oldest first."""
    entries: list[tuple[str, list[Any]]] = []
    for step in (run.get("status") or {}).get("saga") or []:
        state = str(step.get("state") or "Pending")
        attempts = int(step.get("attempts") or 0)
        detail = f"{state}, {attempts} attempt{'s' if attempts != 1 else ''}"
        duration = printing.step_duration(step.get("startTime"), step.get("endTime"))
        if duration:
            detail += f", {duration}"
        message = f"{detail}: {step['message']}" if step.get("message") else detail
        entries.append(
            (
                str(step.get("startTime") or "~"),
                [step.get("startTime") or "-", "step", step.get("name"), message],
            )
        )
    for event in events:
        stamp = event_time(event) or None
        entries.append(
            (
                stamp or "",
                [
                    stamp or "-",
                    f"event/{event.get('type')}",
                    event.get("reason"),
                    event.get("message"),
                ],
            )
        )
    entries.sort(key=lambda entry: entry[0])
    if not entries:
        return "No saga steps or events yet."
    return printing.columns(["Time", "Kind", "What", "Detail"], [row for _, row in entries])
