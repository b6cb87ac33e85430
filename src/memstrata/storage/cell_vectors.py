"""Fact vectors (``cell_vectors``): the SQL both backends share, written with ``%s`` (SQLite's store writes ``?``).

Each current cell is embedded once per model by the tier work, so a question that shares no
word with a fact can still reach it by meaning. A vector goes with its cell (a cascade), and
when a cell's own turn is deleted and a kept turn takes over as its source, its vector goes
too: it was made from what the deleted turn said, and the next tier job embeds it again.
"""

from __future__ import annotations

#: A user's current cells with no vector of a model, newest first; ``{columns}`` is the
#: backend's cell columns (cells ``c`` joined with their turn ``t``). Parameters: user, model, limit.
CELLS_WITHOUT_VECTORS = (
    "SELECT {columns} FROM cells c JOIN turns t ON t.seq = c.source_turn_seq"
    " WHERE c.user_id = %s AND c.valid_to IS NULL AND NOT EXISTS ("
    " SELECT 1 FROM cell_vectors v WHERE v.cell_id = c.id AND v.model_id = %s)"
    " ORDER BY c.valid_from DESC, c.id DESC LIMIT %s"
)

#: Store one cell's vector, replacing one stored before; nothing when the cell is gone.
#: Parameters: model, vector bytes, cell id.
SAVE_CELL_VECTOR = (
    "INSERT INTO cell_vectors (cell_id, model_id, vector) SELECT id, %s, %s FROM cells WHERE id = %s"
    " ON CONFLICT (cell_id, model_id) DO UPDATE SET vector = excluded.vector"
)

#: (search item seq, subject, vector) of a user's current cells that have a vector of a model, in no
#: order (sorting in SQL would sort the vectors with them: the caller sorts). Parameters: user, model.
CELL_VECTORS = (
    "SELECT d.seq, c.subject, v.vector FROM cells c JOIN cell_vectors v ON v.cell_id = c.id"
    " JOIN derived d ON d.id = c.id AND d.user_id = c.user_id"
    " WHERE c.user_id = %s AND c.valid_to IS NULL AND v.model_id = %s"
)

#: Forget the vectors of cells whose source changed (``_rehome_restated``). Parameter: cell id.
DROP_CELL_VECTORS = "DELETE FROM cell_vectors WHERE cell_id = %s"
