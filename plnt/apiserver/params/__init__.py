"""Query parameters and bodies of resource requests, read as kube-apiserver reads them.

Each verb's options are converted from the query first (`queryvalues`: a value that
does not convert is a 400 naming the parameter), then validated as a whole as kube's
`ValidateCreateOptions`, `ValidateUpdateOptions`, `ValidatePatchOptions`,
`ValidateDeleteOptions` and `ValidateListOptions` do: every error at once, a 422
`CreateOptions.meta.k8s.io "" is invalid: ...` (or `UpdateOptions`, `PatchOptions`,
`DeleteOptions`, `ListOptions`) with one cause per parameter. Handlers parse before
touching the registry, so a malformed parameter never acts.

Bodies are read up to the request limit (413 beyond it) and decoded by `bodies`
(off the event loop unless small JSON). Exceptions: `errors.APIError` subclasses only.

Modules: `fielderrors` (the shared field errors), `writes`, `reads`, `deletes` (each verb's
options) and `requestbodies`; the handlers use the names re-exported here.
"""

from plnt.apiserver.params.deletes import PROPAGATION_POLICIES, delete_options
from plnt.apiserver.params.reads import Watching, get_options, list_options, wants_watch
from plnt.apiserver.params.requestbodies import (
    OBJECT_MEDIA_TYPES,
    decode_data,
    decode_object,
    decode_optional,
    object_media,
    read_body,
    unsupported_object_media,
)
from plnt.apiserver.params.writes import (
    apply_options,
    create_options,
    manager_from_user_agent,
    patch_options,
    update_options,
    write_options,
)

__all__ = [
    "OBJECT_MEDIA_TYPES",
    "PROPAGATION_POLICIES",
    "Watching",
    "apply_options",
    "create_options",
    "decode_data",
    "decode_object",
    "decode_optional",
    "delete_options",
    "get_options",
    "list_options",
    "manager_from_user_agent",
    "object_media",
    "patch_options",
    "read_body",
    "unsupported_object_media",
    "update_options",
    "wants_watch",
    "write_options",
]
