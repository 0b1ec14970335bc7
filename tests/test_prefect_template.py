"""The migrated Prefect database a new Prefect home gets: the schema Prefect's own migrations
build, placed only where no database is, and served by Prefect's API like one it migrated."""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from prefect.settings import PREFECT_SERVER_DATABASE_MIGRATE_ON_START, Settings

from propdex.prefect_api import prepare_prefect_home, server_setting_updates
from propdex.prefect_template import (
    TEMPLATE,
    at_installed_head,
    default_sqlite_database,
    migrated_database,
    place_migrated_database,
    template_header,
)
from tests.test_cli_ingest import write_notes

REPO = Path(__file__).resolve().parents[1]
TEMPLATE_REVISION = template_header(TEMPLATE.read_text(encoding="utf-8"))["alembic revision"]
_CONSTRAINTS = ("CONSTRAINT ", "PRIMARY KEY", "FOREIGN KEY", "UNIQUE ", "CHECK ")


def _table_definition(sql: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """A CREATE TABLE's column lines in order and its constraint lines sorted: Alembic's batch
    migrations write a recreated table's constraints in set order, which differs between
    two runs of the same migrations."""
    lines = [line.strip().rstrip(",").strip() for line in sql.splitlines()]
    columns = tuple(line for line in lines if not line.startswith(_CONSTRAINTS))
    return columns, tuple(sorted(line for line in lines if line.startswith(_CONSTRAINTS)))


def schema(database: Path) -> dict:
    with contextlib.closing(sqlite3.connect(database)) as connection:
        master = connection.execute("SELECT type, name, tbl_name, sql FROM sqlite_master").fetchall()
        revisions = connection.execute("SELECT version_num FROM alembic_version").fetchall()
    return {
        "objects": sorted((kind, name, table, _table_definition(sql) if kind == "table" and sql else sql)
                          for kind, name, table, sql in master),
        "alembic_version": revisions,
    }


@pytest.mark.prefect
def test_the_template_has_the_schema_prefects_migrations_build(tmp_path):
    """If this fails after a Prefect upgrade: `python -m propdex.prefect_template build`."""
    migrated = tmp_path / "migrated" / "prefect.db"
    migrated.parent.mkdir()
    migrated_database(migrated)
    placed = tmp_path / "placed" / "prefect.db"
    placed.parent.mkdir()

    assert place_migrated_database(placed)
    assert schema(migrated) == schema(placed)


def test_a_new_home_gets_a_database_at_the_templates_revision(tmp_path):
    database = tmp_path / "prefect.db"

    placed = place_migrated_database(database)

    assert (True, [(TEMPLATE_REVISION,)]) == (placed, schema(database)["alembic_version"])


def test_a_database_placed_from_the_template_is_at_the_installed_head(tmp_path):
    database = tmp_path / "prefect.db"
    place_migrated_database(database)

    assert at_installed_head(database)


def test_a_database_at_an_older_revision_is_left_to_prefects_migrations(tmp_path):
    database = tmp_path / "prefect.db"
    place_migrated_database(database)
    with contextlib.closing(sqlite3.connect(database)) as connection, connection:
        connection.execute("UPDATE alembic_version SET version_num = 'older'")

    assert not at_installed_head(database)


@pytest.mark.parametrize("content", [None, b"", b"not a database"])
def test_a_missing_or_foreign_database_is_not_at_head(tmp_path, content):
    database = tmp_path / "prefect.db"
    if content is not None:
        database.write_bytes(content)

    assert not at_installed_head(database)


def test_a_template_of_other_migrations_says_nothing_about_the_head(tmp_path):
    database = tmp_path / "prefect.db"
    place_migrated_database(database)
    text = TEMPLATE.read_text(encoding="utf-8")
    template = tmp_path / "template.sql"
    template.write_text(text.replace(template_header(text)["migrations sha256"], "0" * 64, 1),
                        encoding="utf-8")

    assert not at_installed_head(database, template)


def test_the_server_skips_its_migration_step_only_on_a_database_at_head(tmp_path, monkeypatch):
    monkeypatch.delenv("PREFECT_SERVER_DATABASE_MIGRATE_ON_START", raising=False)
    at_head = Settings(home=tmp_path / "new")  # gets the template
    older = tmp_path / "older"
    older.mkdir()
    place_migrated_database(older / "prefect.db")
    with contextlib.closing(sqlite3.connect(older / "prefect.db")) as connection, connection:
        connection.execute("UPDATE alembic_version SET version_num = 'older'")

    skip = [server_setting_updates(s).get(PREFECT_SERVER_DATABASE_MIGRATE_ON_START)
            for s in (at_head, Settings(home=older))]

    assert [False, None] == skip


def test_an_explicit_migration_setting_is_kept(tmp_path, monkeypatch):
    monkeypatch.setenv("PREFECT_SERVER_DATABASE_MIGRATE_ON_START", "true")

    assert {} == server_setting_updates(Settings(home=tmp_path / "new"))


def test_placing_the_database_leaves_no_other_file(tmp_path):
    place_migrated_database(tmp_path / "prefect.db")

    assert ["prefect.db"] == sorted(p.name for p in tmp_path.iterdir())


def test_an_existing_database_is_never_replaced(tmp_path):
    database = tmp_path / "prefect.db"
    database.write_bytes(b"a database another process created")

    placed = place_migrated_database(database)

    assert (False, b"a database another process created") == (placed, database.read_bytes())


def test_a_leftover_write_ahead_log_keeps_the_template_out(tmp_path):
    (tmp_path / "prefect.db-wal").write_bytes(b"frames of a deleted database")

    placed = place_migrated_database(tmp_path / "prefect.db")

    assert (False, False) == (placed, (tmp_path / "prefect.db").exists())


def test_a_template_built_with_other_migrations_is_not_used(tmp_path):
    text = TEMPLATE.read_text(encoding="utf-8")
    digest = template_header(text)["migrations sha256"]
    template = tmp_path / "template.sql"
    template.write_text(text.replace(digest, "0" * 64, 1), encoding="utf-8")

    placed = place_migrated_database(tmp_path / "prefect.db", template)

    assert (False, False) == (placed, (tmp_path / "prefect.db").exists())


def test_the_database_of_an_unconfigured_server_is_prefect_db_in_its_home(tmp_path):
    assert tmp_path / "prefect.db" == default_sqlite_database(Settings(home=tmp_path))


@pytest.mark.parametrize("database", [
    {"connection_url": "postgresql+asyncpg://prefect@localhost/prefect"},
    {"connection_url": "sqlite+aiosqlite:////elsewhere/prefect.db"},
    {"driver": "sqlite+aiosqlite", "name": "/elsewhere/prefect.db"},
    {"migrate_on_start": False},
])
def test_a_configured_server_database_gets_no_template(tmp_path, database):
    assert None is default_sqlite_database(Settings(home=tmp_path, server={"database": database}))


def test_the_cli_gives_a_new_prefect_home_the_migrated_database(tmp_path):
    home = tmp_path / "new" / "prefect-home"

    prepare_prefect_home(Settings(home=home))

    assert [(TEMPLATE_REVISION,)] == schema(home / "prefect.db")["alembic_version"]


@pytest.mark.prefect
def test_prefects_api_serves_a_home_created_from_the_template(tmp_path):
    """A fresh `propdex ingest`, then Prefect's own CLI (its own ephemeral API) on the home."""
    home = tmp_path / "prefect-home"
    home.mkdir()
    assert place_migrated_database(home / "prefect.db")
    env = dict(os.environ, PREFECT_HOME=str(home), PYTHONPATH=str(REPO))
    env.pop("PREFECT_API_URL", None)
    ingest = subprocess.run(
        [sys.executable, "-m", "propdex.cli", "ingest", str(write_notes(tmp_path / "notes")),
         "--db", str(tmp_path / "db"), "--json"],
        env=env, capture_output=True, text=True, check=True)
    run_id = json.loads(ingest.stdout)["run_id"]

    inspect = subprocess.run(
        [sys.executable, "-m", "prefect", "flow-run", "inspect", run_id, "--output", "json"],
        env=env, capture_output=True, text=True, check=True)

    assert "COMPLETED" == json.loads(inspect.stdout)["state_type"]
