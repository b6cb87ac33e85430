"""Several memories searched together: a federated search ranks a user's memory and shared spaces as one."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from memstrata.config import Settings
from memstrata.models import Hit, SearchFilters, Turn
from memstrata.retrieval.fusion import fuse_scored
from memstrata.retrieval.pipeline import BURST_SPARES, Pipeline, Prepared
from memstrata.retrieval.query import DATED, ItemKey, Query, Rankings, joined
from memstrata.storage.roles import FederatedSearch


@dataclass(kw_only=True, frozen=True, slots=True)
class _Alike:
    """What queries searched together share: the same expressions, filters, depth and tiers."""

    match: str
    filters: SearchFilters
    dated: SearchFilters | None
    derived_match: str
    depth: int
    tiers: tuple[str, ...]


@dataclass(kw_only=True, eq=False)
class Federation:
    """Runs the pipeline over several memories at once: their full text read in one pass, one rerank for all."""

    pipeline: Pipeline
    store: FederatedSearch
    settings: Settings

    def search_together(self, queries: Sequence[Query], count: int, diversity: float = 0.0) -> list[Hit]:
        """The ``count`` best hits of several memories (one query each) ranked as one: a federated search.

        Each memory's retrievers run on their own (its full text with the others', in one pass)
        and their lists are merged by score; then one rerank orders them all.
        """
        if len(queries) == 1:
            return self.pipeline.search(queries[0], count, diversity)
        union = replace(queries[0], also=tuple(query.user_id for query in queries[1:]))
        hits: list[Hit] = []
        for _ in range(2):
            reloads = self.pipeline.reloads(union.owners)
            merged: dict[str, list[tuple[ItemKey, float]]] = {}
            for query, prepared in zip(queries, self.prepare(queries), strict=True):
                for name, ranking in joined(self.pipeline.rankings(query, prepared).rankings).items():
                    merged.setdefault(name, []).extend(ranking)
            rankings: Rankings = {
                name: sorted(ranking, key=lambda pair: -pair[1])[: union.depth] for name, ranking in merged.items()
            }
            loaded: dict[int, Turn] = {}
            fused = self.pipeline.rerank(union, fuse_scored(rankings, k=self.settings.rrf_k), rankings, loaded)
            if diversity > 0:
                fused = self.pipeline.diversify(fused, diversity, count)
            found = self.pipeline.load_hits(fused, count + BURST_SPARES, union.owners, loaded)
            hits = self.pipeline.dated_facts(
                self.pipeline.bursts(found, union.owners, loaded)[:count], union.owners, union.zone
            )
            if self.pipeline.reloads(union.owners) == reloads:
                break
        return hits

    def search_many(self, queries: Sequence[Query], count: int, diversity: float = 0.0) -> list[list[Hit]]:
        """``search`` for each of ``queries`` (a user's memory and shared spaces), their full text read in one pass."""
        if len(queries) < 2:
            return [self.pipeline.search(query, count, diversity) for query in queries]
        return [
            self.pipeline.search(query, count, diversity, prepared=prepared)
            for query, prepared in zip(queries, self.prepare(queries), strict=True)
        ]

    def prepare(self, queries: Sequence[Query]) -> list[Prepared]:
        """Each query's terms and full-text candidates, the queries alike searched together (``fulltext_many``)."""
        terms = [self.pipeline.terms(query) for query in queries]
        alike: dict[_Alike, list[int]] = {}
        for index, (query, asked) in enumerate(zip(queries, terms, strict=True)):
            if asked.match is not None:
                key = _Alike(
                    match=asked.match,
                    filters=query.filters,
                    dated=asked.dated,
                    derived_match=asked.derived_match or asked.match,
                    depth=query.depth,
                    tiers=tuple(query.tiers),
                )
                alike.setdefault(key, []).append(index)

        def read() -> list[Rankings | None]:
            fulltext: list[Rankings | None] = [None] * len(queries)
            for key, members in alike.items():
                users = [queries[index].user_id for index in members]
                for index, found in zip(members, self._fulltext_many(key, users), strict=True):
                    fulltext[index] = found
            return fulltext

        # As in one search, full text runs on the second core while the vectors are scanned.
        batch = self.pipeline.background().submit(read)
        return [Prepared(terms=asked, batch=batch, index=index) for index, asked in enumerate(terms)]

    def _fulltext_many(self, key: _Alike, users: Sequence[str]) -> list[Rankings]:
        """``_fulltext_candidates`` for several memories searched alike, each posting list read once."""
        store, depth = self.store, key.depth
        turns = store.fulltext_many(key.match, users, key.filters, depth)
        inside = store.fulltext_many(key.match, users, key.dated, depth) if key.dated is not None else {}
        derived = store.derived_fulltext_many(key.derived_match, users, depth, key.tiers) if key.tiers else {}
        lists: list[Rankings] = []
        for user in users:
            found: Rankings = {"fulltext": [(("turn", seq), score) for seq, score in turns.get(user, [])]}
            if key.dated is not None:
                found[f"fulltext{DATED}"] = [(("turn", seq), score) for seq, score in inside.get(user, [])]
            if key.tiers:
                found["derived"] = [(("derived", seq), score) for seq, score in derived.get(user, [])]
            lists.append(found)
        return lists
