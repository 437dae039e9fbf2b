"""The house's rules, checked on the code as it stands (docs/architecture.md draws them).

* Imports run one way: every module belongs to a layer, and imports only modules of its own layer or
  of layers below (every import counts: at the top of a module, inside a function, or for type
  checkers only). No module reaches, through any chain of imports, back to itself. The backends
  never import the controller (it reuses the Kubernetes backend's pod logs, not the reverse).
* Frameworks own their differences: outside trainctl/frameworks/ no string literal is a kind, a
  framework's name or a replica type only some kinds have, nor mentions a kind or such a replica type.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.conftest import REPO
from trainctl.frameworks import ALL

PACKAGE = REPO / "trainctl"
# Bottom up; a module is in the layer of the longest prefix that names it.
LAYERS = [
    ("ground", ["trainctl", "trainctl.errors", "trainctl.paths", "trainctl.yamlsafe", "trainctl.reporting",
                "trainctl.functions.runner", "trainctl.recipes"]),
    ("frameworks and Kubernetes", ["trainctl.frameworks", "trainctl.kube"]),
    ("function jobs", ["trainctl.functions"]),
    ("core", ["trainctl.core"]),
    ("code", ["trainctl.code"]),
    ("submission", ["trainctl.submit"]),
    ("backends", ["trainctl.backends"]),
    ("controller", ["trainctl.controller"]),
    ("sdk", ["trainctl.sdk", "trainctl.compat"]),
    ("cli", ["trainctl.cli", "trainctl.__main__"]),
]
MAX_TOP_LEVEL_MODULES = 8  # the public face and the ground floor; everything else lives in a package of its layer
# The package's face only hands names on: what it names for type checkers is the public API, not a dependency.
FACES = {"trainctl"}


def modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(REPO).with_suffix("").parts)
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


MODULES = modules()


def imported(module: str) -> set[str]:
    """The modules of trainctl that ``module`` imports, anywhere in it."""
    targets = set()
    for node in ast.walk(ast.parse(MODULES[module].read_text())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            # a submodule by its own name; any other name from the module (or package) that defines it
            names = [f"{node.module}.{alias.name}" if f"{node.module}.{alias.name}" in MODULES else node.module
                     for alias in node.names]
        else:
            continue
        for name in names:
            if name.split(".")[0] == "trainctl":
                targets.add(owner(name))
    return targets - {module}


def owner(name: str) -> str:
    """The module a dotted name lives in: ``trainctl.errors.UserError`` -> ``trainctl.errors``."""
    while name not in MODULES:
        name = name.rpartition(".")[0]
    return name


def layer(module: str) -> int:
    _, position = max((len(prefix), position) for position, (_, prefixes) in enumerate(LAYERS) for prefix in prefixes
                      if module == prefix or module.startswith(prefix + "."))
    return position


GRAPH = {module: set() if module in FACES else imported(module) for module in MODULES}


def test_the_top_level_holds_few_modules():
    top = sorted(path.name for path in PACKAGE.glob("*.py"))
    assert len(top) <= MAX_TOP_LEVEL_MODULES, top


def test_every_module_has_a_layer():
    assert all(layer(module) >= 0 for module in MODULES)


def test_imports_run_down_the_layers():
    upward = [f"{module} ({LAYERS[layer(module)][0]}) imports {target} ({LAYERS[layer(target)][0]})"
              for module, targets in sorted(GRAPH.items()) for target in sorted(targets) if layer(target) > layer(module)]
    assert upward == []


def test_no_import_circle():
    assert circles(GRAPH) == []


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, without recursion)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_a_circle_is_found():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


# ---- frameworks own their differences -------------------------------------------------------------

# A framework is named by its kind, its CLI name and aliases, its kind in lower case and its plural, in any case
# and inside longer words (pytorch_init_image, PADDLE_TRAINER_ID, TF_CONFIG); so are the replica types only some
# kinds have (a TF_CONFIG task is "chief"); and the frameworks' launchers and their variables are facts of theirs.
NAMES = {framework.kind for framework in ALL} | {name for framework in ALL for name in (
    *framework.cli_names, framework.singular, framework.plural)}
SPECIFIC_TYPES = {rtype for framework in ALL for rtype in framework.replica_types
                  if not all(rtype in other.replica_types for other in ALL)}
FACTS = ("torchrun", "mpirun", "mpiexec", "TF_CONFIG", "OMPI_", "PMIX_", "PMI_RANK", "mpi4py")
WORDS = sorted(NAMES | SPECIFIC_TYPES, key=len, reverse=True)
MENTIONS = re.compile(r"(?i)(?<![a-z0-9])(?:" + "|".join(map(re.escape, WORDS)) + r")(?![a-z0-9])|"
                      + "|".join(map(re.escape, FACTS)))
# compat.py mirrors upstream's TrainingClient, whose defaults name kinds; Client.run names one default framework
ALLOWED = {"trainctl/compat.py": None, "trainctl/sdk/client.py": "DEFAULT_FRAMEWORK"}
# a torch tensor is a value a function may return, whatever its job's kind: the result line's codec names it
ALLOWED_WORDS = {"trainctl/functions/runner.py": {"torch"}, "trainctl/functions/results.py": {"torch"}}


def literals(path: Path) -> list[tuple[int, str]]:
    """The string constants of a module (f-strings' parts too) but its docstrings (and, where ALLOWED names one,
    that assignment's); comments are no constants."""
    return literals_of(path.read_text(), ALLOWED.get(str(path.relative_to(REPO)), ""))


def literals_of(source: str, allowed: str = "") -> list[tuple[int, str]]:
    tree = ast.parse(source)
    skipped = {id(node.body[0].value) for node in ast.walk(tree)
               if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
               and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    skipped |= {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Assign)
                and any(isinstance(target, ast.Name) and target.id == allowed for target in node.targets)}
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skipped]


def mentions(text: str, allowed: set[str] = frozenset()) -> list[str]:
    """What in ``text`` names a framework, but the words ``allowed`` (lower case)."""
    return [found.group(0) for found in MENTIONS.finditer(text) if found.group(0).lower() not in allowed]


def test_no_literal_names_a_kind_outside_the_frameworks():
    leaks = [f"{path.relative_to(REPO)}:{line}: {text[:80]!r}" for path in sorted(PACKAGE.rglob("*.py"))
             if "frameworks" not in path.parts and ALLOWED.get(str(path.relative_to(REPO)), "") is not None
             for line, text in literals(path)
             if mentions(text, ALLOWED_WORDS.get(str(path.relative_to(REPO)), set()))]
    assert leaks == []


# what the first, narrow scan (case-sensitive, whole strings or kinds only) let through, as it stood in trainctl/
MISSED = '''
WORLD_RANKS = ("OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK")
JOB_RANKS = ("RANK", "PROCESS_ID", "PADDLE_TRAINER_ID", *WORLD_RANKS)


def leads_the_job(env):
    """Docstrings may say TF_CONFIG's chief, and torchrun."""
    config = json.loads(env.get("TF_CONFIG") or "{}")
    leader = next((role for role in ("chief", "master") if config.get(role)), "worker")  # a comment: chief
    return f"start it with torchrun ({leader})", "--pytorch-init-container-image", "mpi4py.MPI"


HELP = f"KIND is one of {NAMES} (tf = tensorflow)."
'''


def test_the_scan_sees_a_leak():
    assert mentions("a TFJob has at most one chief") and mentions("must be 1 (got 2): Master")
    assert "pytorch" in NAMES and "Worker" not in SPECIFIC_TYPES
    found = {text: mentions(text) for _, text in literals_of(MISSED) if mentions(text)}
    assert sorted(found) == sorted(["OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "PADDLE_TRAINER_ID", "TF_CONFIG",
                                    "chief", "master", "start it with torchrun (", "--pytorch-init-container-image",
                                    "mpi4py.MPI", " (tf = tensorflow)."]), found
    for generic in ("Worker", "worker-0", "steps/s", "a template", "RANK", "ptf", "distributed"):
        assert not mentions(generic), generic
    assert not mentions("a torch tensor", {"torch"}) and mentions("a torch tensor")
