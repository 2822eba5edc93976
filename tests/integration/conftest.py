"""Fixtures the integration modules share (their helpers are in modules of their own, _s3.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration import _s3


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """A real S3 server on localhost, holding ``train/{ant,bee}/*.png`` (and the same images
    under the returned local folder); one per test module, always stopped."""
    pytest.importorskip("moto.server", reason="needs moto[server]")
    server, endpoint = _s3.start_server()
    try:
        root = tmp_path_factory.mktemp("local") / "train"
        _s3.upload(endpoint, root)
        yield endpoint, root
    finally:
        server.stop()
