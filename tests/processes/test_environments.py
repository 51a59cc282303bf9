"""The environment builder: a child gets the allow-list and what it is given by name, never
a variable meant for another program."""

from __future__ import annotations

import json
from pathlib import Path

from plnt.processes import environments
from tests.support.hostile import HOSTILE

USERS = {
    "PATH": "/usr/bin:/bin",
    "HOME": "/home/me",
    "USER": "me",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "TZ": "UTC",
    "TMPDIR": "/tmp/me",
    "SSL_CERT_FILE": "/etc/ssl/certs/ca-certificates.crt",
    "PLNT_RUNNER_FORKSERVER": "0",
    "PYTHONPATH": "/src/plnt",
    "PYTHONSTARTUP": "/home/me/.pythonrc",
    "KUBECONFIG": "/home/me/.kube/config",
    "AWS_REGION": "eu-west-1",
    "OPENAI_API_KEY": "sk-not-for-children",
}
SHELL = {**USERS, **HOSTILE}


def test_a_child_gets_the_allow_list_and_no_setting_meant_for_another_program() -> None:
    built = environments.child(environ=SHELL)
    assert built == {
        name: USERS[name]
        for name in (
            "PATH",
            "HOME",
            "USER",
            "LANG",
            "LC_ALL",
            "TZ",
            "TMPDIR",
            "SSL_CERT_FILE",
            "PLNT_RUNNER_FORKSERVER",
        )
    }
    assert not set(HOSTILE) & set(built)


def test_a_python_child_also_finds_plnt_where_its_parent_did_and_nothing_more() -> None:
    built = environments.child(python=True, environ=SHELL)
    assert built["PYTHONPATH"] == "/src/plnt"
    assert "PYTHONSTARTUP" not in built and not set(HOSTILE) & set(built)


def test_named_variables_and_given_values_are_added_for_one_child() -> None:
    built = environments.child(names=("KUBECONFIG", "UNSET"), values={"PORT": "7"}, environ=SHELL)
    assert built["KUBECONFIG"] == USERS["KUBECONFIG"] and "UNSET" not in built
    assert built["PORT"] == "7"  # what plnt sets itself, on purpose


def test_a_copy_of_plnt_gets_what_plnt_reads_as_its_own_settings() -> None:
    built = environments.replica(values={"PLNT_WORKER_SLOT": "{}"}, environ=SHELL)
    for name in ("KUBECONFIG", "AWS_REGION", "PLNT_RUNNER_FORKSERVER", "PYTHONPATH"):
        assert built[name] == USERS[name]
    assert built["PLNT_WORKER_SLOT"] == "{}"
    assert "OPENAI_API_KEY" not in built and not set(HOSTILE) & set(built)


def test_a_runner_gets_the_one_variable_its_backend_config_names(tmp_path: Path) -> None:
    config = tmp_path / "backend.json"
    config.write_text(
        json.dumps({"type": "openai", "endpoint": "http://h/v1", "apiKeyEnv": "MINE"})
    )
    argv = ["python", "-X", "plnt-replica=t", "-m", "plnt.runner", "--backend-config", str(config)]
    built = environments.runner(argv, environ={**SHELL, "MINE": "sk-mine"})
    assert built["MINE"] == "sk-mine" and built["PYTHONUNBUFFERED"] == "1"
    assert "OPENAI_API_KEY" not in built and not set(HOSTILE) & set(built)


def test_a_runner_without_a_readable_backend_config_gets_no_key(tmp_path: Path) -> None:
    missing = ["python", "-m", "plnt.runner", f"--backend-config={tmp_path / 'gone.json'}"]
    assert environments.api_key_variable(missing) is None
    assert environments.api_key_variable(["python", "-m", "plnt.runner"]) is None
    (tmp_path / "echo.yaml").write_text("type: echo\n")
    echo = ["python", "-m", "plnt.runner", "--backend-config", str(tmp_path / "echo.yaml")]
    assert environments.api_key_variable(echo) is None
    built = environments.runner(echo, environ={**SHELL, "MINE": "sk"})
    assert "MINE" not in built and "OPENAI_API_KEY" not in built
