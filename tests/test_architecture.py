"""The layering of docs/architecture.md, checked on the source: each layer imports only the ones below it.

Imports are read with `ast` (also those inside functions), so a lazy import cannot slip past, and relative imports
are resolved to the module they name.
"""

from __future__ import annotations

import ast
from pathlib import Path

from analyzers.source import parse_python

ROOT = Path(__file__).resolve().parent.parent
PROTOCOL_LIBRARIES = {"lsprotocol", "pygls"}
# The protocol layer: the only modules that may speak LSP.
PROTOCOL_LAYER = ("kernel_lsp/server.py", "kernel_lsp/transport.py", "kernel_lsp/convert.py", "kernel_lsp/features/")


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _type_checking_only(tree: ast.Module) -> set[int]:
    """ids of the import nodes inside `if TYPE_CHECKING:` blocks (read by type checkers, never run)."""
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING"):
            inside |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    return inside


def imports_of(path: Path, root: Path = ROOT, at_run_time: bool = False) -> list[tuple[str, int]]:
    """Every module a file imports, absolute, with its line: `from ..model import X` in analyzers/rules/a.py is
    analyzers.model (and analyzers.model.X, in case X is a module). `at_run_time`: leave out the imports made for
    type checkers only."""
    name = module_name(path, root)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: list[tuple[str, int]] = []
    tree = parse_python(path.read_text())
    skipped = _type_checking_only(tree) if at_run_time else set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            found.append((module, node.lineno))
            found += [(f"{module}.{alias.name}", node.lineno) for alias in node.names]
    return found


def sources(*folders: str) -> list[Path]:
    return sorted(p for folder in folders for p in (ROOT / folder).rglob("*.py"))


def violations(files: list[Path], forbidden, allowed: dict[str, set[str]] | None = None,
               root: Path = ROOT, at_run_time: bool = False) -> list[str]:
    """`file:line imports module` for each import whose module is (or is inside) one of `forbidden`."""
    allowed = allowed or {}
    out = []
    for path in files:
        rel = str(path.relative_to(root))
        for module, line in imports_of(path, root, at_run_time):
            for bad in forbidden:
                if (module == bad or module.startswith(bad + ".")) and bad not in allowed.get(rel, set()):
                    out.append(f"{rel}:{line} imports {module}")
    return sorted(set(out))


def test_analyzers_import_nothing_above_them():
    """analyzers/ is pure analysis: no kernel_lsp, no protocol, no event loop or processes, no triton or torch.
    gen_triton_names is the developer tool that regenerates the static name list from an installed triton."""
    forbidden = {"kernel_lsp", *PROTOCOL_LIBRARIES, "asyncio", "multiprocessing", "subprocess", "concurrent",
                 "torch", "triton", "anthropic", "watchdog"}
    assert violations(sources("analyzers"), forbidden, {"analyzers/gen_triton_names.py": {"triton"}}) == []


def test_engine_imports_no_protocol_library_nor_the_protocol_layer():
    forbidden = {*PROTOCOL_LIBRARIES, "kernel_lsp.server", "kernel_lsp.transport", "kernel_lsp.convert",
                 "kernel_lsp.features", "kernel_lsp.cli", "kernel_lsp.report"}
    assert violations(sources("kernel_lsp/engine"), forbidden) == []


def test_protocol_libraries_are_used_only_in_the_protocol_layer():
    outside = [p for p in sources("kernel_lsp", "analyzers")
               if not str(p.relative_to(ROOT)).startswith(PROTOCOL_LAYER)]
    assert violations(outside, PROTOCOL_LIBRARIES) == []


def test_nothing_climbs_back_up_into_the_server():
    """The server holds the session and the documents and registers the features; what a request needs beyond that
    (checks, timing, compiles, CUDA documents, profiles) lives in the features and the engine, so no module calls
    back into server.py's module at run time (a type annotation may name the server class). Only the command line
    builds the server."""
    files = [p for p in sources("kernel_lsp") if p.relative_to(ROOT).as_posix() not in ("kernel_lsp/server.py",
                                                                                          "kernel_lsp/cli.py")]
    assert violations(files, {"kernel_lsp.server"}, at_run_time=True) == []


def test_the_import_check_sees_relative_and_lazy_imports(tmp_path):
    """The checks above would pass vacuously if imports_of missed the spellings the code base uses."""
    pkg = tmp_path / "analyzers" / "rules"
    pkg.mkdir(parents=True)
    (tmp_path / "analyzers" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    bad = pkg / "bad.py"
    bad.write_text("from ...kernel_lsp import server\n\ndef f():\n    import lsprotocol.types\n"
                   "    from .. import model\n")
    found = violations([bad], {"kernel_lsp", "lsprotocol", "analyzers.model"}, root=tmp_path)
    assert found == ["analyzers/rules/bad.py:1 imports kernel_lsp",
                     "analyzers/rules/bad.py:1 imports kernel_lsp.server",
                     "analyzers/rules/bad.py:4 imports lsprotocol.types",
                     "analyzers/rules/bad.py:5 imports analyzers.model"]
    typed = pkg / "typed.py"
    typed.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ...kernel_lsp import server\n"
                     "else:\n    from ...kernel_lsp import cli\n")
    assert violations([typed], {"kernel_lsp"}, root=tmp_path, at_run_time=True) == [
        "analyzers/rules/typed.py:5 imports kernel_lsp", "analyzers/rules/typed.py:5 imports kernel_lsp.cli"]
    assert len(violations([typed], {"kernel_lsp"}, root=tmp_path)) == 4



# What a user sees, built from analysis results: only convert.py makes these (through the negotiated position
# encoding). Requests, options and report envelopes around them are the features' own plumbing.
RESULT_TYPES = {"Diagnostic", "DiagnosticRelatedInformation", "CodeAction", "CodeActionDisabled", "CodeLens",
                "Command", "Hover", "MarkupContent", "InlayHint", "DocumentSymbol", "WorkspaceSymbol", "Location",
                "TextEdit", "AnnotatedTextEdit", "TextDocumentEdit", "WorkspaceEdit"}


def protocol_objects_built(path: Path) -> list[tuple[str, int]]:
    """(type, line) of each lsprotocol result type constructed in a file, however `types` is imported."""
    tree = parse_python(path.read_text())
    modules: set[str] = set()
    names: dict[str, str] = {}  # local name -> lsprotocol type
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "lsprotocol":
            modules |= {a.asname or a.name for a in node.names if a.name == "types"}
        elif isinstance(node, ast.ImportFrom) and node.module == "lsprotocol.types":
            names.update({a.asname or a.name: a.name for a in node.names})
        elif isinstance(node, ast.Import):
            modules |= {a.asname or a.name for a in node.names if a.name == "lsprotocol.types"}
    built = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        if isinstance(f, ast.Attribute) and ast.unparse(f.value) in modules and f.attr in RESULT_TYPES:
            built.append((f.attr, node.lineno))
        elif isinstance(f, ast.Name) and names.get(f.id) in RESULT_TYPES:
            built.append((names[f.id], node.lineno))
    return built


def test_protocol_results_are_built_only_in_convert():
    found = [f"{p.relative_to(ROOT)}:{line} builds {kind}" for p in sources("kernel_lsp")
             if p.name != "convert.py" or p.parent.name != "kernel_lsp" for kind, line in protocol_objects_built(p)]
    assert found == [], "add a function to kernel_lsp/convert.py and call it"


def test_the_protocol_object_check_sees_every_spelling(tmp_path):
    path = tmp_path / "feature.py"
    path.write_text("from lsprotocol import types\nfrom lsprotocol.types import Hover as H\nimport lsprotocol.types\n"
                    "a = types.CodeLens(range=None)\nb = H(contents='')\nc = lsprotocol.types.InlayHint()\n"
                    "d = types.CodeLensOptions(resolve_provider=False)\n")
    assert sorted(protocol_objects_built(path)) == [("CodeLens", 4), ("Hover", 5), ("InlayHint", 6)]


# The engine services behind the Python API's compiles, checks, timing and tiling search: the language server
# reaches them through `kernel_lsp.api.Workspace` (compile_buffer, ir_buffer, check_buffer, measure_buffer,
# tune_buffer), as the command line and the MCP server do, so the three front ends cannot drift apart. Reading the
# timing history (latency.history) is the features' own business.
API_WRAPPED_SERVICES = {
    "kernel_lsp.engine.batch",
    "kernel_lsp.engine.verify.runner", "kernel_lsp.engine.verify.process",
    "kernel_lsp.engine.verify.run_checks", "kernel_lsp.engine.verify.CheckRequest",
    "kernel_lsp.engine.latency.measure_file", "kernel_lsp.engine.latency.estimate_file",
    "kernel_lsp.engine.latency.record_estimates", "kernel_lsp.engine.latency.count_work",
    "kernel_lsp.engine.latency.run_worker", "kernel_lsp.engine.latency.roofline",
    "kernel_lsp.engine.latency.timing", "kernel_lsp.engine.latency.counting", "kernel_lsp.engine.latency.worker",
    "kernel_lsp.engine.latency.search_tiling", "kernel_lsp.engine.latency.search",
    "kernel_lsp.engine.compile.service",
}
# The engine's reports of those services, and what reads them: the language server keeps and shows the API's
# result types (CheckResult, ...), the same the command line and the MCP server print, not these.
ENGINE_REPORTS = {
    "kernel_lsp.engine.verify.CheckReport", "kernel_lsp.engine.verify.Verdict", "kernel_lsp.engine.verify.CaseResult",
    "kernel_lsp.engine.verify.results", "kernel_lsp.engine.verify.findings",
    "kernel_lsp.engine.latency.LatencyReport", "kernel_lsp.engine.latency.KernelLatency",
    "kernel_lsp.engine.latency.TilingProposal", "kernel_lsp.engine.latency.Tried",
    "kernel_lsp.engine.compile.service.KernelCompileReport", "kernel_lsp.engine.compile.service.JobReport",
    "kernel_lsp.engine.compile.jobs.CompileResult", "kernel_lsp.engine.compile.jobs.CompileJob",
}
LANGUAGE_SERVER = ("kernel_lsp/server.py", "kernel_lsp/background.py", "kernel_lsp/features/")


def module_attributes_used(path: Path, root: Path = ROOT) -> list[tuple[str, int]]:
    """`module.attr` for each attribute read through an imported name (`import kernel_lsp.engine.latency as lat`
    then `lat.measure_file`, or `from ..engine import latency` then `latency.measure_file`), absolute, with its
    line: what an import check alone would not see."""
    name = module_name(path, root)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    tree = parse_python(path.read_text())
    bound: dict[str, str] = {}  # local name -> the module (or object) it names
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            bound.update({a.asname: a.name for a in node.names if a.asname})
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            bound.update({a.asname or a.name: f"{module}.{a.name}" for a in node.names})
    return [(f"{bound[node.value.id]}.{node.attr}", node.lineno) for node in ast.walk(tree)
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in bound]


def service_uses(files: list[Path], root: Path = ROOT) -> list[str]:
    out = []
    for path in files:
        rel = path.relative_to(root).as_posix()
        for used, line in imports_of(path, root, at_run_time=True) + module_attributes_used(path, root):
            if any(used == bad or used.startswith(bad + ".") for bad in API_WRAPPED_SERVICES):
                out.append(f"{rel}:{line} uses {used}")
    return sorted(set(out))


def report_uses(files: list[Path], root: Path = ROOT) -> list[str]:
    """Where `files` name an engine report type, also in imports made for type checkers only: a feature that
    annotates with one keeps it."""
    out = []
    for path in files:
        rel = path.relative_to(root).as_posix()
        for used, line in imports_of(path, root) + module_attributes_used(path, root):
            if any(used == bad or used.startswith(bad + ".") for bad in ENGINE_REPORTS):
                out.append(f"{rel}:{line} uses {used}")
    return sorted(set(out))


def test_the_language_server_reaches_checks_and_timing_through_the_api():
    files = [p for p in sources("kernel_lsp") if p.relative_to(ROOT).as_posix().startswith(LANGUAGE_SERVER)]
    assert files and service_uses(files) == [], "call kernel_lsp.api.Workspace (add the method the editor needs)"


def test_the_language_server_keeps_the_api_result_types():
    files = [p for p in sources("kernel_lsp") if p.relative_to(ROOT).as_posix().startswith(LANGUAGE_SERVER)]
    assert files and report_uses(files) == [], "keep the kernel_lsp.api result (add the field the editor needs)"


def _feature_module(root, source: str):
    """`root/kernel_lsp/features/bad.py` holding `source`, inside packages as the real feature modules are."""
    features = root / "kernel_lsp" / "features"
    features.mkdir(parents=True)
    for folder in (root / "kernel_lsp", features):
        (folder / "__init__.py").write_text("")
    bad = features / "bad.py"
    bad.write_text(source)
    return bad


def test_the_report_check_sees_every_spelling(tmp_path):
    bad = _feature_module(tmp_path, "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from ..engine.verify import CheckReport\n"
                   "from ..engine import verify\nimport kernel_lsp.engine.verify.findings as f\n\n"
                   "def g(r: 'CheckReport'):\n    return verify.Verdict, f.summary\n\n"
                   "def h():\n    from ..engine.latency import LatencyReport as R\n    return R\n")
    assert report_uses([bad], tmp_path) == [
        "kernel_lsp/features/bad.py:12 uses kernel_lsp.engine.latency.LatencyReport",
        "kernel_lsp/features/bad.py:4 uses kernel_lsp.engine.verify.CheckReport",
        "kernel_lsp/features/bad.py:6 uses kernel_lsp.engine.verify.findings",
        "kernel_lsp/features/bad.py:9 uses kernel_lsp.engine.verify.Verdict",
        "kernel_lsp/features/bad.py:9 uses kernel_lsp.engine.verify.findings.summary"]


def test_the_service_check_sees_imports_and_module_attributes(tmp_path):
    bad = _feature_module(tmp_path, "from ..engine.verify import run_checks\n\ndef f():\n    from ..engine import latency\n"
                   "    import kernel_lsp.engine.batch as b\n    latency.estimate_file()\n    b.check_with()\n"
                   "    return latency.history_name\n")
    assert service_uses([bad], tmp_path) == [
        "kernel_lsp/features/bad.py:1 uses kernel_lsp.engine.verify.run_checks",
        "kernel_lsp/features/bad.py:5 uses kernel_lsp.engine.batch",
        "kernel_lsp/features/bad.py:6 uses kernel_lsp.engine.latency.estimate_file",
        "kernel_lsp/features/bad.py:7 uses kernel_lsp.engine.batch.check_with"]
