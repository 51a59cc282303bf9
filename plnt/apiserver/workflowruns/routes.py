"""WorkflowRun's subresources over HTTP, as the composition root registers them.

`build_app` hands `HTTP` to the generic dispatcher (`plnt.apiserver.kinds`). `status` is
not here: the generic handlers serve it, as every kind's part-of-the-object subresource.
"""

from __future__ import annotations

from plnt.apiserver import kinds
from plnt.apiserver.workflowruns import (
    bench,
    invoke,
    openai_errors,
    proxy,
    rollback,
    scale,
    shadowing,
)
from plnt.registry import workflowruns

HTTP = kinds.KindHttp(
    definition=workflowruns.DEFINITION,
    subresources={
        "scale": kinds.Subresource(scale.handle),
        "invoke": kinds.Subresource(invoke.handle_invoke),
        "invocationlog": kinds.Subresource(invoke.handle_invocation_log),
        "invocations": kinds.Subresource(invoke.handle_deprecated_invocation_log),
        # Its callers are OpenAI clients: errors in their shape, not as a metav1.Status.
        "proxy": kinds.Subresource(proxy.handle_proxy, render_error=openai_errors.error_response),
        "rollback": kinds.Subresource(rollback.handle_rollback),
        "abort": kinds.Subresource(rollback.handle_abort),
        "promote": kinds.Subresource(rollback.handle_promote),
        "retry": kinds.Subresource(rollback.handle_retry),
        "bench": kinds.Subresource(bench.handle_bench),
        "shadow": kinds.Subresource(shadowing.handle_shadow),
    },
)
