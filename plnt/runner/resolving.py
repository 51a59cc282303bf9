"""What a step asks for: its templates rendered over what it sees, into the request the step
cache keys and the call sends.

A model step resolves to its model, its messages (chat) or prompt (`mode: completion`) and
its sampling options — with `stop` and `seed` only when set, so the cache keys of steps
that set neither stay as they were; an http step to its method, URL, headers and body; a
workflow step to the called digest and its inputs (`plnt.runner.subworkflows`); a
transform to its value. Which model a step calls, and which step's text may stream as the
workflow's answer, are decided here too, once per workflow. No I/O here.
"""

from __future__ import annotations

import re
from typing import Any

from plnt.runner import settings, subworkflows
from plnt.workflowspec import model, templating

_OUTPUT_OF_STEP = re.compile(r"^\s*steps\.([A-Za-z_][A-Za-z0-9_]*)\.output\s*$")


def model_for(step: model.ModelStep, config: settings.BackendConfig) -> str | None:
    """The model a step calls: its own, else the backend's, else `echo` on the echo backend."""
    if step.model:
        return step.model
    if config.model:
        return config.model
    return "echo" if config.type == "echo" else None


def require_models(workflow: model.Workflow, config: settings.BackendConfig) -> None:
    """Raise `BackendConfigError` when a model step would have no model to call."""
    missing = [
        step.id
        for step in workflow.steps
        if isinstance(step, model.ModelStep) and model_for(step, config) is None
    ]
    if missing:
        raise settings.BackendConfigError(
            f"steps {missing} name no model and the backend configures none (set `model`)"
        )


def output_step(workflow: model.Workflow) -> str | None:
    """The model step whose output is the workflow's output, if there is one whose text
    can stream: not a tool loop (its turns are not the answer), not structured output (the
    output is parsed JSON, not the text), not a map (the output is a list)."""
    match = _OUTPUT_OF_STEP.match(workflow.output)
    if match is None:
        return None
    step = next((s for s in workflow.steps if s.id == match.group(1)), None)
    if not isinstance(step, model.ModelStep):
        return None
    if step.tools or step.response_format is not None or step.for_each is not None:
        return None
    return step.id


def resolve(
    step: model.AnyStep,
    templates: templating.StepTemplates,
    context: dict[str, Any],
    *,
    config: settings.BackendConfig,
) -> dict[str, Any]:
    """The step's request over `context`; `templating.RenderError` when a template fails."""
    if isinstance(step, model.ModelStep):
        resolved: dict[str, Any] = {"model": model_for(step, config)}
        if templates.prompt is not None:  # a completion step: the text to continue
            resolved["prompt"] = templates.prompt.render(context)
        else:
            resolved["messages"] = [
                {"role": role, "content": template.render(context)}
                for role, template in templates.messages
            ]
        resolved |= {"temperature": step.temperature, "max_tokens": step.max_tokens}
        # Only when set, so the cache keys of steps that set neither stay as they were.
        resolved |= {
            key: value
            for key, value in (("stop", step.stop), ("seed", step.seed))
            if value is not None
        }
        return resolved
    if isinstance(step, model.HttpStep):
        assert templates.url is not None
        return {
            "method": step.method,
            "url": templates.url.render(context),
            "headers": {name: t.render(context) for name, t in templates.headers.items()},
            "body": templates.body.render(context) if templates.body else None,
        }
    if isinstance(step, model.WorkflowStep):
        return subworkflows.resolve(step, templates, context)
    if templates.template is not None:
        return {"value": templates.template.render(context)}
    assert templates.expression is not None
    return {"value": templates.expression.evaluate(context)}


def options(resolved: dict[str, Any]) -> dict[str, Any]:
    """The sampling options of a resolved model step, as the backend requests take them."""
    return {
        "model": resolved["model"],
        "temperature": resolved["temperature"],
        "max_tokens": resolved["max_tokens"],
        "stop": resolved.get("stop"),
        "seed": resolved.get("seed"),
    }
