"""The correctness table's file: one parquet per run, holding in its key-value metadata the command
that wrote it (`qualflow.command`), which the join records in `runs.commands`."""

from __future__ import annotations

from pathlib import Path

COMMAND_KEY = b"qualflow.command"


def write_correctness(df, path: str | Path, command: str) -> None:
    """`df` as parquet (what `DataFrame.to_parquet(index=False)` writes), plus the command."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pandas(df, preserve_index=False)
    meta = dict(table.schema.metadata or {})
    meta[COMMAND_KEY] = command.encode()
    pq.write_table(table.replace_schema_metadata(meta), path)


def recorded_command(path: str | Path | None) -> str | None:
    """The command recorded in a correctness file; None when there is no file or no command in
    it."""
    if not path or not Path(path).is_file():
        return None
    import pyarrow.parquet as pq

    value = (pq.read_schema(path).metadata or {}).get(COMMAND_KEY)
    return None if value is None else value.decode()
