"""``bench.remote``'s stores and the delay in front of them, each in processes of its own:

- ``Nginx``: nginx from the system's packages serving a folder over ``http://`` (range reads,
  sendfile, 2 worker processes): a store that answers in parallel (issue 39 §5). The bench
  installs nothing: ``nginx_binary()`` is None where nginx is missing, and the bench says so.
- ``start_moto``: moto's S3 server (one Python process, one core: the S3 semantics, and the
  store of the peers that read only ``s3://``).
- ``DelayProxy``: ``PROXIES`` asyncio processes on one port (``SO_REUSEPORT``: the kernel
  spreads connections over them) that hold each chunk a client sends ``delay_s`` before
  forwarding it, so each request pays the delay before its first byte, as a bucket's 10-100 ms
  do, without a thread asleep per connection. Each process counts the requests it forwards
  (chunks that open with an HTTP method) and the bytes it returns, in a file any process can
  read (``Counter``): the requests and bytes an epoch read from the store, whoever read them.
"""

from __future__ import annotations

import asyncio
import mmap
import multiprocessing
import os
import re
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BUCKET = "shmaug-bench"
OPTIONS = {"key": "bench", "secret": "bench-secret"}
PROXIES = 2  # delaying processes per proxy
_START_S = 30.0  # a store or proxy that does not listen by then has failed
_SLOT = struct.Struct("<qq")  # requests, bytes: one slot per proxy process
_METHOD = re.compile(rb"^(GET|HEAD|PUT|POST|DELETE) ")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_listening(port: int, alive: Any, what: str) -> None:
    deadline = time.monotonic() + _START_S
    while time.monotonic() < deadline and alive():
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"{what} did not listen on port {port} within {_START_S:.0f} s")


def start_moto() -> tuple[subprocess.Popen[bytes], int]:
    """moto's S3 server in a process of its own (it must not share the loader's GIL)."""
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p",
                               str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_listening(port, lambda: server.poll() is None, "moto's S3 server")
    except RuntimeError:
        server.kill()
        raise
    return server, port


def nginx_binary() -> str | None:
    """nginx's path, or None: the bench installs nothing (``apt-get install nginx``)."""
    found = shutil.which("nginx")
    if found is None and os.access("/usr/sbin/nginx", os.X_OK):  # not on a user's PATH
        found = "/usr/sbin/nginx"
    return found


class Nginx:
    """nginx serving ``root`` on localhost (range reads, sendfile, ``workers`` processes, no
    access log); ``pids()`` are the master's and its workers' for their CPU."""

    def __init__(self, root: Path, workers: int = 2) -> None:
        binary = nginx_binary()
        if binary is None:
            raise RuntimeError("nginx is not installed (e.g. apt-get install nginx)")
        self.prefix = Path(tempfile.mkdtemp(prefix="bench-nginx-"))
        self.port = free_port()
        for folder in (root, *root.parents):  # nginx's workers may run as nobody
            if folder == Path(tempfile.gettempdir()):
                break
            folder.chmod(0o755)
        temp = " ".join(f"{k}_temp_path {self.prefix}/{k};" for k in
                        ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
        (self.prefix / "nginx.conf").write_text(
            f"daemon off; worker_processes {workers}; pid {self.prefix}/nginx.pid;\n"
            f"error_log {self.prefix}/error.log warn;\n"
            "events { worker_connections 4096; }\n"
            f"http {{ access_log off; sendfile on; tcp_nopush on; keepalive_requests 1000000; "
            f"{temp}\n"
            f"  server {{ listen 127.0.0.1:{self.port}; root {root}; autoindex on; }} }}\n")
        self.process = subprocess.Popen([binary, "-p", str(self.prefix), "-c",
                                         str(self.prefix / "nginx.conf")],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            wait_listening(self.port, lambda: self.process.poll() is None, "nginx")
        except RuntimeError as e:
            self.close()
            raise RuntimeError(f"{e}: {(self.prefix / 'error.log').read_text()[-500:]}") from e

    def pids(self) -> list[int]:
        import psutil

        master = psutil.Process(self.process.pid)
        return [master.pid, *(c.pid for c in master.children())]

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.process.stderr is not None:
            self.process.stderr.close()
        shutil.rmtree(self.prefix, ignore_errors=True)


def cpu_of(pids: list[int]) -> float:
    """CPU seconds (user + system) the processes ``pids`` have used, those gone counting 0."""
    import psutil

    total = 0.0
    for pid in pids:
        try:
            total += sum(psutil.Process(pid).cpu_times()[:2])
        except psutil.NoSuchProcess:
            pass
    return total


class Counter:
    """The requests and bytes the processes of one ``DelayProxy`` forwarded, read from its
    file by any process (each proxy process writes its own slot)."""

    def __init__(self, path: str) -> None:
        self.path = path

    def read(self) -> tuple[int, int]:
        with open(self.path, "rb") as f:
            data = f.read()
        slots = [_SLOT.unpack_from(data, k * _SLOT.size) for k in range(len(data) // _SLOT.size)]
        return sum(s[0] for s in slots), sum(s[1] for s in slots)


def _serve(target: tuple[str, int], port: int, delay_s: float, path: str, slot: int) -> None:
    """One delaying proxy process: asyncio, forwarding client chunks after ``delay_s``."""
    with open(path, "r+b") as f:
        counts = mmap.mmap(f.fileno(), 0)
    done = [0, 0]

    def note(requests: int, sent: int) -> None:
        done[0] += requests
        done[1] += sent
        _SLOT.pack_into(counts, slot * _SLOT.size, *done)

    async def pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, up: bool) -> None:
        try:
            while chunk := await reader.read(1 << 16):
                if up:
                    note(1 if _METHOD.match(chunk) else 0, 0)
                    if delay_s:
                        await asyncio.sleep(delay_s)
                else:
                    note(0, len(chunk))
                writer.write(chunk)
                await writer.drain()
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    async def connect(client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        try:
            server_r, server_w = await asyncio.open_connection(*target)
        except OSError:
            client_w.close()
            return
        await asyncio.gather(pump(client_r, server_w, True), pump(server_r, client_w, False))

    async def main() -> None:
        server = await asyncio.start_server(connect, "127.0.0.1", port, reuse_port=True,
                                            backlog=1024)
        async with server:
            await server.serve_forever()

    asyncio.run(main())


class DelayProxy:
    """``PROXIES`` processes on one port in front of ``target`` delaying every request by
    ``delay_s``; ``counter`` counts what they forward, ``pids`` are theirs for their CPU."""

    def __init__(self, target: tuple[str, int], delay_s: float) -> None:
        self.target, self.delay_s = target, delay_s
        fd, path = tempfile.mkstemp(prefix="bench-proxy-", suffix=".counts")
        os.write(fd, bytes(_SLOT.size * PROXIES))
        os.close(fd)
        self.counter = Counter(path)
        self.port = free_port()
        context = multiprocessing.get_context("fork")  # before any loader starts; no threads
        self.processes = [context.Process(target=_serve, args=(target, self.port, delay_s,
                                                                path, k), daemon=True)
                          for k in range(PROXIES)]
        for process in self.processes:
            process.start()
        wait_listening(self.port, lambda: all(p.is_alive() for p in self.processes),
                       "the delaying proxy")

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.processes if p.pid is not None]

    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def options(self) -> dict[str, Any]:
        """``storage_options`` that reach an S3 server through this proxy."""
        return {**OPTIONS, "client_kwargs": {"endpoint_url": self.url(),
                                             "region_name": "us-east-1"}}

    def close(self) -> None:
        for process in self.processes:
            process.terminate()
        for process in self.processes:
            process.join(timeout=5)
        os.unlink(self.counter.path)
