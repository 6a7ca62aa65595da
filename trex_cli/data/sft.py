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

import bisect
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import numpy as np

from trex_cli.artifacts import StageState, write_json_atomic
from trex_cli.data import build, dataset_card
from trex_cli.data.cleaning import clean
from trex_cli.data.config import DataConfig
from trex_cli.data.decontaminate import BenchmarkIndex
from trex_cli.data.exclusions import ExclusionLog
from trex_cli.data.mixing import mix_by_shares
from trex_cli.data.normalize import WordHasher, normalize_text
from trex_cli.data.readers import BadInput, Conversation, read_conversations
from trex_cli.data.shards import save_rows, write_dataset_dict
from trex_cli.data.tokenizer import DataTokenizer, load_tokenizer, train_tokenizer

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


def _rows(samples: list[tuple[list[int], list[int]]], order: list[int], seq_len: int, packing: bool, pad_id: int, rng):
    """Flat arrays and row offsets for the chosen samples, packed or one per row."""
    if packing and order:
        lengths = np.array([len(samples[i][0]) for i in order])
        groups = [[order[k] for k in group] for group in pack_samples(lengths, seq_len)]
    else:
        groups = [[i] for i in order]
    groups = [groups[k] for k in rng.permutation(len(groups))]
    ids, masks, positions, offsets = [], [], [], [0]
    for group in groups:
        row_ids, row_mask, row_positions = [], [], []
        for index in group:
            sample_ids, sample_mask = samples[index]
            row_ids += sample_ids
            row_mask += sample_mask
            row_positions += range(len(sample_ids))
        if packing and len(row_ids) < seq_len:
            padding = seq_len - len(row_ids)
            row_ids += [pad_id] * padding
            row_mask += [0] * padding
            row_positions += range(padding)  # padding is its own segment: no sample attends to it
        ids += row_ids
        masks += row_mask
        positions += row_positions
        offsets.append(len(ids))
    return (
        np.array(offsets, dtype=np.int64),
        np.array(ids, dtype=np.int32),
        np.array(masks, dtype=np.int8),
        np.array(positions, dtype=np.int32),
    )


def _choose_tokenizer(config: DataConfig, out: Path, state: StageState, texts) -> DataTokenizer:
    if config.tokenizer:
        return load_tokenizer(config.tokenizer)
    saved = Path(out) / "tokenizer"
    if state is StageState.RESUME and (saved / "tokenizer.json").is_file():
        return load_tokenizer(saved)
    return train_tokenizer(texts, config.vocab_size)


def build_sft(
    config: DataConfig,
    out: Path,
    run_dir: Path,
    force: bool = False,
    show_progress: bool = True,
    save_recipe: Callable[[Path], object] | None = None,
) -> dict | None:
    """Build the SFT data folder `out`; returns the summary (also saved in stats.json), or None when
    `out` holds this build finished already."""
    started = time.perf_counter()
    plan = build.plan_build(config, "sft", out, run_dir, force)
    config, sources, folder = plan.config, plan.sources, plan.folder
    section = config.sft
    seq_len = section.seq_len
    if build.finished_already(folder):
        return None

    exclusions = ExclusionLog()
    bad = BadInput(exclusions, config.skip_bad)
    hasher = WordHasher()
    rng = np.random.default_rng(config.seed)
    with build.progress_bar(show_progress) as progress:
        read_task = progress.add_task("reading sources", total=len(sources))
        conversations: list[Conversation] = []
        read_counts: dict[str, int] = {}
        not_selected: Counter[str] = Counter()
        for source in sources:
            source_conversations = read_conversations(source, bad)
            read_counts[source.path] = len(source_conversations)
            for conversation in source_conversations:
                if section.stage == "program" and conversation.answer_style not in (None, PROGRAM_STYLE):
                    not_selected[source.path] += 1
                    continue
                for message in conversation.messages:
                    message["content"] = normalize_text(message["content"])
                conversations.append(conversation)
            progress.advance(read_task)

        benchmarks = BenchmarkIndex(config.decontaminate, config.decontaminate_ngram, hasher) if config.decontaminate else None
        clean_task = progress.add_task("dedup + decontamination", total=len(conversations))
        kept = clean(
            conversations, lambda c: c.text, config, benchmarks, exclusions, hasher,
            advance=lambda n: progress.advance(clean_task, n),
        )
        if not kept:
            raise ValueError(
                f"no SFT samples left ({len(conversations)} selected; dropped: {exclusions.by_reason()}); "
                "check the sources, data.sft.stage and exclusions"
            )
        state = folder.prepare()  # inputs are read and clean: now the output folder is touched
        tokenizer = _choose_tokenizer(config, out, state, (c.text for c in kept))
        tokenizer.save(Path(out) / "tokenizer")

        mask_task = progress.add_task("chat template + loss masks", total=len(kept))
        samples: list[tuple[list[int], list[int]]] = []
        sample_conversations: list[Conversation] = []
        for conversation in kept:
            try:
                input_ids, loss_mask = tokenize_conversation(tokenizer, conversation.messages)
            except MaskError as error:
                bad(conversation.source, conversation.origin, f"sample {conversation.id}: {error}", "fix the sample")
                progress.advance(mask_task)
                continue
            if len(input_ids) > seq_len:
                exclusions.add(
                    "too_long", source=conversation.source, id=conversation.id, where=conversation.origin,
                    tokens=len(input_ids), seq_len=seq_len,
                )
            else:
                samples.append((input_ids, loss_mask))
                sample_conversations.append(conversation)
            progress.advance(mask_task)
        if not samples:
            raise ValueError(f"every SFT sample is longer than seq_len={seq_len}; raise data.sft.seq_len")
        lengths = np.array([len(ids) for ids, _ in samples], dtype=np.int64)

        train_items, validation_items = build.split_validation(lengths, config.validation_share, 1, rng)
        source_names = [s.path for s in sources]
        shares = {s.path: s.share for s in sources}
        split_rows, mixes = {}, {}
        for split, items, max_upsample, total in (
            ("train", train_items, config.max_upsample, section.total_tokens),
            ("validation", validation_items, 1.0, 0),
        ):
            by_source = {name: [] for name in source_names}
            for index in items:
                by_source[sample_conversations[index].source].append(int(index))
            token_counts = {name: lengths[np.array(by_source[name], dtype=np.int64)] for name in source_names}
            mix = mix_by_shares(token_counts, shares, total, max_upsample, rng)
            order = [by_source[name][i] for name in source_names for i in mix[name].selected]
            offsets, ids, masks, positions = _rows(samples, order, seq_len, section.packing, tokenizer.pad_token_id, rng)
            rows = save_rows(Path(out) / split, offsets, ids, masks, positions, mask_alias="completion_mask")
            split_rows[split] = {
                "rows": rows, "samples": len(order), "tokens": int(len(ids)), "target_tokens": int(masks.sum())
            }
            mixes[split] = mix

    wall = time.perf_counter() - started
    kept_by_source = Counter(c.source for c in sample_conversations)
    tokens_by_source = Counter()
    for index, conversation in enumerate(sample_conversations):
        tokens_by_source[conversation.source] += int(lengths[index])
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
        "samples_kept": len(samples),
        "answer_styles": dict(Counter(c.answer_style or "none" for c in sample_conversations)),
        "drops_by_reason": exclusions.by_reason(),
        "splits": split_rows,
        "tokenizer": {"origin": tokenizer.origin, "vocab_size": tokenizer.vocab_size},
        "cleaning": build.cleaning_settings(config),
        "seed": config.seed,
        "versions": dataset_card.software_versions(),
        "lengths": dataset_card.length_summary(lengths),
        "histogram": histogram,
        "decontamination": {"ngram": config.decontaminate_ngram, "benchmarks": benchmarks.item_counts}
        if benchmarks
        else None,
        "wall_time_s": round(wall, 3),
    }
    write_json_atomic(Path(out) / "stats.json", stats)
    dataset_card.write_card(out, "sft", stats, meta)
    if save_recipe is not None:
        save_recipe(Path(out))
    folder.finish(
        counts={
            "samples_read": stats["samples_read"],
            "samples_kept": len(samples),
            "train_rows": split_rows["train"]["rows"],
            "validation_rows": split_rows["validation"]["rows"],
            "train_target_tokens": split_rows["train"]["target_tokens"],
            "dropped": sum(exclusions.counts.values()),
        },
        extra={"meta": meta},
    )
    return stats
