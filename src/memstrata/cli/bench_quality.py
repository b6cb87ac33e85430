"""``memstrata bench locomo | locomo-plus | lcs | robustness``: retrieval and answer quality on conversations."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from memstrata.cli.bench_options import (
    ConversationsOption,
    DataOption,
    DetailsOption,
    EmbedderOption,
    HomeOption,
    JsonOutOption,
    QuestionLimitOption,
    ThreadsOption,
    chosen_conversations,
    write_json,
    write_json_lines,
)
from memstrata.cli.common import console, print_json

app = typer.Typer()


@app.command("locomo")
def locomo(
    data: DataOption = None,
    conversations: ConversationsOption = None,
    limit: QuestionLimitOption = None,
    embedder: EmbedderOption = None,
    threads: ThreadsOption = None,
    embedder_baseline: Annotated[bool, typer.Option(help="Also time the bare embedder on the same turns.")] = True,
    home: HomeOption = None,
    json_out: JsonOutOption = None,
    details: DetailsOption = None,
    tiers: Annotated[
        str, typer.Option(help="Derived tiers hybrid search also covers, e.g. longterm,midterm (default none).")
    ] = "",
    qa: Annotated[
        bool,
        typer.Option("--qa", help="Instead: answer each question with the configured LLM (F1, BLEU-1, LLM judge)."),
    ] = False,
    budget: Annotated[int, typer.Option(help="With --qa: the context token budget per question.")] = 1000,
) -> None:
    """LoCoMo: evidence recall@5/10/20, hit@10, NDCG@10 (hybrid vs BM25 vs dense) and context() quality per budget.

    With --qa (needs an LLM): answers from context() scored by token F1, BLEU-1 and an LLM judge, per category.

    Example: memstrata bench locomo --conversations 1-5 --json results/locomo.json
    """
    from memstrata.bench.locomo import LocomoOptions, run_locomo
    from memstrata.validation import check_tiers

    chosen = chosen_conversations(conversations, limit)
    wanted_tiers = tuple(tier.strip() for tier in tiers.split(",") if tier.strip())
    check_tiers(wanted_tiers)  # said now, not after the conversations are ingested
    if qa:
        _locomo_qa(data, chosen, limit, embedder, threads, home, budget, json_out, details)
        return
    options = LocomoOptions(
        data=data,
        conversations=chosen,
        limit=limit,
        embedder=embedder,
        threads=threads,
        home=home,
        embedder_baseline=embedder_baseline,
        tiers=wanted_tiers,
    )
    report, records = run_locomo(options, console=console)
    write_json(json_out, report)
    write_json_lines(details, records)
    for split, by_mode in report["retrieval"].items():
        table = Table("mode / category", "n", "R@5", "R@10", "R@20", "hit@10", "NDCG@10", title=f"LoCoMo, {split}")
        for mode in by_mode:
            for group, scores in by_mode[mode].items():
                if scores:
                    table.add_row(
                        f"{mode} · {group}",
                        str(int(scores["questions"])),
                        *(f"{scores[key]:.3f}" for key in ("recall@5", "recall@10", "recall@20", "hit@10", "ndcg@10")),
                    )
        console.print(table)
    for split, by_budget in report["context"].items():
        table = Table(
            "budget / category",
            "n",
            "evidence verbatim",
            "evidence shown",
            "answer in ctx",
            "… evidence first",
            "answer in evidence",
            "answer in conv.",
            "strict answer (conv.)",
            "tokens",
            "CRS",
            title=f"Context, {split}",
        )
        for budget, groups in by_budget.items():
            for group, scores in groups.items():
                table.add_row(
                    f"{budget} · {group}",
                    str(int(scores["questions"])),
                    f"{scores['evidence_in_context']:.3f}",
                    f"{scores['evidence_shown']:.3f}",
                    f"{scores['answer_in_context']:.3f}",
                    f"{scores['answer_with_evidence_first']:.3f}",
                    f"{scores['answer_in_evidence_only']:.3f}",
                    f"{scores['answer_in_whole_conversation']:.3f}",
                    f"{scores['answer_string_in_context']:.3f} ({scores['answer_string_in_whole_conversation']:.3f})",
                    f"{scores['tokens_mean']:.0f}",
                    f"{scores['crs']:.2f}" if "crs" in scores else "",
                )
        console.print(table)
    latency = ", ".join(
        f"{mode} p50 {v['p50']:.1f} ms / p95 {v['p95']:.1f} ms" for mode, v in report["latency_ms"].items()
    )
    console.print(f"{report['turns']} turns ingested in {report['ingest_seconds']:.1f} s; search latency: {latency}")


@app.command("locomo-plus")
def locomo_plus(
    data: Annotated[
        Path | None,
        typer.Option(help="Path to locomo_plus.json (data/locomo_plus.json of the Locomo-Plus repository)."),
    ] = None,
    locomo: Annotated[Path | None, typer.Option(help="Path to locomo10.json (default: found under ../shared).")] = None,
    embedder: EmbedderOption = None,
    threads: ThreadsOption = None,
    home: HomeOption = None,
    limit: Annotated[
        int | None, typer.Option(help="Ask at most this many triggers (every cue is still stored).")
    ] = None,
    json_out: JsonOutOption = None,
    details: Annotated[Path | None, typer.Option(help="Write one JSON line per cue/trigger pair here.")] = None,
) -> None:
    """LoCoMo-Plus implicit recall: cues stitched into LoCoMo, found by later triggers (memstrata vs BM25, dense, RRF).

    Prints hit@10, recall@10 and MRR@10 for all pairs, the tuning half (even index) and the held-out half (odd),
    then per relation type hit@10 and the share of triggers whose context() shows a cue turn, per budget.

    Example: memstrata bench locomo-plus --data locomo_plus.json --json results/locomo-plus.json
    """
    from memstrata.bench.locomo_plus import SYSTEMS, LocomoPlusOptions, run_locomo_plus
    from memstrata.bench.locomo_plus_data import SOURCE
    from memstrata.errors import InvalidInput

    if data is None:
        raise InvalidInput(f"--data is required: pass the path to {SOURCE}")
    if limit is not None and limit < 1:
        raise InvalidInput(f"--limit must be at least 1, not {limit}")
    options = LocomoPlusOptions(data=data, locomo=locomo, embedder=embedder, threads=threads, home=home, limit=limit)
    report, records = run_locomo_plus(options, console=console)
    write_json(json_out, report)
    write_json_lines(details, records)
    splits = report["splits"]
    metrics = {"hit@10": "hit@10", "recall@10": "R@10", "mrr@10": "MRR"}
    table = Table(
        "system",
        *(f"{label} {split} ({splits[split]['items']})" for split in splits for label in metrics.values()),
        title=f"LoCoMo-Plus, {report['items']} triggers ({report['embedder']})",
    )
    for system in SYSTEMS:
        table.add_row(
            system, *(f"{splits[split]['retrieval'][system][key]:.3f}" for split in splits for key in metrics)
        )
    console.print(table)
    budgets = list(splits["all"]["context"])
    table = Table(
        "relation",
        "n",
        *(f"hit@10 {system}" for system in SYSTEMS),
        *(f"cue in ctx@{budget}" for budget in budgets),
        title="LoCoMo-Plus by relation (context: memstrata)",
    )
    for relation, group in {"all": splits["all"], **report["relations"]}.items():
        table.add_row(
            relation,
            str(group["items"]),
            *(f"{group['retrieval'][system]['hit@10']:.3f}" for system in SYSTEMS),
            *(f"{group['context'][budget]['cue_in_context']:.3f}" for budget in budgets),
        )
    console.print(table)
    latency = ", ".join(
        f"{name} p50 {v['p50']:.1f} ms / p95 {v['p95']:.1f} ms" for name, v in report["latency_ms"].items()
    )
    console.print(
        f"{report['locomo_turns']} LoCoMo turns and {report['cue_turns']} cue turns ingested in "
        f"{report['ingest_seconds']:.1f} s; latency: {latency}"
    )


def _locomo_qa(
    data: Path | None,
    conversations: tuple[int, ...],
    limit: int | None,
    embedder: str | None,
    threads: int | None,
    home: Path | None,
    budget: int,
    json_out: Path | None,
    details: Path | None,
) -> None:
    """``bench locomo --qa``: run the QA protocol, write its JSON, print its table."""
    from memstrata.bench.qa import QaOptions, run_qa
    from memstrata.validation import check_budget

    options = QaOptions(
        data=data,
        conversations=conversations,
        limit=limit,
        embedder=embedder,
        threads=threads,
        home=home,
        token_budget=check_budget(budget, "--budget"),
    )
    report, records = run_qa(options, console=console)
    write_json(json_out, report)
    write_json_lines(details, records)
    table = Table(
        "category", "n", "F1", "BLEU-1", "judge", title=f"LoCoMo QA, {report['llm']['provider']}, {budget} tokens"
    )
    for group, scores in report["scores"].items():
        table.add_row(
            group,
            str(int(scores["questions"])),
            *(f"{scores[key]:.3f}" if key in scores else "" for key in ("f1", "bleu1", "judge_accuracy")),
        )
    console.print(table)
    tokens = report["tokens_per_question"]
    console.print(
        f"per question: {tokens['context_tokens']:.0f} context tokens; "
        f"{report['answer_errors']} answer errors, {report['judge_errors']} judge errors"
    )


@app.command("lcs")
def lcs(
    facts: Annotated[int, typer.Option(help="Facts seeded at the start of the conversation.")] = 20,
    filler: Annotated[int, typer.Option(help="Unrelated turns between the facts and the questions.")] = 200,
    budget: Annotated[
        int, typer.Option(help="Token budget of both the memory block and the recent-turns window.")
    ] = 1000,
    seed: Annotated[int, typer.Option(help="Seed of the fact and filler generators.")] = 11,
    embedder: EmbedderOption = None,
    home: HomeOption = None,
    json_out: JsonOutOption = None,
) -> None:
    """LCS: recall of facts seeded many turns ago, memstrata's context() against a recent-turns window.

    Example: memstrata bench lcs --facts 20 --filler 200 --json results/lcs.json
    """
    from memstrata.bench.lcs import LcsOptions, run_lcs
    from memstrata.validation import check_budget

    check_budget(budget, "--budget")
    report = run_lcs(
        LcsOptions(facts=facts, filler=filler, token_budget=budget, seed=seed, embedder=embedder, home=home)
    )
    write_json(json_out, report)
    table = Table(
        "recalled", "memstrata", "recent turns only", "ratio", title=f"LCS, {facts} facts, {filler} filler turns"
    )
    for mode in ("in_context", "answers"):
        result = report.get(mode)
        if result:
            ratio = result["ratio"]
            table.add_row(
                mode.replace("_", " "),
                f"{result['memstrata']['lcs']:.3f}",
                f"{result['baseline']['lcs']:.3f}",
                f"{ratio:.2f}" if ratio is not None else "∞ (baseline 0)",
            )
    console.print(table)
    console.print(
        f"window: last {report['baseline_window_turns']} turns; "
        f"answers: {report['answers']['llm'] if report['answers'] else 'no LLM configured (in-context only)'}"
    )
    if json_out is None:
        print_json(report)


@app.command("robustness")
def robustness(
    data: DataOption = None,
    perturbations: Annotated[
        str | None,
        typer.Option(help="Comma list of lowercase, typos, split, names, filler (default: all; clean always runs)."),
    ] = None,
    conversations: ConversationsOption = None,
    limit: QuestionLimitOption = None,
    seed: Annotated[int | None, typer.Option(help="Seed of the perturbations (default: a fixed one, 1).")] = None,
    embedder: EmbedderOption = None,
    threads: ThreadsOption = None,
    json_out: JsonOutOption = None,
    details: DetailsOption = None,
) -> None:
    """LoCoMo as real chats read: lower case, typos, split messages, nicknames, filler; each scored beside clean.

    Per variant: evidence recall@10 (hybrid search; a split piece counts as its turn) by half,
    answer-in-context at 1,000 tokens, its ceiling (the answer in the whole perturbed
    conversation), and the change from the clean run.

    Example: memstrata bench robustness --conversations 1-5 --json results/robustness.json
    """
    from memstrata.bench.perturb import DEFAULT_SEED, PERTURBATIONS, check_perturbations
    from memstrata.bench.robustness import ROW_CAPTION, ROW_HEADINGS, RobustnessOptions, run_robustness, summary_rows

    chosen = chosen_conversations(conversations, limit)
    wanted = check_perturbations(perturbations.split(",") if perturbations is not None else PERTURBATIONS)
    options = RobustnessOptions(
        data=data,
        perturbations=wanted,
        conversations=chosen,
        limit=limit,
        seed=DEFAULT_SEED if seed is None else seed,
        embedder=embedder,
        threads=threads,
    )
    report, records = run_robustness(options, console=console)
    write_json(json_out, report)
    write_json_lines(details, records)

    table = Table(
        *ROW_HEADINGS,
        title=f"LoCoMo robustness, {report['questions']} questions ({report['embedder']}, seed {report['seed']})",
        caption=ROW_CAPTION,
    )
    for row in summary_rows(report):
        table.add_row(*row)
    console.print(table)
    seconds = ", ".join(
        f"{name} {v['turns']} turns {v['ingest_seconds']:.0f} + {v['ask_seconds']:.0f} s"
        for name, v in report["variants"].items()
    )
    console.print(f"ingest + ask: {seconds}; {report['seconds']:.0f} s in all")
