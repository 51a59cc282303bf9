"""Sandboxed templates for spec fields: compiled once at load, rendered per invocation.

Spec authors are not trusted with the runner's process, so every template goes through
jinja2's `ImmutableSandboxedEnvironment`: no attribute starting with `_`, no mutation of
the values it is given, no Python internals. Undefined names fail loudly (`StrictUndefined`)
instead of rendering as empty strings. Templates see two names: `inputs` (the validated
inputs) and `steps` (`steps.<id>.output` for every step the current one transitively needs).

Compilation also checks, at load time, what a template refers to: unknown top-level names,
steps outside the step's `needs`, and underscore attributes are spec errors, so a bad
template never reaches an invocation.

Errors: `RenderError` (a template failed while rendering, e.g. an input the schema left
optional was absent, or an expression produced an undefined value).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, cast

import jinja2
from jinja2 import meta, nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment

from plnt.workflowspec import dag, model

CONTEXT_NAMES = frozenset({"inputs", "steps"})


class RenderError(Exception):
    """A template failed while rendering; the message says which and why."""


def _tojson(value: Any, indent: int | None = None) -> str:
    # jinja2's own tojson HTML-escapes <, >, & and ' — wrong for prompts and JSON bodies.
    return json.dumps(value, indent=indent, sort_keys=True, ensure_ascii=False)


def make_environment() -> ImmutableSandboxedEnvironment:
    """The one environment every spec template is compiled in."""
    env = ImmutableSandboxedEnvironment(
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
    )
    env.filters["tojson"] = _tojson
    return env


@dataclass(frozen=True)
class Template:
    """A compiled string template."""

    source: str
    compiled: jinja2.Template

    def render(self, context: Mapping[str, Any]) -> str:
        """Render over `context`; any failure becomes `RenderError`."""
        try:
            return self.compiled.render(context)
        except jinja2.TemplateError as error:
            raise RenderError(f"{type(error).__name__}: {error}") from error


@dataclass(frozen=True)
class Expression:
    """A compiled expression evaluating to any value."""

    source: str
    compiled: jinja2.environment.TemplateExpression

    def evaluate(self, context: Mapping[str, Any]) -> Any:
        """Evaluate over `context`; an undefined result or a failure becomes `RenderError`."""
        try:
            value = self.compiled(**context)
            if isinstance(value, jinja2.Undefined):
                value._fail_with_undefined_error()
        except jinja2.TemplateError as error:
            raise RenderError(f"{type(error).__name__}: {error}") from error
        return value


@dataclass(frozen=True)
class StepTemplates:
    """The compiled templates of one step (which fields are set depends on its kind)."""

    messages: list[tuple[str, Template]] = field(default_factory=list)
    prompt: Template | None = None
    """A completion step's prompt (chat steps render `messages`, their prompt included)."""
    url: Template | None = None
    headers: dict[str, Template] = field(default_factory=dict)
    body: Template | None = None
    template: Template | None = None
    expression: Expression | None = None


@dataclass(frozen=True)
class CompiledWorkflow:
    """Every template of a workflow, compiled, plus each step's ancestors."""

    steps: dict[str, StepTemplates]
    output: Expression
    ancestors: dict[str, set[str]]


class _Compiler:
    def __init__(self, workflow: model.Workflow) -> None:
        self.env = make_environment()
        self.problems: list[dag.Problem] = []
        self.ancestors = dag.ancestors(workflow.steps)
        self.step_ids = {step.id for step in workflow.steps}

    def template(self, source: str, *, path: str, visible: set[str]) -> Template | None:
        try:
            ast = self.env.parse(source)
            self._check_references(ast, path=path, visible=visible)
            return Template(source, self.env.from_string(ast))
        except jinja2.TemplateSyntaxError as error:
            self.problems.append(dag.Problem(path, f"template syntax error: {error.message}"))
            return None

    def expression(self, source: str, *, path: str, visible: set[str]) -> Expression | None:
        try:
            # Parse the expression the way compile_expression does, to inspect it first.
            ast = self.env.parse("{{ (" + source + ") }}")
            self._check_references(ast, path=path, visible=visible)
            compiled = self.env.compile_expression(source, undefined_to_none=False)
            return Expression(source, compiled)
        except jinja2.TemplateSyntaxError as error:
            self.problems.append(dag.Problem(path, f"expression syntax error: {error.message}"))
            return None

    def _check_references(self, ast: nodes.Template, *, path: str, visible: set[str]) -> None:
        allowed = CONTEXT_NAMES | set(self.env.globals)
        for name in sorted(meta.find_undeclared_variables(ast) - allowed):
            self.problems.append(
                dag.Problem(path, f"unknown name {name!r} (templates see `inputs` and `steps`)")
            )
        for found in ast.find_all((nodes.Getattr, nodes.Getitem)):
            node = cast(nodes.Getattr | nodes.Getitem, found)
            attr = _static_attribute(node)
            if attr is not None and attr.startswith("_"):
                self.problems.append(
                    dag.Problem(path, f"access to {attr!r} is refused by the sandbox")
                )
            inner = node.node
            if isinstance(inner, nodes.Name) and inner.name == "steps" and attr is not None:
                if attr not in self.step_ids:
                    self.problems.append(dag.Problem(path, f"unknown step {attr!r}"))
                elif attr not in visible:
                    self.problems.append(
                        dag.Problem(
                            path,
                            f"step {attr!r} is not in this step's `needs` (direct or indirect)",
                        )
                    )


def _static_attribute(node: nodes.Getattr | nodes.Getitem) -> str | None:
    if isinstance(node, nodes.Getattr):
        return node.attr
    if isinstance(node.arg, nodes.Const) and isinstance(node.arg.value, str):
        return node.arg.value
    return None


def compile_workflow(workflow: model.Workflow) -> tuple[CompiledWorkflow, list[dag.Problem]]:
    """Compile every template; problems (with paths) are returned, not raised.

    Call only on a workflow whose graph passed `dag.check_graph`.
    """
    compiler = _Compiler(workflow)
    compiled_steps: dict[str, StepTemplates] = {}
    for index, step in enumerate(workflow.steps):
        visible = compiler.ancestors[step.id]

        def path(name: str, *, index: int = index, step_id: str = step.id) -> str:
            return dag.step_path(index, step_id, name)

        if isinstance(step, model.ModelStep) and step.mode == "completion":
            assert step.prompt is not None  # the model's validator requires it
            prompt = compiler.template(step.prompt, path=path("prompt"), visible=visible)
            compiled_steps[step.id] = StepTemplates(prompt=prompt)
        elif isinstance(step, model.ModelStep):
            messages: list[tuple[str, Template]] = []
            for position, message in enumerate(step.message_templates()):
                where = (
                    path("prompt")
                    if step.prompt is not None
                    else path(f"messages[{position}].content")
                )
                compiled = compiler.template(message.content, path=where, visible=visible)
                if compiled is not None:
                    messages.append((message.role, compiled))
            compiled_steps[step.id] = StepTemplates(messages=messages)
        elif isinstance(step, model.HttpStep):
            headers: dict[str, Template] = {}
            for name, value in step.headers.items():
                header = compiler.template(value, path=path(f"headers.{name}"), visible=visible)
                if header is not None:
                    headers[name] = header
            body = None
            if step.body is not None:
                body = compiler.template(step.body, path=path("body"), visible=visible)
            url = compiler.template(step.url, path=path("url"), visible=visible)
            compiled_steps[step.id] = StepTemplates(url=url, headers=headers, body=body)
        else:
            template = expression = None
            if step.template is not None:
                template = compiler.template(step.template, path=path("template"), visible=visible)
            if step.expression is not None:
                expression = compiler.expression(
                    step.expression, path=path("expression"), visible=visible
                )
            compiled_steps[step.id] = StepTemplates(template=template, expression=expression)
    output = compiler.expression(workflow.output, path="output", visible=compiler.step_ids)
    result = CompiledWorkflow(
        steps=compiled_steps,
        output=output or Expression("none", compiler.env.compile_expression("none")),
        ancestors=compiler.ancestors,
    )
    return result, compiler.problems


def context(inputs: Mapping[str, Any], outputs: Mapping[str, Any]) -> dict[str, Any]:
    """The names a template sees: `inputs` and `steps.<id>.output`."""
    return {
        "inputs": dict(inputs),
        "steps": {step_id: {"output": value} for step_id, value in outputs.items()},
    }
