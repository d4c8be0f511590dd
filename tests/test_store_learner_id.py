"""What a learner id is, in one place: 32 lowercase hex characters, as new_learner_id mints them
for the cookie's learners and LTI's alike. The store, the web app's cookie and the CLI ask the
same function."""

from __future__ import annotations

import pytest
from itsdangerous import Signer

from normdive.store import event_store
from normdive.store.event_store import is_learner_id, new_learner_id
from normdive.web.infrastructure import identity

HEX = "0123456789abcdef" * 2

EDGE_CASES = [
    (HEX, True),
    ("0" * 32, True),
    ("f" * 32, True),
    ("", False),
    (HEX[:-1], False),  # 31
    (HEX + "0", False),  # 33
    (HEX.upper(), False),  # one spelling only: CHAR keys compare case-sensitively
    (HEX[:-1] + "A", False),
    (HEX[:-1] + "g", False),
    (HEX + "\n", False),  # `$` would match before a final newline
    ("\n" + HEX, False),
    (" " + HEX[1:], False),
    (HEX[:-1] + " ", False),
    ("12345678-9abc-def0-1234-56789abcdef0", False),  # a UUID's spelling
    ("٠" * 32, False),  # Arabic-Indic digits: \d would take them, [0-9] does not
    ("０" * 32, False),  # fullwidth digits
    (HEX[:-1] + "\x00", False),
]


@pytest.mark.parametrize(("text", "expected"), EDGE_CASES)
def test_a_learner_id_is_32_lowercase_hex_characters(text: str, expected: bool) -> None:
    assert is_learner_id(text) is expected


def test_every_minted_id_is_one() -> None:
    minted = {new_learner_id() for _ in range(200)}
    assert len(minted) == 200 and all(map(is_learner_id, minted))


def test_the_web_apps_cookie_asks_the_stores_check() -> None:
    assert identity.is_learner_id is event_store.is_learner_id


@pytest.mark.parametrize(("text", "expected"), EDGE_CASES)
def test_a_signed_cookie_vouches_only_for_a_learner_id(text: str, expected: bool) -> None:
    signer = Signer("a secret key long enough for the test", salt=identity.SIGNER_SALT)
    signed = signer.sign(text.encode()).decode()  # cookie_value's, for any text
    vouched = identity.learner_from_cookie(signed, signer)
    assert vouched == (text if expected else None)
