"""The docs' quick start and the examples run as printed."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import PKG, REPO, Processor


def _run(code: str, processor: Processor, *args: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(PKG), "NATS_URL": processor.url}
    out = subprocess.run([sys.executable, *args], input=code, capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout


def _quickstart(path: str) -> str:
    text = (REPO / path).read_text(encoding="utf-8")
    m = re.search(r"```python\n(.*?)```", text, re.S)
    assert m, f"{path}: no python block"
    return m.group(1)


def test_clients_md_quickstart(processor: Processor) -> None:
    code = _quickstart("docs/clients.md")
    assert len(code.strip().splitlines()) <= 15
    out = _run(code.replace("nats://127.0.0.1:4222", processor.url), processor, "-")
    assert out.rstrip("\n").splitlines() == ["Alice: I'm flying to Lisbon on May 3rd.", "Bot: Noted: Lisbon, May 3rd."]


def test_readme_quickstart(processor: Processor) -> None:
    code = _quickstart("clients/python/README.md")
    assert len(code.strip().splitlines()) <= 15
    out = _run(code.replace("nats://127.0.0.1:4222", processor.url), processor, "-")
    assert "Alice: I'm flying to Lisbon" in out


def test_quickstart_example(processor: Processor) -> None:
    out = _run("", processor, str(PKG / "examples" / "quickstart.py"))
    assert "# session quickstart-" in out
    assert "assistant: Noted: Lisbon, May 3rd. Do you need a hotel?" in out


def test_bench_prints_one_json_line(processor: Processor) -> None:
    env = {**os.environ, "PYTHONPATH": str(PKG)}
    out = subprocess.run([sys.executable, str(PKG / "bench.py"), "--url", processor.url, "--turns", "200",
                          "--contexts", "10", "--warmup", "1", "--session", "bench-docs",
                          "--publish-session", "bench-docs"], capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert len(lines) == 1
    res = json.loads(lines[0])
    assert res["client"] == "python" and res["turns"] == 200 and res["contexts"] == 10
    assert res["turns_per_s"] > 0 and 0 < res["context_p50_ms"] <= res["context_p99_ms"]


def test_quickstarts_type_check(tmp_path: Path) -> None:
    """The quick starts pass mypy --strict against the package, as the package itself does."""
    try:
        import mypy  # noqa: F401
    except ImportError:
        if os.environ.get("CI"):
            raise
        pytest.skip("mypy is not installed")
    files = [str(PKG / "examples" / "quickstart.py")]
    for name, path in (("clients_md", "docs/clients.md"), ("readme", "clients/python/README.md")):
        (tmp_path / f"{name}.py").write_text(_quickstart(path), encoding="utf-8")
        files.append(str(tmp_path / f"{name}.py"))
    out = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--no-incremental", *files],
                         capture_output=True, text=True, env={**os.environ, "MYPYPATH": str(PKG)}, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
