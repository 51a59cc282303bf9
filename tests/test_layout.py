"""Test packages share code only through `tests/support`, and shared fixtures are defined once.

A test module that imports another test module, or any module that imports a conftest,
runs that module's fixtures a second time under another name: pytest registers a fixture
in every module that holds it, so a session fixture imported into a second conftest starts
a second Temporal or model server. Helpers and fixtures used by more than one package live
in `tests/support` (the fixtures registered once by `tests/conftest.py`); a package may
import its own plain modules (`tests/charts/rendering.py`), never another package's.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

TESTS = Path(__file__).resolve().parent
SUPPORT = "support"


def _is_module(dotted: str) -> bool:
    """Whether `tests.x.y` names a module or package of this tree (not a name inside one)."""
    parts = dotted.split(".")[1:]
    path = TESTS.joinpath(*parts)
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def imported_modules(tree: ast.Module, package: tuple[str, ...]) -> Iterator[tuple[int, str]]:
    """(line, dotted name) of every module of `tests` the tree imports, at any depth.

    `package` is the importing module's package (`("tests", "deploy")`), for relative
    imports; `from tests.a import b` yields `tests.a` and, when `b` is a module, `tests.a.b`.
    """
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "tests":
                    yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = [*package[: len(package) - node.level + 1]]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            if module.split(".")[0] != "tests":
                continue
            if module != "tests":
                yield node.lineno, module
            for alias in node.names:
                candidate = f"{module}.{alias.name}"
                if _is_module(candidate):
                    yield node.lineno, candidate


def layout_violations(source: str, path: Path) -> list[str]:
    """What `path` (a module under tests/) imports that it must not, one line each."""
    relative = path.relative_to(TESTS)
    package = ("tests", *relative.parent.parts)
    own = relative.parts[0] if len(relative.parts) > 1 else None
    found = []
    for line, module in imported_modules(ast.parse(source), package):
        parts = module.split(".")[1:]
        if any(part == "conftest" or part.startswith("test_") for part in parts):
            found.append(f"{relative}:{line} imports {module}: a test module or conftest")
        elif parts[0] not in (SUPPORT, own):
            found.append(f"{relative}:{line} imports {module}: another package's module")
    return found


def _is_fixture(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    for decorator in node.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        if isinstance(target, ast.Attribute) and target.attr == "fixture":
            return True
    return False


def registered_plugins() -> list[str]:
    """The modules `tests/conftest.py` names in `pytest_plugins`."""
    tree = ast.parse((TESTS / "conftest.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "pytest_plugins" for t in node.targets
        ):
            value = ast.literal_eval(node.value)
            assert isinstance(value, list)
            return [str(name) for name in value]
    return []


def plugin_fixtures(module: str) -> set[str]:
    """The fixtures a registered plugin module defines."""
    path = TESTS.joinpath(*module.split(".")[1:]).with_suffix(".py")
    return {
        node.name
        for node in ast.parse(path.read_text()).body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and _is_fixture(node)
    }


def reimported_fixtures(source: str, fixtures: dict[str, set[str]]) -> list[tuple[int, str]]:
    """(line, module.name) of each import of a registered plugin's fixture."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module in fixtures:
            for alias in node.names:
                if alias.name in fixtures[node.module]:
                    found.append((node.lineno, f"{node.module}.{alias.name}"))
    return found


def test_no_module_under_tests_imports_a_test_module_a_conftest_or_another_package() -> None:
    found = [
        violation
        for path in sorted(TESTS.rglob("*.py"))
        for violation in layout_violations(path.read_text(), path)
    ]
    assert found == [], "\n".join(found)


def test_the_fixtures_registered_for_the_suite_are_never_imported_again() -> None:
    fixtures = {module: plugin_fixtures(module) for module in registered_plugins()}
    assert fixtures["tests.support.stack"] >= {"temporal", "stack"}
    found = [
        f"{path.relative_to(TESTS)}:{line} imports {name}"
        for path in sorted(TESTS.rglob("*.py"))
        for line, name in reimported_fixtures(path.read_text(), fixtures)
    ]
    assert found == [], "\n".join(found)


def test_the_check_names_each_import_it_forbids_and_allows_the_rest() -> None:
    here = TESTS / "ui" / "test_x.py"
    source = "\n".join(
        [
            "from tests.deploy.conftest import Api",  # 1: another package's conftest
            "from tests.ui.conftest import UiServer",  # 2: its own conftest
            "from tests.runner import test_process",  # 3: a test module, by `from … import`
            "import tests.apiserver.test_invoke",  # 4: a test module, by `import`
            "from tests.charts import rendering",  # 5: another package's plain module
            "from . import conftest",  # 6: relative
            "from tests.support.stack import Stack",  # allowed: support
            "from tests.ui import wire",  # allowed: its own plain module
            "def later():",
            "    from tests.sagas.conftest import CHAT_SPEC",  # 10: inside a function
        ]
    )
    lines = [int(v.split(":")[1].split()[0]) for v in layout_violations(source, here)]
    assert sorted(set(lines)) == [1, 2, 3, 4, 5, 6, 10]
    fixtures = {"tests.support.stack": {"temporal"}}
    assert reimported_fixtures("from tests.support.stack import Stack, temporal", fixtures) == [
        (1, "tests.support.stack.temporal")
    ]
