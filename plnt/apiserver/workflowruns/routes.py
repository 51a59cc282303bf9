"""WorkflowRun's own subresources over HTTP, by name, as its install hands them over.

`install.INSTALL` gives `SUBRESOURCES` to the generic dispatcher (`plnt.apiserver.kinds`).
`status` is not here: the generic handlers serve it, as every kind's
part-of-the-object subresource.
"""

from __future__ import annotations

from collections.abc import Mapping

from plnt.apiserver import kinds
from plnt.apiserver.workflowruns import (
    bench,
    invoke,
    mirroring,
    openai_errors,
    proxy,
    rollback,
    scale,
)

SUBRESOURCES: Mapping[str, kinds.Subresource] = {
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
    "shadow": kinds.Subresource(mirroring.handle_shadow),
}
