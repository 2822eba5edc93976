"""MkDocs hook: the benchmark plots are committed under bench/results/, where the bench writes
them; the performance page shows them from there, without a second copy under docs/."""

from __future__ import annotations

from pathlib import Path

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[1]


def on_files(files: Files, config, **kwargs) -> Files:  # noqa: ANN001 - MkDocs' hook signature
    for png in sorted((ROOT / "bench" / "results").rglob("*.png")):
        uri = png.relative_to(ROOT).as_posix()
        files.append(File(uri, src_dir=str(ROOT), dest_dir=config["site_dir"],
                          use_directory_urls=config["use_directory_urls"]))
    return files
