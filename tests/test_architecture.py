"""The layout shows the architecture: each layer imports only the layers below it.

Read from the source with ast (no imports run), so a new edge fails here with the file that
made it. The README's "Layout" section describes the same table. Above the layers sit
normdive/config.py (the settings, which any layer may read) and normdive/cli.py (the
`normdive` command, which imports each command's work from its layer inside the command's
body); no layer imports cli.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "normdive"

# layer -> the normdive layers it may import.
ALLOWED: dict[str, set[str]] = {
    # The learner's language: locales, their negotiation, the gettext catalogues and how the
    # locale writes numbers; below every layer that words a sentence.
    "i18n": set(),
    "numeric": {"i18n"},
    # The one recording format: every file record-runs writes (the recording, its depth sweep,
    # its lab grid), read by the web app and written by training.
    "recording": set(),
    # The live lab's generator and configuration: torch-free, twinned by the browser's trainer.
    "lab": {"recording"},
    "lesson": {"numeric", "recording", "i18n"},
    "progress": {"lesson", "numeric", "recording", "i18n"},
    "store": {"progress", "config"},
    # LTI 1.3 (registrations, login, launch): over the store, under the web app.
    "lti": {"store", "progress", "lesson", "config", "i18n"},
    "training": {"recording", "lab"},
    # Learning records (xAPI): the events as statements, and their delivery to an LRS. Over
    # lti: a statement names the learner's LTI link, and the gate's score as passback sends it.
    "xapi": {"store", "progress", "lesson", "numeric", "config", "lti", "i18n"},
    "web": {
        *("store", "progress", "lesson", "numeric", "recording", "config", "lti", "i18n"),
        "xapi",
    },
}
# Modules below every layer (normdive/<name>.py): any layer may import them, and they
# import nothing of normdive.
BELOW_EVERY_LAYER = {"like_named"}
# Only training may import torch; the web app, the numeric core and the format never do.
TORCH_ALLOWED = {"training"}


def imports_of(path: Path) -> set[str]:
    """Top-level module names and normdive sub-packages imported by one file."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def layer_files(layer: str) -> list[Path]:
    return sorted((PACKAGE / layer).rglob("*.py"))


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_a_layer_imports_only_the_layers_below_it(layer: str) -> None:
    wrong = []
    for path in layer_files(layer):
        for name in imports_of(path):
            parts = name.split(".")
            if parts[0] != "normdive" or len(parts) < 2:
                continue
            target = parts[1]
            if target != layer and target not in ALLOWED[layer] | BELOW_EVERY_LAYER:
                wrong.append(f"{path.relative_to(PACKAGE)} imports normdive.{target}")
    assert wrong == []


@pytest.mark.parametrize("module", sorted(BELOW_EVERY_LAYER))
def test_a_module_below_every_layer_imports_nothing_of_normdive(module: str) -> None:
    imported = imports_of(PACKAGE / f"{module}.py")
    assert sorted(name for name in imported if name.split(".")[0] == "normdive") == []


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_only_training_imports_torch(layer: str) -> None:
    users = [
        str(path.relative_to(PACKAGE))
        for path in layer_files(layer)
        if any(name.split(".")[0] == "torch" for name in imports_of(path))
    ]
    if layer in TORCH_ALLOWED:
        assert users, "training is where torch lives"
    else:
        assert users == []


def test_every_layer_is_in_the_table() -> None:
    layers = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()}
    assert layers - {"content"} == set(ALLOWED)


def test_beside_the_layers_are_only_the_command_the_settings_and_what_is_below_them() -> None:
    # A module of its own beside the layers would escape the table above: the code it holds
    # belongs in the layer whose concept it is (the recorded files' kinds in recording/).
    modules = {path.stem for path in PACKAGE.glob("*.py")}
    assert modules == {"__init__", "cli", "config", *BELOW_EVERY_LAYER}


WEB = PACKAGE / "web"
ROUTES = WEB / "routes"


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def web_import_graph() -> dict[str, set[str]]:
    """normdive.web module -> the normdive.web modules it imports (top-level or in a body)."""
    modules = {_module_name(path): path for path in WEB.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        imported = set()
        for target in imports_of(path):
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != name and target.startswith("normdive.web."):
                imported.add(target)
        graph[name] = imported
    return graph


def test_no_route_module_imports_another() -> None:
    # A route module parses a request, makes one service call and answers: what two of them
    # share belongs below them (views, infrastructure, security).
    graph = web_import_graph()
    routes = {name for name in graph if name.startswith("normdive.web.routes.")}
    assert {name: sorted(graph[name] & routes) for name in routes if graph[name] & routes} == {}


def test_only_the_app_imports_the_routes() -> None:
    graph = web_import_graph()
    importers = {
        name
        for name, imported in graph.items()
        if not name.startswith("normdive.web.routes")
        and any(target.startswith("normdive.web.routes") for target in imported)
    }
    assert importers == {"normdive.web.app"}


def test_the_web_modules_import_no_cycle() -> None:
    graph = web_import_graph()
    cycles: list[list[str]] = []
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(name: str, path: list[str]) -> None:
        state[name] = 1
        for target in sorted(graph[name]):
            if state.get(target) == 1:
                cycles.append([*path[path.index(target) :], target])
            elif target not in state:
                visit(target, [*path, target])
        state[name] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])
    assert cycles == []


def test_the_app_is_starlette_not_fastapi() -> None:
    # The app is written in Starlette (README, "Layout"); FastAPI was only measured beside it
    # (bench/RESULTS.md, "The framework").
    users = [
        str(path.relative_to(PACKAGE))
        for path in PACKAGE.rglob("*.py")
        if any(name.split(".")[0] == "fastapi" for name in imports_of(path))
    ]
    assert users == []


# The request path's modules, whose functions each do one job (the routes parse, admit and
# answer; web.infrastructure.learners reads and writes): none longer than this.
SHORT_FUNCTION_MODULES = (
    "web/routes/actions.py",
    "web/infrastructure/services.py",
    "web/infrastructure/learners.py",
)
MAX_FUNCTION_LINES = 40


def long_functions(path: Path, limit: int) -> list[str]:
    """Each function (or method, or nested function) of `path` longer than `limit` lines,
    counted from its `def` to its last line, as "name: lines"."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [
        f"{node.name}: {node.end_lineno - node.lineno + 1}"
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.end_lineno is not None
        and node.end_lineno - node.lineno + 1 > limit
    ]


# No function of the web app is longer than this: past it, a function does more than one thing.
MAX_WEB_FUNCTION_LINES = 60


def test_no_function_of_the_web_app_is_long() -> None:
    long = {
        str(path.relative_to(WEB)): found
        for path in sorted(WEB.rglob("*.py"))
        if (found := long_functions(path, MAX_WEB_FUNCTION_LINES))
    }
    assert long == {}, f"over {MAX_WEB_FUNCTION_LINES} lines: {long}"


@pytest.mark.parametrize("module", SHORT_FUNCTION_MODULES)
def test_the_request_paths_functions_are_short(module: str) -> None:
    assert long_functions(PACKAGE / module, MAX_FUNCTION_LINES) == []


TESTS = Path(__file__).resolve().parent
# The folders pytest puts first on sys.path for a test file with no __init__.py beside it (its
# "prepend" import mode): tests/ for tests/conftest.py and the files beside it, tests/browser
# for the browser tests. A top-level name a module imports must be in one of the folders on
# the path when only that module's own file is collected.
TEST_FOLDERS = (TESTS, TESTS / "browser")


def _top_level_modules(folder: Path) -> set[str]:
    return {path.stem for path in folder.glob("*.py")}


def _imported_from(path: Path, folder_of_import: Path) -> list[str]:
    """What `path` imports that stands in `folder_of_import` (a module there, by name or
    dotted as browser.NAME from tests/)."""
    names = _top_level_modules(folder_of_import)
    dotted = folder_of_import == TESTS / "browser"
    return [
        name
        for name in imports_of(path)
        if name.split(".")[0] in names or (dotted and name.startswith("browser."))
    ]


@pytest.mark.parametrize(
    "path",
    sorted(TESTS.glob("test_*.py")) + sorted((TESTS / "browser").glob("test_*.py")),
    ids=lambda path: str(path.relative_to(TESTS)),
)
def test_every_test_file_runs_on_its_own(path: Path) -> None:
    """`pytest FILE` collects only FILE: so no test module imports another test module (whose
    own imports may need its folder on sys.path), and a browser helper imported from tests/
    (browser.NAME) imports nothing that only tests/browser on sys.path would find."""
    for folder in TEST_FOLDERS:
        for name in _imported_from(path, folder):
            module = name.split(".")[-1] if name.startswith("browser.") else name.split(".")[0]
            assert not module.startswith("test_"), f"{path.name} imports the test module {name}"
            if name.startswith("browser.") and path.parent == TESTS:
                helper = TESTS / "browser" / f"{module}.py"
                only_there = set(_imported_from(helper, TESTS / "browser"))
                assert not only_there, f"{name} imports {only_there}, found only beside it"
