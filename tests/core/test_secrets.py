"""The scanner's rules (git_handoff.core.secrets): each kind found and redacted, nothing
found in ordinary text, the user's patterns and allow-list, a record kept well formed."""

from __future__ import annotations

import json
import re

import pytest

from git_handoff.core import secrets
from git_handoff.core.secrets import DEFAULT, Scanner, compile_patterns, marker
from tests.support import secret_corpus

KIND_OF = {"github-fine-grained": "github-token"}


@pytest.mark.parametrize("kind", list(secret_corpus.SECRETS))
def test_each_kind_is_found_named_and_redacted_in_context(kind: str) -> None:
    secret = secret_corpus.SECRETS[kind]
    for text in (secret_corpus.pasted(kind), f"see {secret_corpus.one_line(kind)} here",
                 json.dumps({"note": secret_corpus.pasted(kind)})):
        clean, kinds = DEFAULT.redact(text)
        assert kinds == [KIND_OF.get(kind, kind)], text
        assert marker(KIND_OF.get(kind, kind)) in clean
        for line in secret.splitlines()[1:-1] or [secret]:
            assert line not in clean


def test_all_kinds_in_one_text_are_each_found() -> None:
    text = secret_corpus.all_pasted()
    clean, kinds = DEFAULT.redact(text)
    assert sorted(set(kinds)) == sorted({KIND_OF.get(k, k) for k in secret_corpus.SECRETS})
    assert not any(s in clean for s in secret_corpus.SECRETS.values())


def test_ordinary_text_of_ten_times_the_corpus_size_has_no_finding() -> None:
    text = secret_corpus.ordinary_text(len(secret_corpus.all_pasted()) * 10)
    assert DEFAULT.findings(text) == []


@pytest.mark.parametrize("text", [
    "token = get_token(config)", "password = os.environ['PASSWORD']", "api_key = settings.API_KEY",
    "secret: None", "password=hunter22", "API_KEY=xxxxxxxxxxxxxxxx", "token: ${GITHUB_TOKEN}",
    "postgres://app:${DB_PASSWORD}@db/app", "https://github.com/org/repo/pull/12",
    "commit de2ec9c8a9e7ff2a5a6a9e7af39b6c0ea714a7aa", "id 3f2b8c1e-4d5a-4b6c-9e7f-0a1b2c3d4e5f",
    "skeleton-key-ring", "AKIA is a prefix", "xAKIAIOSFODNN7EXAMPLEx", "password = <your password>",
])
def test_what_looks_like_a_secret_but_is_not(text: str) -> None:
    assert DEFAULT.findings(text) == []


def test_an_assignment_needs_a_random_value() -> None:
    assert [f.kind for f in DEFAULT.findings('client_secret: "q8Fz2LmT7xVb4NwR9kPc3HsJ"')] == ["secret-assignment"]
    assert DEFAULT.findings('client_secret: "aaaaaaaa1111"') == []
    assert secrets.entropy("abab") == 1.0 and secrets.entropy("") == 0.0


def test_a_users_pattern_names_its_kind_and_the_allow_list_wins() -> None:
    scan = Scanner(compile_patterns([r"(?P<acme_key>acme_[0-9a-f]{8})", r"id=(\d{6})"], "k"),
                   compile_patterns([r"^AKIA0{16}$"], "a"))
    assert scan.redact("use acme_deadbeef and id=123456") == ("use [redacted: acme-key] and id=[redacted: custom]",
                                                              ["acme-key", "custom"])
    assert scan.findings("AKIA" + "0" * 16) == []
    assert [f.kind for f in scan.findings("AKIA" + "1" * 16)] == ["aws-access-key"]


def test_a_bad_pattern_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match=re.escape("handoff.secretPattern: '(x' is not a regular expression")):
        compile_patterns(["(x"], "handoff.secretPattern")


def test_a_record_stays_well_formed_and_its_fields_are_named() -> None:
    doc = {"id": "t1", "title": f"a {secret_corpus.SECRETS['github-token']}",
           "checkpoints": [{"description": secret_corpus.pasted("url-password"), "step": 1}],
           "error_log": [f'x "quoted" {secret_corpus.pasted("secret-assignment")}']}
    data = (json.dumps(doc, indent=2, ensure_ascii=False) + "\n").encode()
    clean, found = DEFAULT.redact_record("tasks/a/b/t1.json", data)
    back = json.loads(clean)
    assert found == [("github-token", "title"), ("url-password", "checkpoints[0].description"),
                     ("secret-assignment", "error_log[0]")]
    assert back["title"] == "a [redacted: github-token]" and back["checkpoints"][0]["step"] == 1
    assert back["checkpoints"][0]["description"] == "postgres://app:[redacted: url-password]@db.internal:5432/orders"
    assert list(back) == list(doc)  # the layout kept: same keys, same order
    assert DEFAULT.redact_record("tasks/a/b/t1.json", clean) == (clean, [])
    text = b"[core]\nkey = \"" + secret_corpus.SECRETS["aws-access-key"].encode() + b"\"\n"
    assert DEFAULT.redact_record("config.toml", text) == (b'[core]\nkey = "[redacted: aws-access-key]"\n',
                                                        [("aws-access-key", "config.toml")])
    assert DEFAULT.redact_record("x.json", b"\xff\xfe") == (b"\xff\xfe", [])


def test_a_private_key_block_cut_short_is_redacted_to_the_end() -> None:
    pem = secret_corpus.SECRETS["private-key"]
    cut = "key: " + pem[: len(pem) // 2]
    clean, kinds = DEFAULT.redact(cut)
    assert kinds == ["private-key"] and clean == "key: [redacted: private-key]"


def test_a_private_key_block_whose_front_was_cut_off_is_redacted_from_its_body() -> None:
    pem = secret_corpus.SECRETS["private-key"]
    body = pem.splitlines()[2:]  # the BEGIN line and the first line of the body gone
    for tail in ("\n".join(body), " | ".join(body)):  # as the output's tail kept it; as an error line
        clean, kinds = DEFAULT.redact(f"FAILED test_keys\n{tail}\n2 passed")
        assert kinds == ["private-key"] and clean == "FAILED test_keys\n[redacted: private-key]\n2 passed"
    assert DEFAULT.findings("-----END PGP PUBLIC KEY BLOCK-----\n-----END CERTIFICATE-----") == []


def test_a_secret_the_record_held_before_is_left_as_it_was() -> None:
    aws, token = secret_corpus.SECRETS["aws-access-key"], secret_corpus.SECRETS["github-token"]
    before = (json.dumps({"id": "t1", "title": f"rotate {aws}", "checkpoints": []}, indent=2) + "\n").encode()
    now = json.dumps({"id": "t1", "title": f"rotate {aws}", "checkpoints": [{"description": f"used {token}"}]})
    clean, kinds = DEFAULT.redact_record("tasks/t1.json", now.encode(), lambda: before)
    assert kinds == [("github-token", "checkpoints[0].description")]
    assert json.loads(clean) == {"id": "t1", "title": f"rotate {aws}",
                                 "checkpoints": [{"description": "used [redacted: github-token]"}]}
    assert DEFAULT.redact_record("tasks/t1.json", before, lambda: before) == (before, [])
    assert DEFAULT.redact_record("doc.md", f"{aws} {token}".encode(), lambda: aws.encode()) == (
        f"{aws} [redacted: github-token]".encode(), [("github-token", "doc.md")])


def test_a_records_key_named_like_a_secret_is_no_assignment() -> None:
    data = (json.dumps({"agent_token": "12345-1-a1b2c3d4e5f6", "password_hint": "q8Fz2LmT7xVb"}, indent=2)
            + "\n").encode()
    assert DEFAULT.redact_record("relay.json", data) == (data, [])


def test_a_records_ids_are_names_and_kept() -> None:
    odd = "AKIA" + "ABCDEFGHIJKLMNOP"
    data = (json.dumps({"id": odd, "title": odd, "depends_on": [odd]}, indent=2) + "\n").encode()
    clean, found = DEFAULT.redact_record(f"tasks/A/K/{odd}.json", data)
    assert json.loads(clean) == {"id": odd, "title": "[redacted: aws-access-key]", "depends_on": [odd]}
    assert found == [("aws-access-key", "title")]
