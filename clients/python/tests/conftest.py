"""Test rig: the real processor binary on its embedded nats-server, and a real nats-server for auth.

The binaries come from FOLDSTREAM_PROCESSOR / FOLDSTREAM_NATS_SERVER, else
bin/processor and bin/nats-server of the repository (``make test-python``
builds both), else they are built here with ``go build``. Without them the
suite skips, except with CI set, where it fails.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
PKG = HERE.parent
REPO = PKG.parent.parent
sys.path.insert(0, str(PKG))


def _missing(what: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"{what} (CI is set: the Python suite fails rather than skips without its prerequisites)")
    pytest.skip(what)


def _binary(env: str, name: str, pkg: str) -> Path:
    if os.environ.get(env):
        return Path(os.environ[env])
    path = REPO / "bin" / name
    if path.exists():
        return path
    if shutil.which("go") is None:
        _missing(f"{name}: not built and no go toolchain (set {env})")
    subprocess.run(["go", "build", "-o", str(path), pkg], cwd=REPO, check=True)
    return path


@pytest.fixture(scope="session")
def processor_bin() -> Path:
    return _binary("FOLDSTREAM_PROCESSOR", "processor", "./cmd/processor")


@pytest.fixture(scope="session")
def nats_server_bin() -> Path:
    return _binary("FOLDSTREAM_NATS_SERVER", "nats-server", "github.com/nats-io/nats-server/v2")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Proc:
    """A child process whose output lines are kept (JSON logs of the processor)."""

    def __init__(self, args: list[str], ready: str, cwd: Path | None = None, timeout: float = 30.0) -> None:
        self.args = args
        self.lines: list[str] = []
        self.p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=cwd)
        self._ready = threading.Event()
        self._want = ready
        threading.Thread(target=self._read, daemon=True).start()
        if not self._ready.wait(timeout):
            self.stop()
            raise RuntimeError(f"{args[0]} did not start ({ready!r} not seen):\n" + "\n".join(self.lines[-30:]))

    def _read(self) -> None:
        assert self.p.stdout is not None
        for line in self.p.stdout:
            self.lines.append(line.rstrip("\n"))
            if self._want in line:
                self._ready.set()

    def event(self, name: str) -> dict[str, object] | None:
        for line in self.lines:
            if f'"event":"{name}"' in line:
                return json.loads(line)  # type: ignore[no-any-return]
        return None

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.p.poll() is None:
            self.p.send_signal(sig)
            try:
                self.p.wait(15)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()


class Processor:
    """The processor binary on its embedded nats-server (offline summarizer)."""

    def __init__(self, binary: Path, store: Path, port: int | None = None, extra: list[str] | None = None) -> None:
        self.binary, self.store = binary, store
        self.port = port or free_port()
        self.extra = extra or []
        self.proc: Proc | None = None
        self.start()

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    def start(self) -> None:
        self.proc = Proc([str(self.binary), "--store-dir", str(self.store), "--embedded-port", str(self.port),
                          "--metrics-addr", "", "--flush-interval", "5ms", *self.extra], ready='"service_started"')

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc is not None:
            self.proc.stop(sig)

    def cli(self, *args: str) -> str:
        out = subprocess.run([str(self.binary), *args, "--nats-url", self.url], capture_output=True, text=True,
                             timeout=30)
        if out.returncode != 0:
            raise RuntimeError(f"processor {' '.join(args)}: {out.stderr}")
        return out.stdout


@pytest.fixture(scope="session")
def processor(processor_bin: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Processor]:
    p = Processor(processor_bin, tmp_path_factory.mktemp("store"))
    yield p
    p.stop()


_counter = iter(range(1, 1 << 30))


@pytest.fixture
def session(request: pytest.FixtureRequest) -> str:
    """A session id of its own for each test."""
    name = "".join(c if c.isalnum() else "-" for c in request.node.name)[:60]
    return f"py-{name}-{next(_counter)}-{int(time.time() * 1000) % 100000}"
