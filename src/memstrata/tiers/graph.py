"""The entity graph: who and what each turn names, and the names' vectors."""

from __future__ import annotations

from memstrata.embeddings.base import Embedder
from memstrata.extraction.entities import extract_entities
from memstrata.models import Subgraph, Turn
from memstrata.storage.roles import GraphStore

ENTITY_VECTORS_PER_JOB = 256  # entity names embedded in one job at most (about 2 s with the default embedder)


class Graph:
    """Adds each new turn's entities to the user's graph, embeds names that have no vector yet, reads subgraphs."""

    def __init__(self, store: GraphStore, embedder: Embedder) -> None:
        self._store = store
        self._embedder = embedder

    def observe(self, user_id: str, seq: int, turn: Turn) -> int:
        """Store the entities ``turn`` names (the speaker counts as a known person); how many."""
        found = extract_entities(turn.content, known_people=[turn.name] if turn.name else ())
        if found:
            self._store.add_entities(user_id, seq, [(e.name, e.kind.value) for e in found], turn.created_at)
        return len(found)

    def embed_names(self, user_id: str) -> None:
        """Embed the names of the user's entities that have no vector of this embedder yet.

        At most ``ENTITY_VECTORS_PER_JOB`` a job, the most mentioned first: a store from before
        entity vectors (or one whose embedder changed) catches up over the next jobs.
        """
        model = self._embedder.model_id
        missing = self._store.entities_without_vectors(user_id, model, ENTITY_VECTORS_PER_JOB)
        if missing:
            vectors = self._embedder.embed_documents([name for _, name in missing])
            self._store.save_entity_vectors(model, {entity_id: vectors[i] for i, (entity_id, _) in enumerate(missing)})

    def subgraph(self, user_id: str, query: str, limit: int) -> Subgraph:
        """The entities ``query`` mentions, their neighbours, and the edges between them."""
        names = {entity.name for entity in extract_entities(query)}
        names |= {word.strip(".,?!'\"").lower() for word in query.split() if len(word) > 2}
        matched = self._store.entities(user_id, names=sorted(names), limit=limit)
        edges = self._store.neighbours(user_id, [node.name for node in matched], limit)
        wanted = {node.name for node in matched} | {e.source for e in edges} | {e.target for e in edges}
        nodes = self._store.entities(user_id, names=sorted(wanted), limit=limit * 2)
        return Subgraph(tuple(nodes), tuple(edges))
