"""The code base's structure, checked from the source (issue #15):

* layers: `awnn` imports neither `search` nor `tracking`; `tracking` does not
  import `search`; `tracking.contract` (the common leaf) imports none of the
  three packages; nothing imports `search.cli` (the entry point);
* no import cycle between modules (imports inside functions count; imports
  under `if TYPE_CHECKING:` are annotations, not dependencies, and do not);
* private attributes of other libraries are touched only where the README
  says: Ray's in search/_ray_speedups.py, MLflow's bulk metric read in
  tracking/reader.py; a new one fails here until it is moved there or listed.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("awnn", "search", "tracking")


def modules() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for path in (ROOT / pkg).rglob("*.py"):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = path
    return out


def imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The project modules `name` imports, anywhere in the file (a module
    importing `pkg.mod` depends on `pkg.mod`, or on `pkg` for a name in it)."""
    is_pkg = path.name == "__init__.py"
    here = name.split(".") if is_pkg else name.split(".")[:-1]
    found = set()
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):  # drop `if TYPE_CHECKING:` blocks
        if isinstance(node, ast.If) and getattr(node.test, "id", getattr(node.test, "attr", None)) == "TYPE_CHECKING":
            node.body = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = here[: len(here) - node.level + 1] if node.level else []
            mod = ".".join(base + ([node.module] if node.module else []))
            targets = [f"{mod}.{a.name}" for a in node.names] + [mod]
        else:
            continue
        for t in targets:
            while t and t not in known:
                t = t.rpartition(".")[0]
            if t and t != name:
                found.add(t)
    return found


def graph() -> dict[str, set[str]]:
    mods = modules()
    return {name: imports(name, path, set(mods)) for name, path in mods.items()}


def test_layers():
    g = graph()
    bad = []
    for mod, deps in g.items():
        pkg = mod.split(".")[0]
        for d in deps:
            dpkg = d.split(".")[0]
            if (pkg == "awnn" and dpkg != "awnn") or (pkg == "tracking" and dpkg == "search"):
                bad.append(f"{mod} -> {d}")
            if d == "search.cli":
                bad.append(f"{mod} -> {d} (the entry point)")
    assert g["tracking.contract"] <= set(), f"tracking.contract must be a leaf: {g['tracking.contract']}"
    assert not bad, "imports against the layers (search -> tracking -> awnn):\n" + "\n".join(sorted(bad))


def test_no_import_cycle():
    g = graph()
    # a package's __init__ re-exporting its modules is not a cycle: drop edges from a package to its own submodules
    g = {m: {d for d in deps if not d.startswith(m + ".")} for m, deps in g.items()}
    seen, stack, cycles = set(), [], []

    def visit(m):
        if m in stack:
            cycles.append(stack[stack.index(m):] + [m])
            return
        if m in seen:
            return
        seen.add(m)
        stack.append(m)
        for d in sorted(g.get(m, ())):
            visit(d)
        stack.pop()

    for m in sorted(g):
        visit(m)
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


# (file, expression) of every access to another library's private attribute; ours (self._x) are not listed
ALLOWED_PRIVATE = {
    ("tracking/reader.py", "client._tracking_client"),  # the bulk metric read (one named function, with a fallback)
    ("search/tune.py", "os._exit"),  # the documented exit without exit handlers (exit_now: Ray's would wait for a dead GCS)
    ("search/cli.py", "os._exit"),  # likewise, for a process whose libraries half loaded under `ulimit -v` (its teardown crashed)
    ("search/tune.py", "threading._shutdown"),  # the interpreter's exit steps before its finalization, which exit_process skips
    ("search/tune.py", "atexit._run_exitfuncs"),  # (both version-checked, with a switch: search/tune.py _exit_handlers_then_exit)
}
OWN = {"self", "cls", "writer"}  # writer: tracking.store's own TrackingWriter
SPEEDUP_MODULES = {"search/_ray_speedups.py", "tracking/_mlflow_speedups.py"}


def test_private_attributes_of_other_libraries_only_where_listed():
    found = set()
    for pkg in ("search", "tracking"):
        for path in sorted((ROOT / pkg).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel in SPEEDUP_MODULES:  # (the one version-checked, switchable home of each library's private tweaks)
                continue
            for line in path.read_text().splitlines():
                code = line.split("#", 1)[0]
                code = re.sub(r"(\"[^\"]*\"|'[^']*')", "", code)  # strings (messages, docs) are not access
                for m in re.finditer(r"\b([A-Za-z_][\w.]*)\.(_[a-z]\w*)", code):
                    if m.group(1).split(".")[0] not in OWN:
                        found.add((rel, f"{m.group(1)}.{m.group(2)}"))
    assert found == ALLOWED_PRIVATE, f"unlisted: {sorted(found - ALLOWED_PRIVATE)}; listed but gone: {sorted(ALLOWED_PRIVATE - found)}"


def test_torchs_private_adam_kernel_is_used_only_in_the_lean_adam_module():
    """awnn/lean_adam.py is the one version-checked, switchable home of torch's
    private Adam kernel and of Adam's `_init_group` (issue #30)."""
    found = set()
    for pkg in ("awnn", "search", "tracking", "benchmarks"):
        for path in sorted((ROOT / pkg).rglob("*.py")):
            code = "\n".join(line.split("#", 1)[0] for line in path.read_text().splitlines())
            for name in ("_fused_adam", "_init_group", "_multi_tensor_adam"):
                if re.search(rf"\.{name}", code):  # (a prefix: _fused_adam_, _fused_adamw_)
                    found.add((path.relative_to(ROOT).as_posix(), name))
    assert found == {("awnn/lean_adam.py", "_fused_adam"), ("awnn/lean_adam.py", "_init_group")}, found


# what the repository's top level holds (the layout the README describes);
# anything else tracked there is a stray file (a command's output committed
# by mistake: an `out.txt` once was)
TOP_LEVEL = {".ci", ".env.example", ".gitignore", "Makefile", "constraints.txt", "README.md", "pyproject.toml", "docker-compose.yml",
             "awnn", "search", "tracking", "cluster", "tests", "benchmarks", "docs"}


def test_the_top_level_holds_only_the_projects_layout():
    import shutil
    import subprocess

    import pytest

    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout (an unpacked sdist): nothing tracked to check")
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    top = {p.split("/")[0] for p in tracked}
    assert top, "git ls-files listed nothing"
    assert top <= TOP_LEVEL, f"tracked at the top level but not part of the layout: {sorted(top - TOP_LEVEL)}"
