"""`trex data sft`: chat samples -> cleaned -> rendered with the chat template -> loss-masked rows.

Loss masks are derived and then verified, not assumed. For each assistant turn the conversation is
rendered up to the turn's generation prompt and through the turn; the turn's answer must follow the
prompt verbatim, which gives its character span, and the end-of-turn text after it (the tiny
template's `<|eos|>`) is a target too, so the model learns to stop. The whole conversation is
tokenized once with character offsets; the tokens inside a span are targets. Each span's target
tokens must then decode to exactly that span's text, and skipping special tokens, to exactly the
assistant's message; a sample with no assistant turn is an error (never a silent all-zero mask).

Samples longer than `seq_len` are dropped and counted. With `packing`, samples share rows of exactly
`seq_len` tokens (best fit, largest first), each restarting `position_ids` at 0, the rest of a row
filled with pad tokens (loss 0). Stage "program" keeps only synth samples whose answer is a program
(stage one of T-Rex's two-stage SFT); samples without an answer style (general replay data) stay in
both stages, as the paper mixes general instruction data into SFT.
"""

from __future__ import annotations

import array
import bisect
import json
import os
import shutil
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

from trex_cli.artifacts import StageState, write_json_atomic
from trex_cli.data import build, dataset_card
from trex_cli.data.config import DataConfig
from trex_cli.data.cpt import CHUNK_TOKENS, TokenStore, spilled_texts
from trex_cli.data.decontaminate import BenchmarkIndex
from trex_cli.data.exclusions import ExclusionLog
from trex_cli.data.mixing import mix_by_shares
from trex_cli.data.normalize import WordHasher, normalize_text
from trex_cli.data.readers import BadInput, Conversation, conversation_units, unit_conversations
from trex_cli.data.sharded import (
    CleanTask,
    ShardPlan,
    decide_duplicates,
    reporting_errors,
    run_phase,
    scratch_folder,
)
from trex_cli.data.shards import RowWriter, write_dataset_dict
from trex_cli.data.tokenizer import DataTokenizer, load_resumed, load_tokenizer, train_tokenizer

PROGRAM_STYLE = "program"


class MaskError(ValueError):
    """A sample whose loss mask cannot be derived or does not verify."""


def tokenize_conversation(tokenizer: DataTokenizer, messages: list[dict]) -> tuple[list[int], list[int]]:
    """(input_ids, loss_mask) of one conversation, the mask verified by decoding (see module doc)."""
    full = tokenizer.render_chat(messages)
    spans = []  # (start, end of answer, end of turn) in characters of `full`
    for index, message in enumerate(messages):
        if message["role"] != "assistant":
            continue
        prompt = tokenizer.render_chat(messages[:index], add_generation_prompt=True)
        through = tokenizer.render_chat(messages[: index + 1])
        content = message["content"]
        answer_start, answer_end = len(prompt), len(prompt) + len(content)
        if not (through.startswith(prompt) and through[answer_start:answer_end] == content and full.startswith(through)):
            raise MaskError(
                f"the chat template does not render assistant turn {index} verbatim after its generation prompt, "
                "so its loss span cannot be derived; use a template that renders earlier turns unchanged"
            )
        spans.append((answer_start, answer_end, len(through)))
    if not spans:
        raise MaskError("no assistant message: nothing to learn from (every SFT sample needs an assistant turn)")
    encoding = tokenizer.backend.encode(full, add_special_tokens=False)
    input_ids = list(encoding.ids)
    offsets = encoding.offsets
    loss_mask = [0] * len(input_ids)
    for answer_start, answer_end, turn_end in spans:
        targets = [
            position for position, (start, end) in enumerate(offsets)
            if start >= answer_start and end <= turn_end and end > start
        ]
        if not targets or targets != list(range(targets[0], targets[-1] + 1)):
            raise MaskError("the assistant turn's tokens are not one contiguous run; cannot mask it")
        target_ids = [input_ids[position] for position in targets]
        if tokenizer.decode(target_ids) != full[answer_start:turn_end]:
            raise MaskError("the masked tokens do not decode to the assistant turn (a token crosses its boundary)")
        if tokenizer.decode(target_ids, skip_special_tokens=True) != full[answer_start:answer_end]:
            raise MaskError("the masked tokens, without special tokens, do not decode to the assistant message")
        for position in targets:
            loss_mask[position] = 1
    return input_ids, loss_mask


def pack_samples(lengths: np.ndarray, seq_len: int) -> list[list[int]]:
    """Best-fit-decreasing bins of sample indices whose lengths sum to at most `seq_len`."""
    order = np.argsort(-lengths, kind="stable")
    free_space: list[tuple[int, int]] = []  # sorted (free tokens, bin number)
    bins: list[list[int]] = []
    for index in order:
        length = int(lengths[index])
        slot = bisect.bisect_left(free_space, (length, -1))
        if slot < len(free_space):
            free, bin_number = free_space.pop(slot)
        else:
            free, bin_number = seq_len, len(bins)
            bins.append([])
        bins[bin_number].append(int(index))
        if free - length > 0:
            bisect.insort(free_space, (free - length, bin_number))
    return bins


def conversation_items(plan, unit, bad: BadInput) -> Iterator[tuple[str, str, str | None, str | None]]:
    """An SFT unit's items for the clean phase (`sharded.CleanTask`): (id, origin, the text cleaning
    compares, the conversation as JSON); stage "program" leaves out the answers of other styles (text None)."""
    program_only = plan.config.sft.stage == "program"
    for conversation in unit_conversations(plan.source_of(unit), unit, bad):
        if program_only and conversation.answer_style not in (None, PROGRAM_STYLE):
            yield conversation.id, conversation.origin, None, None
            continue
        for message in conversation.messages:
            message["content"] = normalize_text(message["content"])
        record = [conversation.id, conversation.origin, conversation.answer_style, conversation.messages]
        yield conversation.id, conversation.origin, conversation.text, json.dumps(record, ensure_ascii=False)


def _kept_conversations(folder: Path, source: str) -> Iterator[Conversation]:
    """The kept conversations of one unit's folder, in order."""
    kept = np.load(folder / "kept.npy")
    for payload, keep in zip(spilled_texts(folder / "texts.bin"), kept, strict=True):
        if keep:
            item_id, origin, style, messages = json.loads(payload)
            yield Conversation(id=item_id, source=source, messages=messages, answer_style=style, origin=origin)


class TemplateTask:
    """The tokenize phase of the SFT build as a pipeline step (`(data, rank, world_size)`): task `rank`
    renders the kept conversations of units `rank, rank + world_size, ...` with the build's tokenizer
    (`out/tokenizer`) and its chat template, and writes their ids (`tokens.i32`), verified loss masks
    (`mask.i8`) and offsets (`offsets.npy`, last: a unit with it is done), and one line per kept conversation
    to `samples.jsonl`: ["ok", answer style] or ["drop", its exclusion row] (too long, or a mask that does not
    verify, which without `skip_bad` stops the task with the sample's error)."""

    def __init__(self, plan) -> None:
        self.plan = plan

    def __call__(self, data=None, rank: int = 0, world_size: int = 1):
        plan = self.plan
        todo = [k for k in range(rank, len(plan.units), world_size)
                if not (plan.unit_folder(k) / "offsets.npy").is_file()]
        if not todo:
            return data
        tokenizer = load_tokenizer(plan.out / "tokenizer")
        with reporting_errors(plan.work, rank):
            for number in todo:
                self._template_unit(tokenizer, number)
        return data

    def _template_unit(self, tokenizer: DataTokenizer, number: int) -> None:
        plan, seq_len = self.plan, self.plan.config.sft.seq_len
        folder = plan.unit_folder(number)
        drops = ExclusionLog()
        bad = BadInput(drops, plan.config.skip_bad)
        offsets = [0]
        pid = os.getpid()
        with open(folder / f".tokens.{pid}", "wb") as ids_file, open(folder / f".mask.{pid}", "wb") as mask_file, \
                open(folder / f".samples.{pid}", "w", encoding="utf-8") as samples:
            for conversation in _kept_conversations(folder, plan.units[number].source):
                before = len(drops.rows)
                try:
                    input_ids, loss_mask = tokenize_conversation(tokenizer, conversation.messages)
                except MaskError as error:
                    bad(conversation.source, conversation.origin, f"sample {conversation.id}: {error}", "fix the sample")
                else:
                    if len(input_ids) > seq_len:
                        drops.add("too_long", source=conversation.source, id=conversation.id,
                                  where=conversation.origin, tokens=len(input_ids), seq_len=seq_len)
                    else:
                        ids_file.write(np.asarray(input_ids, dtype=np.int32).tobytes())
                        mask_file.write(np.asarray(loss_mask, dtype=np.int8).tobytes())
                        offsets.append(offsets[-1] + len(input_ids))
                        samples.write(json.dumps(["ok", conversation.answer_style]) + "\n")
                        continue
                row = drops.rows[before]
                samples.write(json.dumps(["drop", row], ensure_ascii=False, default=str) + "\n")
        for name in ("tokens.i32", "mask.i8", "samples.jsonl"):
            stem = name.split(".")[0]
            os.replace(folder / f".{stem}.{pid}", folder / name)
        np.save(folder / ".offsets.npy", np.asarray(offsets, dtype=np.int64))
        os.replace(folder / ".offsets.npy", folder / "offsets.npy")


def _write_rows(folder: Path, ids: TokenStore, masks: TokenStore, lengths: np.ndarray, order: list[int],
                seq_len: int, packing: bool, pad_id: int, rng) -> dict:
    """The chosen samples as rows of the split `folder`, packed (best fit) or one per row, in a random order;
    read from the token files and written a chunk at a time. Returns the split's counts."""
    if packing and order:
        groups = [[order[k] for k in group] for group in pack_samples(lengths[np.asarray(order)], seq_len)]
    else:
        groups = [[i] for i in order]
    writer = RowWriter(folder, mask_alias="completion_mask")
    tokens = targets = 0
    row_offsets, id_parts, mask_parts, position_parts, buffered = [0], [], [], [], 0

    def flush():
        nonlocal row_offsets, id_parts, mask_parts, position_parts, buffered
        if len(row_offsets) > 1:
            writer.append_flat(np.asarray(row_offsets), np.concatenate(id_parts), np.concatenate(mask_parts),
                               np.concatenate(position_parts))
        row_offsets, id_parts, mask_parts, position_parts, buffered = [0], [], [], [], 0

    for number in rng.permutation(len(groups)):
        row_length = 0
        for index in groups[number]:
            length = int(lengths[index])
            id_parts.append(ids.read(index, 0, length))
            mask_parts.append(masks.read(index, 0, length))
            position_parts.append(np.arange(length, dtype=np.int32))
            targets += int(mask_parts[-1].sum())
            row_length += length
        if packing and row_length < seq_len:
            padding = seq_len - row_length
            id_parts.append(np.full(padding, pad_id, dtype=np.int32))
            mask_parts.append(np.zeros(padding, dtype=np.int8))
            position_parts.append(np.arange(padding, dtype=np.int32))  # padding is its own segment
            row_length = seq_len
        tokens += row_length
        buffered += row_length
        row_offsets.append(row_offsets[-1] + row_length)
        if buffered >= CHUNK_TOKENS:
            flush()
    flush()
    rows = writer.close()
    return {"rows": rows, "samples": len(order), "tokens": tokens, "target_tokens": targets}


def _choose_tokenizer(config: DataConfig, out: Path, state: StageState, texts) -> DataTokenizer:
    if config.tokenizer:
        return load_tokenizer(config.tokenizer)
    saved = Path(out) / "tokenizer"
    if state is StageState.RESUME and (saved / "tokenizer.json").is_file():
        return load_resumed(saved)
    return train_tokenizer(texts, config.vocab_size)


def build_sft(
    config: DataConfig,
    out: Path,
    run_dir: Path,
    force: bool = False,
    show_progress: bool = True,
    save_recipe: Callable[[Path], object] | None = None,
    executor=None,
    dry_run: bool = False,
) -> dict | Path | None:
    """Build the SFT data folder `out`; returns the summary (also saved in stats.json), or None when
    `out` holds this build finished already.

    The build streams, by units (a source's files; `readers.conversation_units`), in the phases of the
    sharded CPT build (`trex_cli.data.sharded`): clean (read, stage filter, normalize, empty and benchmark
    drops, dedup digests and MinHash signatures; a unit's conversations spilled to a scratch file), dedup in
    read order, the tokenizer, the chat template and loss masks (tokens and masks to files), then split, mix
    and pack a chunk at a time. `executor` (`[run.executor]`) with more than one task, or a cluster executor,
    runs the clean and template phases as tasks on it; the dataset does not depend on it. `dry_run` (Slurm)
    writes the clean phase's submission and returns its script. Finished units survive an interruption in
    the scratch folder beside `out`, so the same command resumes."""
    started = time.perf_counter()
    if executor is not None:
        from trex_cli.executors import check_settings

        check_settings(executor)  # bad executor settings: an error before any work
    if dry_run and (executor is None or executor.kind != "slurm"):
        raise ValueError("--dry-run writes the Slurm submission without sending it; use it with --executor slurm")
    plan_ = build.plan_build(config, "sft", out, run_dir, force)
    config, sources, folder = plan_.config, plan_.sources, plan_.folder
    section = config.sft
    seq_len = section.seq_len
    if build.finished_already(folder):
        return None
    if executor is not None and executor.kind == "local" and executor.tasks == 1:
        executor = None  # one local task: this process
    units = [unit for source in sources for unit in conversation_units(source)]
    if not units:
        raise ValueError(f"the sources ({', '.join(s.path for s in sources)}) hold no files of chat records; "
                         "check them")
    work = scratch_folder(out, folder.config)
    work.mkdir(parents=True, exist_ok=True)
    plan = ShardPlan(config, sources, units, work, Path(out).resolve())
    if dry_run:
        return run_phase("clean", CleanTask(plan, conversation_items), plan, executor, dry_run=True)
    rng = np.random.default_rng(config.seed)
    tasks = 1 if executor is None else min(executor.tasks, len(units))
    with build.progress_bar(show_progress) as progress:
        bar = progress.add_task(f"reading + cleaning {len(units)} files in {tasks} task(s)", total=1)
        run_phase("clean", CleanTask(plan, conversation_items), plan, executor)
        progress.advance(bar)
        decisions = decide_duplicates(plan)
        exclusions, read_counts, not_selected = decisions.exclusions, decisions.read_counts, decisions.not_selected
        if len(decisions.kept_sources) == 0:
            selected = sum(read_counts.values()) - sum(not_selected.values())
            raise ValueError(
                f"no SFT samples left ({selected} selected; dropped: {exclusions.by_reason()}); "
                "check the sources, data.sft.stage and exclusions"
            )
        state = folder.prepare()  # inputs are read and clean: now the output folder is touched
        folders = [plan.unit_folder(k) for k in range(len(units))]
        kept_texts = (c.text for k, f in enumerate(folders) for c in _kept_conversations(f, units[k].source))
        tokenizer = _choose_tokenizer(config, out, state, kept_texts)
        tokenizer.save(Path(out) / "tokenizer")

        bar = progress.add_task("chat template + loss masks", total=1)
        run_phase("tokenize", TemplateTask(plan), plan, executor)
        progress.advance(bar)
        source_number = {source.path: number for number, source in enumerate(sources)}
        sample_sources, styles = array.array("H"), Counter()
        for number, unit_folder in enumerate(folders):
            for line in (unit_folder / "samples.jsonl").read_text(encoding="utf-8").splitlines():
                verdict, detail = json.loads(line)
                if verdict == "drop":
                    exclusions.add(detail.pop("reason"), **detail)
                else:
                    sample_sources.append(source_number[units[number].source])
                    styles[detail or "none"] += 1
        offsets = [np.load(f / "offsets.npy") for f in folders]
        ids = TokenStore([f / "tokens.i32" for f in folders], offsets)
        masks = TokenStore([f / "mask.i8" for f in folders], offsets, dtype=np.int8)
        lengths = ids.lengths.astype(np.int64)
        if len(lengths) == 0:
            raise ValueError(f"every SFT sample is longer than seq_len={seq_len}; raise data.sft.seq_len")
        sources_of = np.frombuffer(sample_sources, dtype=np.uint16)

        train_items, validation_items = build.split_validation(lengths, config.validation_share, 1, rng)
        source_names = [s.path for s in sources]
        shares = {s.path: s.share for s in sources}
        split_rows, mixes = {}, {}
        with ids, masks:
            for split, items, max_upsample, total in (
                ("train", train_items, config.max_upsample, section.total_tokens),
                ("validation", validation_items, 1.0, 0),
            ):
                by_source = {name: [] for name in source_names}
                for index in items:
                    by_source[source_names[sources_of[index]]].append(int(index))
                token_counts = {name: lengths[np.array(by_source[name], dtype=np.int64)] for name in source_names}
                mix = mix_by_shares(token_counts, shares, total, max_upsample, rng)
                order = [by_source[name][i] for name in source_names for i in mix[name].selected]
                split_rows[split] = _write_rows(Path(out) / split, ids, masks, lengths, order, seq_len,
                                                section.packing, tokenizer.pad_token_id, rng)
                mixes[split] = mix

    wall = time.perf_counter() - started
    kept_by_source = Counter(source_names[n] for n in sources_of)
    tokens_by_source = {name: int(lengths[sources_of == number].sum()) for number, name in enumerate(source_names)}
    train_total = sum(m.tokens_selected for m in mixes["train"].values()) or 1
    source_rows = [
        {
            "source": name,
            "read": read_counts[name],
            "not_selected_for_stage": not_selected[name],
            "kept": kept_by_source[name],
            "tokens_kept": tokens_by_source[name],
            "tokens_in_mix": mixes["train"][name].tokens_selected,
            "target_share": shares[name],
            "share_of_mix": round(mixes["train"][name].tokens_selected / train_total, 4),
            "repeats": round(mixes["train"][name].repeats, 3),
            "capped_by_max_upsample": mixes["train"][name].capped,
        }
        for name in source_names
    ]
    benchmarks = (BenchmarkIndex(config.decontaminate, config.decontaminate_ngram, WordHasher()).item_counts
                  if config.decontaminate else None)
    write_dataset_dict(Path(out), list(split_rows))
    exclusions.write(Path(out) / "exclusions.jsonl")
    histogram = "lengths.png"
    dataset_card.write_histogram(Path(out) / histogram, lengths, seq_len, "SFT sample lengths (after cleaning)", "sample")
    meta = dataset_card.write_meta(out, "sft", seq_len, tokenizer, split_rows["train"]["rows"], split_rows["validation"]["rows"])
    meta["packing"] = section.packing
    meta["stage"] = section.stage
    write_json_atomic(Path(out) / "meta.json", meta)
    stats = {
        "kind": "sft",
        "out": str(out),
        "stage": section.stage,
        "packing": section.packing,
        "sources": source_rows,
        "samples_read": sum(read_counts.values()),
        "samples_kept": len(lengths),
        "answer_styles": dict(styles),
        "drops_by_reason": exclusions.by_reason(),
        "splits": split_rows,
        "tokenizer": {"origin": tokenizer.origin, "vocab_size": tokenizer.vocab_size},
        "cleaning": build.cleaning_settings(config),
        "seed": config.seed,
        "versions": dataset_card.software_versions(),
        "lengths": dataset_card.length_summary(lengths),
        "histogram": histogram,
        "decontamination": {"ngram": config.decontaminate_ngram, "benchmarks": benchmarks}
        if config.decontaminate else None,
        "wall_time_s": round(wall, 3),
    }
    write_json_atomic(Path(out) / "stats.json", stats)
    dataset_card.write_card(out, "sft", stats, meta)
    if save_recipe is not None:
        save_recipe(Path(out))
    folder.finish(
        counts={
            "samples_read": stats["samples_read"],
            "samples_kept": len(lengths),
            "train_rows": split_rows["train"]["rows"],
            "validation_rows": split_rows["validation"]["rows"],
            "train_target_tokens": split_rows["train"]["target_tokens"],
            "dropped": sum(exclusions.counts.values()),
        },
        extra={"meta": meta},
    )
    shutil.rmtree(work, ignore_errors=True)
    return stats
