"""`labelled_records` (revision 0020): each labelled record's filter and sort fields, kept by
the labels' insert trigger, so that reads about labelled records (the records page's label
filter, the review queue's labelled counts) read this small table instead of one record per
label from the day partitions.

Postgres: the trigger's function is SECURITY DEFINER, owned by the schema owner (the service's
role only reads the table, service/db_roles.py); on a partitioned store it finds the record's
partition through `record_keys`. SQLite: a plain trigger. A label of a record that is not
stored adds nothing (the API refuses such a label before it is written).
"""

from __future__ import annotations

from service.tables import LABELLED_COLUMNS

_INTO = "labelled_records (record_id, " + ", ".join(LABELLED_COLUMNS) + ")"
_VALUES = "r.id, " + ", ".join(f"r.{c}" for c in LABELLED_COLUMNS)


def _source(partitioned: bool, record_id: str) -> str:
    """The records row of `record_id` (an SQL expression), by its day's partition when partitioned."""
    if partitioned:
        return (f"FROM records r WHERE r.id = {record_id} "
                f"AND r.created_at = (SELECT k.created_at FROM record_keys k WHERE k.record_id = {record_id})")
    return f"FROM records r WHERE r.id = {record_id}"


def trigger_statements(dialect: str, schema: str | None = None, partitioned: bool = False) -> list[str]:
    if dialect == "sqlite":
        return [f"CREATE TRIGGER IF NOT EXISTS labels_after_insert AFTER INSERT ON labels BEGIN "
                f"INSERT OR IGNORE INTO {_INTO} SELECT {_VALUES} {_source(False, 'NEW.record_id')}; END"]
    return [
        f"""CREATE OR REPLACE FUNCTION assay_labels_after_insert() RETURNS trigger LANGUAGE plpgsql
SECURITY DEFINER SET search_path = "{schema}", pg_temp AS $fn$
BEGIN
  INSERT INTO {_INTO} SELECT {_VALUES} {_source(partitioned, 'NEW.record_id')}
  ON CONFLICT (record_id) DO NOTHING;
  RETURN NULL;
END $fn$""",
        "DROP TRIGGER IF EXISTS labels_after_insert ON labels",
        "CREATE TRIGGER labels_after_insert AFTER INSERT ON labels FOR EACH ROW "
        "EXECUTE FUNCTION assay_labels_after_insert()",
    ]


def backfill_statement(partitioned: bool) -> str:
    """Every labelled record already stored (one read per labelled record, once)."""
    if partitioned:
        return (f"INSERT INTO {_INTO} SELECT {_VALUES} FROM (SELECT DISTINCT record_id FROM labels) l "
                "JOIN record_keys k ON k.record_id = l.record_id "
                "JOIN records r ON r.id = k.record_id AND r.created_at = k.created_at")
    return f"INSERT INTO {_INTO} SELECT {_VALUES} FROM records r WHERE r.id IN (SELECT record_id FROM labels)"


def archived_statement(partition: str) -> str:
    """Forget the labelled records of a partition being archived (their labels stay)."""
    return f"DELETE FROM labelled_records WHERE record_id IN (SELECT id FROM {partition})"
