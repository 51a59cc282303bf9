"""`plnt.api.names` is importable without pydantic: the client, CLI, UI and load
harness take their names from it instead of keeping copies."""

from __future__ import annotations

import subprocess
import sys

from plnt.api import invocations, names, workflowruns


def test_the_names_module_imports_no_pydantic() -> None:
    code = (
        "import sys; import plnt.api.names, plnt.api.headers, plnt.api.envelopes; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'pydantic'))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.strip() == "[]"


def test_the_models_use_the_same_names() -> None:
    assert workflowruns.API_VERSION == names.API_VERSION == "plnt.work/v1"
    assert invocations.PLURAL == names.INVOCATIONS
    assert invocations.FINISHED_PHASES == names.INVOCATION_FINISHED_PHASES
