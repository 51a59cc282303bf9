"""Creating an Invocation runs its WorkflowRun: who may do that, and whose it is.

An Invocation is a way to invoke a run, so creating one needs what `POST …/invoke`
needs as well as `create` on `invocations`: `create` on `workflowruns/invoke` for the
run named in `spec.workflowRun`. kube-apiserver authorized the create of the Invocation
before proxying it; the second question is asked here, at admission, of the authorizer
the server already has (the standalone policy, or a SubjectAccessReview in a cluster),
so a user who may create Invocations but not invoke that run gets a 403 naming both.

The run must exist and must not be being deleted (422 on `spec.workflowRun`), and
becomes the Invocation's controller owner (`metadata.ownerReferences`, set here by the
server), so deleting the run deletes its Invocations: kube's garbage collector does it in
a cluster, and the run's teardown everywhere (docs/invocations.md).

Order, as kube's: authorization of the invoke first (a user who may not invoke the run
learns nothing about it), then the run's existence. A dry run is admitted the same way.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from plnt.api import errors
from plnt.api.invocations import PLURAL
from plnt.api.workflowruns import API_VERSION, GROUP, KIND, VERSION
from plnt.apiserver import authn, authz
from plnt.registry.definitions import ResourceDefinition
from plnt.registry.labelnames import go_quote
from plnt.registry.objects import Object, lookup
from plnt.registry.options import Requester
from plnt.registry.store import ResourceStore

log = logging.getLogger("plnt.apiserver.invocations")

RUNS = (GROUP, "workflowruns")


def invoke_attributes(user: authn.UserInfo, namespace: str, run: str) -> authz.Attributes:
    """What `POST …/workflowruns/RUN/invoke` asks the authorizer."""
    return authz.Attributes(
        user=user,
        verb="create",
        resource_request=True,
        path=f"/apis/{API_VERSION}/namespaces/{namespace}/workflowruns/{run}/invoke",
        api_group=GROUP,
        api_version=VERSION,
        namespace=namespace,
        resource="workflowruns",
        subresource="invoke",
        name=run,
    )


def _user(requester: Requester) -> authn.UserInfo:
    return authn.UserInfo(
        name=requester.name, groups=requester.groups, uid=requester.uid, extra=requester.extra
    )


class InvocationAdmission:
    """The invoke check and the owner reference of a new Invocation (module docstring)."""

    def __init__(
        self,
        *,
        authorizer: authz.Authorizer,
        stores: Callable[[], Mapping[tuple[str, str], ResourceStore]],
    ) -> None:
        self.authorizer = authorizer
        self._stores = stores

    async def admit_new(
        self,
        definition: ResourceDefinition,
        obj: Object,
        *,
        requester: Requester | None,
        dry_run: bool,
    ) -> None:
        del dry_run  # admitted the same way
        meta = obj["metadata"]
        namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
        run = str(lookup(obj, "spec", "workflowRun") or "")
        if requester is not None:
            await self._authorize(requester, namespace, name, run)
        owner = await self._run(definition, namespace, name, run)
        owner_meta = owner["metadata"]
        kept = [
            ref
            for ref in meta.get("ownerReferences") or []
            if not (isinstance(ref, dict) and ref.get("controller"))
        ]
        meta["ownerReferences"] = [
            *kept,
            {
                "apiVersion": API_VERSION,
                "kind": KIND,
                "name": owner_meta["name"],
                "uid": owner_meta["uid"],
                "controller": True,
            },
        ]

    async def _authorize(self, requester: Requester, namespace: str, name: str, run: str) -> None:
        attributes = invoke_attributes(_user(requester), namespace, run)
        try:
            decision, reason = await self.authorizer.authorize(attributes)
        except authz.AuthorizerError as error:
            log.warning("authorizing the invoke of %s/%s failed: %s", namespace, run, error)
            raise errors.InternalError(f"Internal error occurred: {error}") from error
        if decision is authz.Decision.ALLOW:
            return
        detail = authz.denial_detail(attributes)
        if reason:
            detail = f"{detail}: {reason}"
        raise errors.Forbidden(
            f"{PLURAL}.{GROUP} {go_quote(name)} is forbidden: {detail}"
            f" (an Invocation of workflowrun {go_quote(run)} invokes it, so creating one"
            f" needs create on {PLURAL} and on workflowruns/invoke)",
            name=name,
            group=GROUP,
            kind=PLURAL,
        )

    async def _run(
        self, definition: ResourceDefinition, namespace: str, name: str, run: str
    ) -> Object:
        """The run named, or a 422 on `spec.workflowRun` saying why it cannot be invoked."""
        store = self._stores()[RUNS]
        try:
            owner = await store.get(namespace, run)
        except errors.NotFound:
            cause = errors.Cause(
                "FieldValueNotFound",
                f"Not found: {go_quote(run)}: no workflowrun of that name in namespace"
                f" {go_quote(namespace)}",
                "spec.workflowRun",
            )
        else:
            if not lookup(owner, "metadata", "deletionTimestamp"):
                return owner
            cause = errors.Cause(
                "FieldValueInvalid",
                f"Invalid value: {go_quote(run)}: the workflowrun is being deleted",
                "spec.workflowRun",
            )
        raise errors.Invalid.of(definition.qualified_kind, name, [cause])
