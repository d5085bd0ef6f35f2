"""NKey seeds and .creds files: decode, derive the public key, sign the nonce.

Ed25519 comes from PyNaCl (Debian: python3-nacl; pip: the ``nkeys`` extra),
imported only when an nkey or a .creds file is used.
"""

from __future__ import annotations

import base64
import os
from typing import Any

from .errors import FoldstreamError, MissingExtraError

_PREFIX_SEED = 18 << 3  # 'S'
_PREFIX_USER = 20 << 3  # 'U'


def _crc16(data: bytes) -> int:
    crc = 0
    for b in data:
        crc ^= b << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else crc << 1
            crc &= 0xFFFF
    return crc


def _b32decode(s: str) -> bytes:
    return base64.b32decode(s + "=" * (-len(s) % 8))


def _encode(prefix: bytes, payload: bytes) -> str:
    raw = prefix + payload
    raw += _crc16(raw).to_bytes(2, "little")
    return base64.b32encode(raw).decode().rstrip("=")


def _nacl() -> Any:
    try:
        import nacl.signing
    except ImportError as e:
        raise MissingExtraError(
            "nkey and .creds authentication sign the server's nonce with Ed25519, which needs PyNaCl: "
            "install the extra (pip install 'foldstream[nkeys]') or Debian's python3-nacl") from e
    return nacl.signing


def decode_seed(seed: str) -> bytes:
    """The 32-byte Ed25519 seed of a user seed "SU..."."""
    seed = seed.strip()
    try:
        raw = _b32decode(seed)
    except ValueError as e:
        raise FoldstreamError(f"nkey seed: not base32 ({e})") from None
    if len(raw) != 36 or _crc16(raw[:-2]) != int.from_bytes(raw[-2:], "little"):
        raise FoldstreamError("nkey seed: expected a 58-character seed starting with SU (bad length or checksum)")
    if raw[0] & 0xF8 != _PREFIX_SEED or ((raw[0] & 7) << 5 | (raw[1] & 0xF8) >> 3) != _PREFIX_USER:
        raise FoldstreamError("nkey seed: expected a user seed starting with SU")
    return raw[2:34]


def encode_seed(seed32: bytes) -> str:
    """The "SU..." form of a 32-byte Ed25519 seed (user key)."""
    b1 = _PREFIX_SEED | (_PREFIX_USER >> 5)
    b2 = (_PREFIX_USER & 31) << 3
    return _encode(bytes([b1, b2]), seed32)


def public_key(seed: str) -> str:
    """The "U..." public key of a user seed."""
    sk = _nacl().SigningKey(decode_seed(seed))
    return _encode(bytes([_PREFIX_USER]), bytes(sk.verify_key))


def sign(seed: str, nonce: bytes) -> str:
    """The nonce's Ed25519 signature, base64url without padding (as CONNECT wants it)."""
    sk = _nacl().SigningKey(decode_seed(seed))
    sig = sk.sign(nonce).signature
    return base64.urlsafe_b64encode(sig).decode().rstrip("=")


def read_seed(seed_or_path: str) -> str:
    """A seed given as is ("SU...") or as the path of a file holding it."""
    s = seed_or_path.strip()
    if s.startswith("SU") and not os.path.exists(s):
        return s
    with open(seed_or_path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line.startswith("SU"):
                return line
    raise FoldstreamError(f"nkey seed file {seed_or_path}: no line starting with SU")


def read_creds(path: str) -> tuple[str, str]:
    """The user JWT and the seed of a .creds file."""
    with open(path, encoding="utf-8") as f:
        lines = [ln.strip() for ln in f]
    jwt = seed = ""
    for i, line in enumerate(lines):
        if line.startswith("-----BEGIN") and "JWT" in line:
            jwt = next((x for x in lines[i + 1:] if x), "")
        elif line.startswith("-----BEGIN") and "SEED" in line:
            seed = next((x for x in lines[i + 1:] if x), "")
    if not jwt or jwt.startswith("---") or not seed or seed.startswith("---"):
        raise FoldstreamError(f"creds file {path}: expected a NATS USER JWT block and a USER NKEY SEED block")
    return jwt, seed
