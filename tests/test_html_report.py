"""`kernel-lsp report`: the page a user opens, rendered by a real headless Chromium (Debian's `chromium`), with a
screenshot whose pixels show the roofline chart was drawn."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


def _chromium() -> str:
    """Debian's chromium, installed with apt-get when missing and this user may; else the test is skipped."""
    from tests.debian import ensure

    found, why = ensure("chromium", ["chromium"])
    if found is None:
        pytest.skip(why)
    return found


# Compiling for two targets, checking two specs on the interpreter and estimating them takes minutes on a busy
# 2-core machine.
pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="module")
def page(tmp_path_factory) -> Path:
    """A report on two examples with a spec each, checked on the interpreter and estimated for two devices."""
    pytest.importorskip("torch")
    pytest.importorskip("triton")
    pytest.importorskip("plotly")
    ws = tmp_path_factory.mktemp("ws")
    for name in ("vector_add.py", "fused_softmax.py"):
        shutil.copy(EXAMPLES / name, ws / name)
    out = ws / "report.html"
    done = subprocess.run([sys.executable, "-m", "kernel_lsp", "report", ".", "-o", str(out), "--run-checks", "--check-device",
                           "interpreter", "--target", "sm_90,sm_80"], cwd=ws, capture_output=True, text=True,
                          timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"wrote {out}" in done.stderr
    return out


def test_page_content_per_kernel(page):
    text = page.read_text(encoding="utf-8")
    # Self-contained: plotly's script is inline, nothing is fetched.
    assert not re.search(r"<script[^>]+src=", text) and "Plotly.newPlot" in text
    for kernel in ("add_kernel", "softmax_kernel"):
        section = text.split(f"<h3 id='{kernel}'>", 1)[1].split("<div class='kernel'>", 1)[0]
        assert "<span class='badge correct'>correct</span>" in section
        assert "Latency per shape" in section and "(estimated)" in section
        assert "History per device" in section and "<td>H200</td>" in section and "<td>A100</td>" in section
    add = text.split("<h3 id='add_kernel'>", 1)[1]
    assert re.search(r"<td>sm_90</td><td>BLOCK_SIZE=1024</td><td>ok</td><td class='num'>\d+</td>", add)
    assert "estimates, not measurements" in text
    assert "Roofline on H200" in text and "Roofline on A100" in text


def test_chromium_renders_the_roofline(page, tmp_path):
    from PIL import Image

    from kernel_lsp.html_report import KERNEL_COLORS

    chromium = _chromium()
    base = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
            f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=15000"]
    dom = subprocess.run([*base, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=180,
                         check=False)
    assert dom.returncode == 0, dom.stderr[-2000:]
    # plotly drew both charts into SVG, with one marker per kernel and device.
    assert dom.stdout.count('class="main-svg"') >= 4, dom.stdout[:2000]
    assert len(re.findall(r'class="point"', dom.stdout)) >= 4

    shot = tmp_path / "report.png"
    done = subprocess.run([*base, "--window-size=1280,1000", f"--screenshot={shot}", page.as_uri()],
                          capture_output=True, text=True, timeout=180, check=False)
    assert done.returncode == 0 and shot.exists(), done.stderr[-2000:]
    image = Image.open(shot).convert("RGB")
    assert image.size == (1280, 1000)
    pixels = list(image.get_flattened_data())
    # The first chart is in view: its kernels' markers are drawn in their colours.
    for color in KERNEL_COLORS[:2]:
        rgb = tuple(int(color[i:i + 2], 16) for i in (1, 3, 5))
        near = sum(1 for p in pixels if all(abs(a - b) <= 12 for a, b in zip(p, rgb)))
        assert near >= 40, f"no marker of colour {color} in the screenshot ({near} pixels)"
    # And the page is not blank: text, tables and lines cover a few percent of it.
    drawn = sum(1 for p in pixels if min(p) < 200)
    assert drawn > len(pixels) // 100, drawn


def test_report_of_a_missing_path_is_a_usage_error(tmp_path):
    done = subprocess.run([sys.executable, "-m", "kernel_lsp", "report", str(tmp_path / "missing.py"), "-o",
                           str(tmp_path / "r.html"), "--no-checks"], capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 2 and "no such file or directory" in done.stderr
    text = (tmp_path / "r.html").read_text()
    assert "no spec was checked and no kernel timed (--no-checks)" in text and "missing.py" in text
