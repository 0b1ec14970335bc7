"""Deployment runs may write only the databases under the allowed database roots."""

from __future__ import annotations

import os

import pytest

from propdex.errors import DatabaseNotAllowedError
from propdex.security import check_db_allowed


@pytest.fixture
def base(tmp_path):
    (tmp_path / "repo" / "propdex-db").mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    os.symlink(tmp_path / "elsewhere", tmp_path / "repo" / "propdex-db" / "escape")
    return tmp_path / "repo"


@pytest.mark.parametrize(("db", "roots"), [
    ("propdex-db", ["propdex-db"]),
    ("./propdex-db/", ["propdex-db"]),
    ("propdex-db/nested/index", ["propdex-db"]),
    ("s3://bucket/indexes/a", ["s3://bucket/indexes"]),
    ("S3://bucket/indexes", ["s3://bucket/indexes/"]),
])
def test_a_db_under_an_allowed_root_is_accepted(base, db, roots):
    check_db_allowed(db, roots, base)


@pytest.mark.parametrize(("db", "roots", "shown"), [
    ("other-db", ["propdex-db"], "is {base}/other-db"),
    ("/etc/propdex", ["propdex-db"], "is /etc/propdex"),
    ("propdex-db/../other-db", ["propdex-db"], "is {base}/other-db"),
    ("propdex-db/escape/index", ["propdex-db"], "resolves to {tmp}/elsewhere/index"),
    ("propdex-db-evil", ["propdex-db"], "is {base}/propdex-db-evil"),
    ("s3://bucket/indexes-evil", ["s3://bucket/indexes"], "is s3://bucket/indexes-evil"),
    ("s3://bucket/indexes/../secrets", ["s3://bucket/indexes"], "is s3://bucket/indexes/../"),
    ("s3://bucket/indexes", ["propdex-db"], "is s3://bucket/indexes"),
    ("gs://bucket/indexes", ["s3://bucket/indexes"], "is gs://bucket/indexes"),
])
def test_a_db_outside_the_roots_is_refused_naming_it(base, db, roots, shown):
    with pytest.raises(DatabaseNotAllowedError) as refused:
        check_db_allowed(db, roots, base)
    expected = shown.format(base=os.path.realpath(base), tmp=os.path.realpath(base.parent))
    assert (True, True, True) == (
        str(refused.value).startswith(f"db {db}: refused: "), expected in str(refused.value),
        "outside the allowed database roots" in str(refused.value))
