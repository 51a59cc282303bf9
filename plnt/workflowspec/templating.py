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

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, cast

import jinja2
from jinja2 import meta, nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment

from plnt.workflowspec import dag, model

CONTEXT_NAMES = frozenset({"inputs", "steps"})
ITEM_NAMES = frozenset({"item", "index"})
"""What a `forEach` step's templates see besides: the element and its position."""
TOOL_NAMES = frozenset({"inputs", "arguments"})
"""What a tool's call templates see: the invocation's inputs and the call's arguments."""


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
    when: Expression | None = None
    """The step's condition, evaluated before it runs (None: always runs)."""
    for_each: Expression | None = None
    """The list the step maps over (None: the step runs once)."""
    inputs: dict[str, Expression] = field(default_factory=dict)
    """A workflow step's inputs of the workflow it calls, by name."""


@dataclass(frozen=True)
class ToolTemplates:
    """The compiled call of one tool: its URL, headers and body over `arguments`."""

    url: Template | None = None
    headers: dict[str, Template] = field(default_factory=dict)
    body: Template | None = None


@dataclass(frozen=True)
class CompiledWorkflow:
    """Every template of a workflow, compiled, plus each step's ancestors."""

    steps: dict[str, StepTemplates]
    output: Expression
    ancestors: dict[str, set[str]]
    tools: dict[str, ToolTemplates] = field(default_factory=dict)


class _Compiler:
    def __init__(self, workflow: model.Workflow) -> None:
        self.env = make_environment()
        self.problems: list[dag.Problem] = []
        self.ancestors = dag.ancestors(workflow.steps)
        self.step_ids = {step.id for step in workflow.steps}

    def template(
        self,
        source: str,
        *,
        path: str,
        visible: set[str],
        names: frozenset[str] = CONTEXT_NAMES,
    ) -> Template | None:
        try:
            ast = self.env.parse(source)
            self._check_references(ast, path=path, visible=visible, names=names)
            return Template(source, self.env.from_string(ast))
        except jinja2.TemplateSyntaxError as error:
            self.problems.append(dag.Problem(path, f"template syntax error: {error.message}"))
            return None

    def expression(
        self,
        source: str,
        *,
        path: str,
        visible: set[str],
        names: frozenset[str] = CONTEXT_NAMES,
    ) -> Expression | None:
        try:
            # Parse the expression the way compile_expression does, to inspect it first.
            ast = self.env.parse("{{ (" + source + ") }}")
            self._check_references(ast, path=path, visible=visible, names=names)
            compiled = self.env.compile_expression(source, undefined_to_none=False)
            return Expression(source, compiled)
        except jinja2.TemplateSyntaxError as error:
            self.problems.append(dag.Problem(path, f"expression syntax error: {error.message}"))
            return None

    def _check_references(
        self, ast: nodes.Template, *, path: str, visible: set[str], names: frozenset[str]
    ) -> None:
        allowed = names | set(self.env.globals)
        quoted = [f"`{name}`" for name in sorted(names)]
        seen = ", ".join(quoted[:-1]) + " and " + quoted[-1]
        for name in sorted(meta.find_undeclared_variables(ast) - allowed):
            self.problems.append(dag.Problem(path, f"unknown name {name!r} (templates see {seen})"))
        for found in ast.find_all((nodes.Getattr, nodes.Getitem)):
            node = cast(nodes.Getattr | nodes.Getitem, found)
            attr = _static_attribute(node)
            if attr is not None and attr.startswith("_"):
                self.problems.append(
                    dag.Problem(path, f"access to {attr!r} is refused by the sandbox")
                )
            inner = node.node
            is_steps = isinstance(inner, nodes.Name) and inner.name == "steps"
            if is_steps and attr is not None and "steps" in names:
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
        names = CONTEXT_NAMES | ITEM_NAMES if step.for_each is not None else CONTEXT_NAMES

        def path(name: str, *, index: int = index, step_id: str = step.id) -> str:
            return dag.step_path(index, step_id, name)

        def template(
            source: str,
            where: str,
            *,
            names: frozenset[str] = names,
            visible: set[str] = visible,
        ) -> Template | None:
            return compiler.template(source, path=path(where), visible=visible, names=names)

        when = for_each = None
        if step.when is not None:
            when = compiler.expression(step.when, path=path("when"), visible=visible)
        if step.for_each is not None:
            for_each = compiler.expression(step.for_each, path=path("forEach"), visible=visible)
        if isinstance(step, model.ModelStep) and step.mode == "completion":
            assert step.prompt is not None  # the model's validator requires it
            compiled_steps[step.id] = StepTemplates(prompt=template(step.prompt, "prompt"))
        elif isinstance(step, model.ModelStep):
            messages: list[tuple[str, Template]] = []
            for position, message in enumerate(step.message_templates()):
                where = (
                    path("prompt")
                    if step.prompt is not None
                    else path(f"messages[{position}].content")
                )
                compiled = compiler.template(
                    message.content, path=where, visible=visible, names=names
                )
                if compiled is not None:
                    messages.append((message.role, compiled))
            compiled_steps[step.id] = StepTemplates(messages=messages)
        elif isinstance(step, model.HttpStep):
            headers: dict[str, Template] = {}
            for name, value in step.headers.items():
                header = template(value, f"headers.{name}")
                if header is not None:
                    headers[name] = header
            body = template(step.body, "body") if step.body is not None else None
            url = template(step.url, "url")
            compiled_steps[step.id] = StepTemplates(url=url, headers=headers, body=body)
        elif isinstance(step, model.WorkflowStep):
            inputs: dict[str, Expression] = {}
            for name, source in step.inputs.items():
                compiled_input = compiler.expression(
                    source, path=path(f"inputs.{name}"), visible=visible, names=names
                )
                if compiled_input is not None:
                    inputs[name] = compiled_input
            compiled_steps[step.id] = StepTemplates(inputs=inputs)
        else:
            text = expression = None
            if step.template is not None:
                text = template(step.template, "template")
            if step.expression is not None:
                expression = compiler.expression(
                    step.expression, path=path("expression"), visible=visible, names=names
                )
            compiled_steps[step.id] = StepTemplates(template=text, expression=expression)
        compiled_steps[step.id] = dataclasses.replace(
            compiled_steps[step.id], when=when, for_each=for_each
        )
    tools: dict[str, ToolTemplates] = {}
    for index, tool in enumerate(workflow.tools):
        where = f"tools[{index}](name={tool.name}).http"

        def tool_template(source: str, field_name: str, *, where: str = where) -> Template | None:
            return compiler.template(
                source, path=f"{where}.{field_name}", visible=set(), names=TOOL_NAMES
            )

        tool_headers: dict[str, Template] = {}
        for name, value in tool.http.headers.items():
            header = tool_template(value, f"headers.{name}")
            if header is not None:
                tool_headers[name] = header
        tools[tool.name] = ToolTemplates(
            url=tool_template(tool.http.url, "url"),
            headers=tool_headers,
            body=tool_template(tool.http.body, "body") if tool.http.body is not None else None,
        )
    output = compiler.expression(workflow.output, path="output", visible=compiler.step_ids)
    result = CompiledWorkflow(
        steps=compiled_steps,
        output=output or Expression("none", compiler.env.compile_expression("none")),
        ancestors=compiler.ancestors,
        tools=tools,
    )
    return result, compiler.problems


def context(
    inputs: Mapping[str, Any],
    outputs: Mapping[str, Any],
    skipped: frozenset[str] | set[str] = frozenset(),
) -> dict[str, Any]:
    """The names a template sees: `inputs`, `steps.<id>.output` and `steps.<id>.skipped`
    (a step skipped by its `when` has output none)."""
    return {
        "inputs": dict(inputs),
        "steps": {
            step_id: {"output": value, "skipped": step_id in skipped}
            for step_id, value in outputs.items()
        },
    }
