"""editors/emacs/kernel-lsp.el in a real `emacs --batch` with eglot: the server starts for a kernel file and its
diagnostics reach flymake; the status command answers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.debian import ensure
from tests.server.kernels import TYPO, TYPO_LINE

pytestmark = pytest.mark.emacs

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def emacs() -> str:
    """Debian's emacs-nox with eglot, installed when missing where the tests may (tests/debian.py); else a skip.
    Decided when the test runs, not at collection: every pytest-xdist worker must collect the same tests, and an
    install under way on one worker must not make another one skip the module."""
    found, why_not = ensure("emacs", ["emacs-nox", "elpa-eglot"])
    if found is None:
        pytest.skip(why_not)
    probe = subprocess.run([found, "--batch", "--eval", "(progn (package-initialize) (require 'eglot))"],
                           check=False, capture_output=True, timeout=60)
    if probe.returncode != 0:
        pytest.skip("emacs is installed but eglot is not (apt-get install elpa-eglot)")
    return found


DRIVER = r"""
(package-initialize)
(add-to-list 'load-path (getenv "KERNEL_LSP_EL"))
(require 'kernel-lsp)
(require 'flymake)
(require 'json)
(setq kernel-lsp-command (list (getenv "KERNEL_LSP_PYTHON") "-P" "-m" "kernel_lsp" "serve"))
(setq kernel-lsp-settings '(:compile "off"))
(setq eglot-sync-connect t)
(kernel-lsp-setup)
(defun kl-wait (pred seconds)
  (let ((deadline (+ (float-time) seconds)))
    (while (and (not (funcall pred)) (< (float-time) deadline))
      (accept-process-output nil 0.05))
    (funcall pred)))
(find-file (getenv "KERNEL_LSP_FILE"))
;; The file's python-mode hook asked eglot to connect after the current command, as for a file opened by hand.
(run-hooks 'post-command-hook)
(let* ((server (kl-wait #'eglot-current-server 20))
       (found (kl-wait (lambda () (flymake-start nil t) (flymake-diagnostics)) 20))
       (status (and server (kernel-lsp-execute-command "kernel-lsp.status"))))
  (princ (json-encode
          (list :server (and server (symbol-name (eieio-object-class server)))
                :diagnostics (vconcat (mapcar (lambda (d)
                                                (list :line (1- (line-number-at-pos (flymake-diagnostic-beg d)))
                                                      :text (flymake-diagnostic-text d)))
                                              found))
                :statusCompile (and status (plist-get (plist-get status :compile) :mode)))))
  (terpri)
  (when server (eglot-shutdown server)))
"""


def run_driver(emacs: str, driver_text: str, kernel: Path, tmp_path: Path, marker: str, *, timeout: int) -> dict:
    """The JSON object a driver printed, from `emacs --batch` on `kernel` with editors/emacs on its load path."""
    driver = tmp_path / "driver.el"
    driver.write_text(driver_text)
    env = {"KERNEL_LSP_EL": str(ROOT / "editors" / "emacs"), "KERNEL_LSP_PYTHON": sys.executable,
           "KERNEL_LSP_FILE": str(kernel), "HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    run = subprocess.run([emacs, "--batch", "-l", str(driver)], check=False, capture_output=True, text=True,
                         timeout=timeout, env=env, cwd=tmp_path, stdin=subprocess.DEVNULL)
    # The server's one-time trust question leaves its minibuffer prompt in front of the printed result.
    lines = [line[line.index(marker):] for line in run.stdout.splitlines() if marker in line]
    assert run.returncode == 0 and lines, f"emacs failed:\n{run.stdout}\n{run.stderr}"
    return json.loads(lines[-1])


def test_eglot_shows_the_server_diagnostics_through_flymake(emacs: str, tmp_path: Path):
    (tmp_path / ".git").mkdir()  # the project root eglot uses
    kernel = tmp_path / "kernels.py"
    kernel.write_text(TYPO)
    result = run_driver(emacs, DRIVER, kernel, tmp_path, '{"server"', timeout=90)
    assert result["server"] == "kernel-lsp-server"
    typo = [d for d in result["diagnostics"] if "TR007" in d["text"]]
    assert typo and typo[0]["line"] == TYPO_LINE, result
    assert result["statusCompile"] == "off"  # kernel-lsp-settings arrived as initializationOptions


IR_DRIVER = r"""
(package-initialize)
(add-to-list 'load-path (getenv "KERNEL_LSP_EL"))
(require 'kernel-lsp)
(require 'json)
(setq kernel-lsp-command (list (getenv "KERNEL_LSP_PYTHON") "-P" "-m" "kernel_lsp" "serve"))
(setq kernel-lsp-settings '(:compile "open" :compileDebounceMs 0 :targets ["sm_90"] :compileWorkers 1
                            :pins (:add_kernel (:BLOCK 256))))
(setq eglot-sync-connect t)
(kernel-lsp-setup)
(defun kl-wait (pred seconds)
  (let ((deadline (+ (float-time) seconds)))
    (while (and (not (funcall pred)) (< (float-time) deadline))
      (accept-process-output nil 0.05))
    (funcall pred)))
(find-file (getenv "KERNEL_LSP_FILE"))
(run-hooks 'post-command-hook)
(let* ((server (kl-wait #'eglot-current-server 20))
       (root (and server (project-root (eglot--project server))))
       (source (current-buffer)))
  (goto-char (point-min))
  (search-forward "x = tl.load")
  (let* ((shown (kernel-lsp-show-ir "ttgir"))
         (ir-file buffer-file-name)
         (ir-line (line-number-at-pos))
         (backend (xref-find-backend)))
    ;; M-. on the IR line: the server's answer, not a tags table (which would prompt, and fail in batch).
    (xref-find-definitions (xref-backend-identifier-at-point backend))
    (princ (json-encode (list :root root :irFile ir-file :irLine ir-line :backend (symbol-name backend)
                              :jumpedTo buffer-file-name :jumpedLine (line-number-at-pos))))
    (terpri)
    (with-current-buffer source (eglot-shutdown server))))
"""


@pytest.mark.timeout(300)
def test_show_ir_and_the_jump_back_without_a_tags_table_in_a_project_without_git(emacs: str, tmp_path: Path):
    pytest.importorskip("triton")
    from tests.server.kernels import GOOD

    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'kernels'\n")  # no .git: the marker is the root
    (tmp_path / "pkg").mkdir()
    kernel = tmp_path / "pkg" / "kernels.py"
    kernel.write_text(GOOD)
    result = run_driver(emacs, IR_DRIVER, kernel, tmp_path, '{"root"', timeout=240)
    assert Path(result["root"]) == tmp_path  # the folder with pyproject.toml, not the file's own
    assert result["backend"] == "kernel-lsp-ir" and result["irFile"].endswith(".ttgir")
    assert result["jumpedTo"] == str(kernel)
    assert result["jumpedLine"] == GOOD.splitlines().index("    x = tl.load(x_ptr + offs, mask=mask)") + 1
