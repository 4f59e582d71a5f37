"""A corpus of fake secrets, one or more of each kind the scanner knows, and a run of
ordinary text of the same size (code, logs, UUIDs, commit ids, base64 of an image) that
holds none. The secrets are made from a seeded generator and split prefixes, so that no
literal key of a real format sits in this repository's source."""

from __future__ import annotations

import base64
import hashlib
import random
import uuid

_RNG = random.Random(41)
_ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
_UPPER = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"


def _chars(n: int, alphabet: str = _ALNUM) -> str:
    return "".join(_RNG.choice(alphabet) for _ in range(n))


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


_PEM = "-----BEGIN " + "RSA PRIVATE KEY-----\n" + "\n".join(_chars(64)
                                                            for _ in range(4)) + "\n-----END RSA " + "PRIVATE KEY-----"
_JWT = ".".join((_b64url(b'{"alg":"HS256","typ":"JWT"}'),
                 _b64url(b'{"sub":"1234567890","name":"agent","iat":1516239022}'),
                 _chars(43)))
_DB_PASSWORD = "Pg" + _chars(14)

# kind -> a secret of that kind as it would be pasted (the part that must never be published)
SECRETS: dict[str, str] = {
    "aws-access-key": "AK" + "IA" + _chars(16, _UPPER),
    "github-token": "gh" + "p_" + _chars(36),
    "github-fine-grained": "github" + "_pat_" + _chars(22) + "_" + _chars(59),
    "gitlab-token": "gl" + "pat-" + _chars(20),
    "openai-key": "sk-" + "proj-" + _chars(48),
    "anthropic-key": "sk-" + "ant-api03-" + _chars(93) + "AA",
    "google-api-key": "AI" + "za" + _chars(35),
    "slack-token": "xo" + "xb-" + _chars(12, "0123456789") + "-" + _chars(13, "0123456789") + "-" + _chars(24),
    "stripe-key": "sk" + "_live_" + _chars(24),
    "private-key": _PEM,
    "url-password": _DB_PASSWORD,
    "jwt": _JWT,
    "secret-assignment": _chars(24),
}

# each secret in the context it would be pasted in (the text that goes in a field)
CONTEXT: dict[str, str] = {
    "url-password": f"postgres://app:{_DB_PASSWORD}@db.internal:5432/orders",
    "secret-assignment": f'API_KEY="{SECRETS["secret-assignment"]}"',
}


def pasted(kind: str) -> str:
    return CONTEXT.get(kind, SECRETS[kind])


def one_line(kind: str) -> str:
    """The secret of `kind` as text for a one-line field (a PEM block's lines joined)."""
    return pasted(kind).replace("\n", " ")


def all_pasted(sep: str = " ; ") -> str:
    return sep.join(f"{kind}: {one_line(kind)}" for kind in SECRETS)


def ordinary_text(size: int, seed: int = 7) -> str:
    """Text an agent writes and a check prints, `size` characters or a little more: code,
    log lines, UUIDs, commit ids, base64 of an image, hashes, paths, numbers."""
    rng = random.Random(seed)
    png = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(rng.randrange(256) for _ in range(600))).decode()
    pieces = [
        "def parse_token(stream: TokenStream) -> Token:\n    token = stream.next_token()\n    return token\n",
        "password_field = form.fields['password']  # validated by check_password_strength()\n",
        "secret_name = settings.SECRET_NAME\napi_key_header = 'X-Api-Key'\n",
        "2026-12-07T06:50:31Z INFO  worker=3 request_id={uuid} took=12ms status=200\n",
        "commit {sha} Merge branch 'h43-valid'\n",
        "FAILED tests/test_api.py::test_login - AssertionError: assert 401 == 200\n",
        "<img src=\"data:image/png;base64,{png}\"/>\n",
        "sha256:{sha256}  dist/git_handoff-0.1.0.tar.gz\n",
        "export PATH=/work/venv/bin:$PATH && PYTHONPATH=/work/wt python -m pytest -q\n",
        "DATABASE_URL=postgres://app:${{DB_PASSWORD}}@localhost:5432/app\n",
        "see https://github.com/org/repo/pull/1234 and https://example.com/a/b?c=d#e\n",
        "token = get_token(config)\npassword = os.environ['PASSWORD']\nsecret = None\n",
        "key_id = {uuid}\nblob {sha} 4096\n",
    ]
    out: list[str] = []
    total = 0
    while total < size:
        piece = rng.choice(pieces).format(uuid=uuid.UUID(int=rng.getrandbits(128)),
                                          sha=hashlib.sha1(str(rng.random()).encode()).hexdigest(),
                                          sha256=hashlib.sha256(str(rng.random()).encode()).hexdigest(), png=png)
        out.append(piece)
        total += len(piece)
    return "".join(out)
