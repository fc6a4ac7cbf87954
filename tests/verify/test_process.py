"""The checking process's own failures: what the user reads when it exits early, and when its address space is
capped (a CUDA build of torch cannot even import under the cap, so it never gets one)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from kernel_lsp.engine.verify import CheckRequest, run_checks
from kernel_lsp.engine.verify.process import RUNNER

from tests.procs import alive, running_below
from tests.slow import scaled

REPO = Path(__file__).resolve().parents[2]


def one_spec(launcher: str) -> str:
    """A file whose one spec checks a copy kernel through `launcher`, the source of `def launch(x)`."""
    return textwrap.dedent('''
        import os
        import sys

        import torch
        import triton
        import triton.language as tl

        from kernel_lsp.spec import spec

        @triton.jit
        def copy_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)
    ''') + textwrap.dedent(launcher) + textwrap.dedent('''
        @spec(kernel=copy_kernel, launcher=launch, reference=lambda x: x.clone(), shapes=[(100,)], seeds=1)
        def inputs(shape, dtype, device):
            return (torch.randn(shape, dtype=dtype, device=device),)
    ''')


EXITS = one_spec('''
    def launch(x):
        out = torch.empty_like(x)
        copy_kernel[(1,)](x, out, x.numel(), BLOCK=128)
        print("native library: giving up on thread creation", file=sys.stderr, flush=True)
        os._exit(3)
''')


def _check(path: Path) -> object:
    return run_checks(CheckRequest(str(path), path.read_text(), timeout_s=scaled(10), device="interpreter"))


def test_an_exit_code_comes_with_what_the_process_last_wrote(tmp_path):
    during = tmp_path / "during.py"
    during.write_text(EXITS)
    (verdict,) = _check(during).verdicts
    assert verdict.status == "crashed" and "exited with code 3" in verdict.message
    assert "giving up on thread creation" in verdict.message

    before = tmp_path / "before.py"
    before.write_text("import os, sys\nprint('libfoo: cannot map segment', file=sys.stderr, flush=True)\n"
                      "os._exit(1)\n")
    report = _check(before)
    assert report.verdicts == ()
    ((_, message),) = report.errors
    assert "exited with code 1" in message and "libfoo: cannot map segment" in message


def _runner_probe(tmp_path: Path, code: str, torch_libs: list[str] | None = None) -> str:
    """Run `code` in a fresh interpreter with the runner importable; with `torch_libs`, a stand-in torch package
    holding those library files shadows the real one."""
    path = [str(REPO)]
    if torch_libs is not None:
        lib = tmp_path / "fake" / "torch" / "lib"
        lib.mkdir(parents=True)
        (lib.parent / "__init__.py").write_text("")
        for name in torch_libs:
            (lib / name).write_bytes(b"")
        path.insert(0, str(tmp_path / "fake"))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(path)}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60,
                          check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_only_a_cpu_build_of_torch_counts_as_safe_to_cap(tmp_path):
    ask = "from kernel_lsp.engine.verify.runner import torch_is_cpu_build; print(torch_is_cpu_build())"
    assert _runner_probe(tmp_path / "cpu", ask, ["libtorch_cpu.so", "libc10.so"]) == "True"
    assert _runner_probe(tmp_path / "cuda", ask, ["libtorch_cpu.so", "libtorch_cuda.so", "libc10_cuda.so"]) == "False"
    assert _runner_probe(tmp_path / "rocm", ask, ["libtorch_cpu.so", "libtorch_hip.so"]) == "False"


def test_the_cap_leaves_room_for_the_limit_and_stops_what_exceeds_it(tmp_path):
    out = _runner_probe(tmp_path, textwrap.dedent('''
        from kernel_lsp.engine.verify.runner import cap_address_space, _vm_size_mb
        before = _vm_size_mb()
        cap = cap_address_space(300)
        room = bytearray(250 * 2**20)
        try:
            bytearray((cap + 64) * 2**20)
            print(cap > before, "not stopped")
        except MemoryError:
            print(cap > before + 300, "stopped")
    '''))
    assert out == "True stopped"


def test_modules_in_the_workspace_do_not_shadow_the_checkers(tmp_path):
    # The checking process starts in the workspace: without -P its folder would come first on the import path,
    # ahead of the standard library and kernel_lsp itself, before anything asked whether to run its code.
    marker = tmp_path / "shadowed"
    for module in ("secrets.py", "json.py", "kernel_lsp/__init__.py"):
        (tmp_path / module).parent.mkdir(exist_ok=True)
        (tmp_path / module).write_text(f"open({str(marker)!r}, 'a').write({module!r})\n")
    example = Path(__file__).resolve().parents[2] / "examples" / "vector_add.py"
    (tmp_path / "helper_module.py").write_text("VALUE = 1\n")
    path = tmp_path / "vector_add.py"
    path.write_text("import helper_module  # a sibling, imported on purpose\n" + example.read_text())
    report = run_checks(CheckRequest(str(path), path.read_text(), device="interpreter", root=str(tmp_path)))
    assert [v.status for v in report.verdicts] == ["correct"], report
    assert not marker.exists(), marker.read_text()
    assert not (tmp_path / "__pycache__").exists()  # the check writes nothing into the workspace


SPINS = one_spec('''
    def launch(x):
        open(__file__ + ".spinning", "w").close()  # past every event the checker writes before the launch
        while True:
            pass
''')

# Starts a check of the file named by argv[1] with a time limit of an hour, in a process the test kills.
STARTER = textwrap.dedent('''
    import sys
    from kernel_lsp.engine.verify import CheckRequest, run_checks
    path = sys.argv[1]
    run_checks(CheckRequest(path, open(path).read(), timeout_s=3600, device="interpreter"))
''')


def test_a_checking_process_ends_when_the_process_that_started_it_is_killed(tmp_path):
    if not os.path.isdir("/proc"):
        pytest.skip("finds processes through /proc")
    path = tmp_path / "spins.py"
    path.write_text(SPINS)
    starter = subprocess.Popen([sys.executable, "-c", STARTER, str(path)], cwd=REPO)
    try:
        deadline = time.monotonic() + scaled(120)
        while not (Path(str(path) + ".spinning").exists()
                   and (checking := running_below(starter.pid, RUNNER))):
            assert starter.poll() is None and time.monotonic() < deadline, "the check did not reach its launcher"
            time.sleep(0.2)
        starter.kill()  # no cancel, no cleanup: the check's own time limit (an hour) is what is left
        starter.wait()
        deadline = time.monotonic() + scaled(60)
        while alive(checking[0]):  # until gone, or a zombie of whoever adopted it
            if time.monotonic() > deadline:
                os.kill(checking[0], 9)
                raise AssertionError("the checking process outlived the process that started it")
            time.sleep(0.2)
    finally:
        if starter.poll() is None:
            starter.kill()
            starter.wait()
