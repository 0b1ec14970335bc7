"""A migrated, empty Prefect database for a new Prefect home, so that the ephemeral API starts
without migrating one.

Prefect's server runs ``alembic upgrade head`` on start. On a new SQLite database that is 114
migrations, most of them SQLite batch operations that reflect and copy tables: ~4.4 s of pure
Python on the server's critical path, on every machine's first run. Prefect has no faster way
to create its schema (``Base.metadata.create_all`` does not give the migrated one and fails on
indexes the migrations create), but on a database already at head the same step finds nothing
to do (~0.03 s). So the SQL dump of a database Prefect itself migrated ships with propdex
(``prefect_template.sql``, rebuilt by ``python -m propdex.prefect_template build``); its header
names the Prefect version and a digest of the SQLite migration scripts it was built with, and
it is used only when both match the installed Prefect. Otherwise Prefect migrates as always.
Two builds may list a recreated table's constraints in another order (Alembic's batch mode
writes them in set order), as two of Prefect's own migrations do; the schema is the same, and
tests/test_prefect_template.py compares it that way.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import os
import secrets
import sqlite3
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from prefect.settings import Settings

TEMPLATE = Path(__file__).with_name("prefect_template.sql")
_PREFECT_VERSION = "prefect"
_REVISION = "alembic revision"
_MIGRATIONS = "migrations sha256"


def _prefect_package() -> Path:
    import prefect

    return Path(prefect.__module_path__)


def migrations_digest(prefect_package: Path) -> str:
    """SHA-256 of Prefect's SQLite migration scripts, names and contents: the same scripts
    build the same schema, whatever the version string says (an edited or development install)."""
    digest = hashlib.sha256()
    versions = prefect_package / "server" / "database" / "_migrations" / "versions" / "sqlite"
    for script in sorted(versions.glob("*.py")):
        digest.update(script.name.encode() + b"\0" + script.read_bytes() + b"\0")
    return digest.hexdigest()


def template_header(text: str) -> dict[str, str]:
    """The ``-- name: value`` lines that open a template."""
    header = {}
    for line in text.splitlines():
        if not line.startswith("-- "):
            break
        name, sep, value = line[3:].partition(": ")
        if sep:
            header[name] = value
    return header


def matches_installed_prefect(header: dict[str, str]) -> bool:
    import prefect

    return (header.get(_PREFECT_VERSION) == prefect.__version__
            and header.get(_MIGRATIONS) == migrations_digest(_prefect_package()))


def default_sqlite_database(settings: Settings) -> Path | None:
    """The SQLite file Prefect's server creates and migrates in PREFECT_HOME when its database
    is not configured; None when it is (another URL, driver or name) or when migrating on
    start is turned off: such a database is the user's to create."""
    database = settings.server.database
    path = f"{settings.home}/prefect.db"  # as prefect.settings.models._defaults builds it
    url = database.connection_url.get_secret_value() if database.connection_url is not None else None
    return Path(path) if database.migrate_on_start and url == f"sqlite+aiosqlite:///{path}" else None


def place_migrated_database(database: Path, template: Path = TEMPLATE) -> bool:
    """Create ``database`` from ``template`` if no database is there yet and the template was
    built with the installed Prefect's migrations; whether it did. Any failure leaves the
    database to Prefect, which creates and migrates it as usual."""
    # A stale -wal or -journal beside a missing database would be replayed into a new one.
    if any(database.with_name(database.name + suffix).exists() for suffix in ("", "-wal", "-journal")):
        return False
    try:
        script = template.read_text(encoding="utf-8")
    except OSError:
        return False
    if not matches_installed_prefect(template_header(script)):
        return False
    partial = database.with_name(f".{database.name}.{os.getpid()}.{secrets.token_hex(4)}.partial")
    try:
        with contextlib.closing(sqlite3.connect(partial)) as connection:
            connection.executescript(script)
        # Written aside and then linked, never renamed: the database appears complete or not
        # at all to a server opening it at that moment, and a database another process (a
        # second propdex, a Prefect server) created meanwhile makes the link fail
        # (FileExistsError) where a rename would silently replace it and its flow runs.
        os.link(partial, database)
        return True
    except (OSError, sqlite3.Error):
        return False
    finally:
        partial.unlink(missing_ok=True)


def at_installed_head(database: Path, template: Path = TEMPLATE) -> bool:
    """Whether ``database`` is at the revision the installed Prefect migrates to: the
    template's, when the template was built with the installed Prefect's migrations. Prefect's
    server would then find nothing to migrate, after ~0.5 s of loading Alembic and its 114
    scripts on every start."""
    try:
        header = template_header(template.read_text(encoding="utf-8"))
    except OSError:
        return False
    if not database.is_file() or not matches_installed_prefect(header):
        return False
    try:
        with contextlib.closing(sqlite3.connect(f"{database.as_uri()}?mode=ro", uri=True)) as con:
            revisions = con.execute("SELECT version_num FROM alembic_version").fetchall()
    except sqlite3.Error:
        return False
    return revisions == [(header.get(_REVISION),)]


def _migrate_with_prefect(database: Path) -> None:
    """Create ``database`` the way Prefect's server does on start: ``alembic upgrade head``."""
    from prefect.server.database import provide_database_interface
    from prefect.settings import PREFECT_API_DATABASE_CONNECTION_URL, temporary_settings

    async def migrate() -> None:
        interface = provide_database_interface()
        await interface.create_db()
        await (await interface.engine()).dispose()

    with temporary_settings(updates={PREFECT_API_DATABASE_CONNECTION_URL: f"sqlite+aiosqlite:///{database}"}):
        asyncio.run(migrate())


def migrated_database(database: Path) -> None:
    """A new ``database`` migrated to head by the installed Prefect."""
    if database.exists():
        raise FileExistsError(f"{database} exists: Prefect would only finish migrating it")
    _migrate_with_prefect(database)


def build_template(template: Path = TEMPLATE) -> str:
    """Write ``template`` from a database the installed Prefect migrates now; its revision."""
    import prefect

    with tempfile.TemporaryDirectory(prefix="propdex-prefect-template-") as folder:
        database = Path(folder) / "prefect.db"
        migrated_database(database)
        with contextlib.closing(sqlite3.connect(database)) as connection:
            (revision,), = connection.execute("SELECT version_num FROM alembic_version").fetchall()
            dump = "\n".join(connection.iterdump())
    header = {
        _PREFECT_VERSION: prefect.__version__,
        _REVISION: revision,
        _MIGRATIONS: migrations_digest(_prefect_package()),
    }
    template.write_text(
        "-- An empty Prefect database at head, dumped by `python -m propdex.prefect_template build`.\n"
        + "".join(f"-- {name}: {value}\n" for name, value in header.items()) + dump + "\n",
        encoding="utf-8")
    return revision


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    build = commands.add_parser("build", help="dump a database the installed Prefect migrates")
    build.add_argument("--out", type=Path, default=TEMPLATE, help=f"default: {TEMPLATE}")
    args = parser.parse_args(argv)
    revision = build_template(args.out)
    print(f"{args.out}: Prefect's schema at alembic revision {revision}")


if __name__ == "__main__":
    main()
