"""Materialise the public NKI kernels of bench/nki_corpus_manifest.json under a git-ignored folder.

    python bench/fetch_nki_corpus.py             # into bench/.nki-corpus/<project>/<path>

Files are read at each project's pinned commit, from a local mirror or a shallow fetch of that one commit (as
bench/fetch_corpus.py does for the Triton corpus). They are third-party code: never committed.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fetch_corpus

HERE = Path(__file__).resolve().parent
MANIFEST = HERE / "nki_corpus_manifest.json"
DEST = HERE / ".nki-corpus"


def materialise(dest: Path = DEST, mirrors: Path = Path("/work/.mirror")) -> dict[str, int]:
    return fetch_corpus.materialise(dest, None, mirrors, MANIFEST)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dest", default=str(DEST))
    ap.add_argument("--mirrors", default=os.environ.get("KERNEL_LSP_MIRRORS", "/work/.mirror"))
    args = ap.parse_args()
    counts = materialise(Path(args.dest), Path(args.mirrors))
    for name, n in counts.items():
        print(f"{name}: {n} files")
    print(f"{sum(counts.values())} files under {args.dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
