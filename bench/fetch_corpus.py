"""Materialise the public Triton corpus of bench/corpus_manifest.json under a git-ignored folder.

    python bench/fetch_corpus.py                 # into bench/.corpus/<project>/<path>
    python bench/fetch_corpus.py --dest DIR --project kernl
    python bench/fetch_corpus.py --manifest bench/corpus2_manifest.json --half tuning --dest bench/.corpus2-tuning

Each project's files are read at the manifest's pinned commit: from a local bare mirror when there is one
(`--mirrors`, default /work/.mirror/<owner>+<name>/repo), else from a shallow fetch of that one commit from
GitHub into a cache folder next to the corpus. The files are third-party code: they stay in the ignored folder
and are never committed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
MANIFEST = HERE / "corpus_manifest.json"


def _git(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], capture_output=True, check=check)


def _has_commit(git_dir: Path, commit: str) -> bool:
    return git_dir.is_dir() and _git(f"--git-dir={git_dir}", "cat-file", "-e", f"{commit}^{{commit}}",
                                     check=False).returncode == 0


def _source_repo(project: dict, mirrors: Path, cache: Path) -> Path:
    """A git dir that holds the pinned commit: the local mirror, else a shallow fetch of just that commit."""
    mirror = mirrors / project["repo"].replace("/", "+") / "repo"
    if _has_commit(mirror, project["commit"]):
        return mirror
    git_dir = cache / (project["repo"].replace("/", "+") + ".git")
    if not _has_commit(git_dir, project["commit"]):
        if not git_dir.is_dir():
            _git("init", "--bare", "-q", str(git_dir))
        # GitHub serves a commit by id to a shallow fetch, so the full history is never downloaded.
        _git(f"--git-dir={git_dir}", "fetch", "-q", "--depth", "1", f"https://github.com/{project['repo']}.git",
             project["commit"])
    return git_dir


def materialise(dest: Path, only: set[str] | None = None, mirrors: Path = Path("/work/.mirror"),
                manifest_path: Path = MANIFEST, half: str | None = None) -> dict[str, int]:
    """Each manifest file at its pinned commit under `dest/<project>/`; files written per project.

    `half` keeps only the projects of that half ("tuning" or "held-out") of a split manifest."""
    manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    counts = {}
    for project in manifest["projects"]:
        if only and project["name"] not in only:
            continue
        if half and project.get("half") != half:
            continue
        git_dir = _source_repo(project, mirrors, dest / ".git-cache")
        written = 0
        for rel in project["files"]:
            blob = _git(f"--git-dir={git_dir}", "show", f"{project['commit']}:{rel}", check=False)
            if blob.returncode != 0:
                print(f"{project['name']}: {rel} not at {project['commit'][:12]}", file=sys.stderr)
                continue
            out = dest / project["name"] / rel
            out.parent.mkdir(parents=True, exist_ok=True)
            if not out.exists() or out.read_bytes() != blob.stdout:
                out.write_bytes(blob.stdout)
            written += 1
        counts[project["name"]] = written
    return counts


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dest", default=str(HERE / ".corpus"))
    ap.add_argument("--project", action="append", help="only this project (repeatable)")
    ap.add_argument("--mirrors", default=os.environ.get("KERNEL_LSP_MIRRORS", "/work/.mirror"))
    ap.add_argument("--manifest", default=str(MANIFEST), help="another manifest, e.g. bench/corpus2_manifest.json")
    ap.add_argument("--half", choices=("tuning", "held-out"), help="only this half of a split manifest")
    args = ap.parse_args()
    counts = materialise(Path(args.dest), set(args.project) if args.project else None, Path(args.mirrors),
                         Path(args.manifest), args.half)
    for name, n in counts.items():
        print(f"{name}: {n} files")
    print(f"{sum(counts.values())} files under {args.dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
