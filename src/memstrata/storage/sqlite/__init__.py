"""The embedded SQLite backend (WAL, FTS5)."""
