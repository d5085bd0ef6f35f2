"""Logins and permissions: the shipped auth configs (nats/auth), nkeys, tokens, TLS."""

from __future__ import annotations

import asyncio
import base64
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO, Proc, _missing, free_port

import foldstream
from foldstream import AuthorizationError, ConnectionClosedError, InboxPermissionError, PermissionViolationError
from foldstream import _nkeys


@dataclass
class Server:
    proc: Proc
    port: int

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"


def _start(nats_server_bin: Path, conf: str, tmp: Path) -> Server:
    port = free_port()
    conf = re.sub(r"(?m)^port: \d+", f"port: {port}", conf)
    conf = re.sub(r"(?m)^http_port: \d+\n", "", conf)
    conf = re.sub(r'store_dir: "[^"]*"', f'store_dir: "{tmp / "js"}"', conf)
    path = tmp / "server.conf"
    path.write_text(conf)
    return Server(Proc([str(nats_server_bin), "-c", str(path)], ready="Server is ready", cwd=tmp), port)


@pytest.fixture
def userpass(nats_server_bin: Path, processor_bin: Path, tmp_path: Path) -> Iterator[Server]:
    """nats/auth/userpass.conf as shipped, with the processor logged in as its role."""
    srv = _start(nats_server_bin, (REPO / "nats" / "auth" / "userpass.conf").read_text(), tmp_path)
    proc = Proc([str(processor_bin), "--nats-url", srv.url, "--nats-user", "processor", "--nats-password",
                 "dev-processor-password", "--inbox-prefix", "_INBOX_processor", "--metrics-addr", "",
                 "--flush-interval", "5ms"], ready='"service_started"')
    yield srv
    proc.stop()
    srv.proc.stop()


def test_default_inbox_refused_at_once_naming_the_prefix(userpass: Server) -> None:
    async def run() -> None:
        with pytest.raises(InboxPermissionError) as info:
            await foldstream.connect(userpass.url, user="bot", password="dev-bot-password")
        e = info.value
        assert e.inbox_prefix == "_INBOX"
        assert e.expected == "_INBOX_bot"
        assert "inbox_prefix='_INBOX_bot'" in str(e)

    asyncio.run(run())


def test_default_inbox_refused_with_accounts_conf(nats_server_bin: Path, tmp_path: Path) -> None:
    """nats/auth/accounts.conf (two tenants): the error names the tenant user's own prefix."""
    srv = _start(nats_server_bin, (REPO / "nats" / "auth" / "accounts.conf").read_text(), tmp_path)
    try:
        async def run() -> None:
            with pytest.raises(InboxPermissionError) as info:
                await foldstream.connect(srv.url, user="b-builder", password="dev-b-builder-password")
            assert info.value.expected == "_INBOX_b-builder"
            fs = await foldstream.connect(srv.url, user="b-builder", password="dev-b-builder-password",
                                          inbox_prefix="_INBOX_b-builder")
            await fs.connection.flush()
            await fs.close()

        asyncio.run(run())
    finally:
        srv.proc.stop()


def test_a_refused_publish_fails_its_request_at_once(userpass: Server) -> None:
    """A bot may not ask the service: the permissions violation fails the request, no timeout."""
    async def run() -> None:
        async with await foldstream.connect(userpass.url, user="bot", password="dev-bot-password",
                                            inbox_prefix="_INBOX_bot", request_timeout=30) as bot:
            with pytest.raises(PermissionViolationError, match="fold.svc.context"):
                await asyncio.wait_for(bot.context("s1"), 10)

    asyncio.run(run())


def test_wrong_password(userpass: Server) -> None:
    async def run() -> None:
        with pytest.raises(AuthorizationError):
            await foldstream.connect(userpass.url, user="bot", password="nope", inbox_prefix="_INBOX_bot")

    asyncio.run(run())


def test_roles_work_with_their_private_inboxes(userpass: Server) -> None:
    """A bot publishes, a builder watches and asks the service, each with only its role's permissions."""
    errors: list[Exception] = []

    async def run() -> None:
        bot = await foldstream.connect(userpass.url, user="bot", password="dev-bot-password",
                                       inbox_prefix="_INBOX_bot", on_error=errors.append)
        builder = await foldstream.connect(userpass.url, user="builder", password="dev-builder-password",
                                           inbox_prefix="_INBOX_builder", on_error=errors.append)
        async with bot, builder:
            async with builder.watch_summaries("s1") as watch:
                turns = [foldstream.Turn("s1", f"t{i:03d}", "Alice", "message about the ranked match")
                         for i in range(61)]
                await bot.publish_turns(turns)
                ev = await asyncio.wait_for(watch.__anext__(), 30)
                assert (ev.version, ev.cursor) == (1, 10)
            ctx = await builder.context("s1", budget_chars=4000)
            assert ctx.total_turns == 61 and ctx.turns
            info = await builder.session("s1")
            assert info.version == 1
        assert not errors, errors

    asyncio.run(run())


def _nacl() -> Any:
    """PyNaCl's signing module; skipped without it, except with CI set (then the import fails the test)."""
    if os.environ.get("CI"):
        import nacl.signing
        return nacl.signing
    return pytest.importorskip("nacl.signing")


def test_nkey_login(nats_server_bin: Path, tmp_path: Path) -> None:
    _nacl()
    seed = _nkeys.encode_seed(bytes(range(32)))
    pub = _nkeys.public_key(seed)
    assert pub.startswith("U") and len(pub) == 56
    srv = _start(nats_server_bin, f"port: 4222\nauthorization {{ users: [ {{ nkey: {pub} }} ] }}\n", tmp_path)
    seed_file = tmp_path / "user.nk"
    seed_file.write_text(seed + "\n")
    try:
        async def run() -> None:
            for how in (seed, seed_file):
                fs = await foldstream.connect(srv.url, nkey_seed=how)
                await fs.connection.flush()
                await fs.close()
            with pytest.raises(AuthorizationError):
                await foldstream.connect(srv.url, nkey_seed=_nkeys.encode_seed(bytes(32)))

        asyncio.run(run())
    finally:
        srv.proc.stop()


def test_creds_file_is_read_and_signs(tmp_path: Path) -> None:
    nacl = _nacl()
    seed = _nkeys.encode_seed(bytes([7]) * 32)
    creds = tmp_path / "u.creds"
    creds.write_text("-----BEGIN NATS USER JWT-----\neyJhbGciOi.payload.sig\n------END NATS USER JWT------\n\n"
                     "************************* IMPORTANT *************************\n\n"
                     f"-----BEGIN USER NKEY SEED-----\n{seed}\n------END USER NKEY SEED------\n")
    jwt, got = _nkeys.read_creds(str(creds))
    assert (jwt, got) == ("eyJhbGciOi.payload.sig", seed)
    sig = _nkeys.sign(got, b"nonce-123")
    raw = base64.urlsafe_b64decode(sig + "=" * (-len(sig) % 4))
    nacl.VerifyKey(bytes(nacl.SigningKey(_nkeys.decode_seed(seed)).verify_key)).verify(b"nonce-123", raw)


def test_token_login(nats_server_bin: Path, tmp_path: Path) -> None:
    srv = _start(nats_server_bin, 'port: 4222\nauthorization { token: "s3cret" }\n', tmp_path)
    try:
        async def run() -> None:
            fs = await foldstream.connect(srv.url, token="s3cret")
            await fs.connection.flush()
            await fs.close()
            with pytest.raises(AuthorizationError):
                await foldstream.connect(srv.url, token="wrong")

        asyncio.run(run())
    finally:
        srv.proc.stop()


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def test_tls_with_client_certificate(nats_server_bin: Path, tmp_path: Path) -> None:
    if shutil.which("openssl") is None:
        _missing("openssl: needed to make the test certificates")
    d = tmp_path
    # Extensions as strict verification (Python 3.13's default) wants them.
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca-key.pem", "-out", "ca.pem", "-days", "1",
             "-subj", "/CN=foldstream test CA", "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=d)
    aki = "\nauthorityKeyIdentifier=keyid,issuer\nsubjectKeyIdentifier=hash"
    for name, ext in (("server", "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth" + aki),
                      ("client", "extendedKeyUsage=clientAuth" + aki)):
        _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}-key.pem", "-out", f"{name}.csr",
                 "-subj", f"/CN={name}", cwd=d)
        (d / f"{name}.ext").write_text(ext + "\n")
        _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca-key.pem", "-CAcreateserial",
                 "-out", f"{name}-cert.pem", "-days", "1", "-extfile", f"{name}.ext", cwd=d)
    conf = (REPO / "nats" / "auth" / "tls.conf").read_text()
    conf = conf.replace("certs/", f"{d}/")
    srv = _start(nats_server_bin, conf, d)
    try:
        async def run() -> None:
            fs = await foldstream.connect(f"tls://127.0.0.1:{srv.port}", tls_ca=str(d / "ca.pem"),
                                          tls_cert=str(d / "client-cert.pem"), tls_key=str(d / "client-key.pem"))
            await fs.connection.flush()
            await fs.close()
            with pytest.raises(ConnectionClosedError):  # no client certificate: refused
                await foldstream.connect(f"tls://127.0.0.1:{srv.port}", tls_ca=str(d / "ca.pem"),
                                         connect_timeout=2)

        asyncio.run(run())
    finally:
        srv.proc.stop()
