"""Statement skeletons per family, declared and observed: `python -m data_synth.stats [FOLDER]`.

Without a folder it prints, per family and split, how many statement skeletons the family declares
(`data_synth.statements.skeleton_count`, the smallest over the representations). With a synth folder it
also counts the distinct skeletons its records actually use, measured on the statements themselves with
numbers and entity names masked (`masked_skeleton`), and prints the eval/train 13-gram overlap the
synthesis recorded in `summary.json`. With `--programs` it prints, per family, the distinct program
skeletons (the model source `model_code_for` gives, which reads its numbers from `data`) over a fixed
sample of instances of every difficulty and scenario, and over the folder's records when one is given.
With `--shared-ngrams` it lists the 13-grams the folder's eval items share with its training SFT samples
(what decontamination compares), the most widely shared first, with their families and an example, and
per family the share of eval items that hold one: the sources of the overlap, to reword. With
`--rendered [FAMILY ...]` it does the same without solving anything: it renders candidates as `trex synth`
would (eval statements of the named families, or of all, against the training SFT texts of every family),
which takes seconds, so a family's wording can be checked while it is being written.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

from data_synth.family import REPRESENTATIONS
from data_synth.statements import (
    NGRAM,
    SPLIT_NAMES,
    entity_names,
    masked_skeleton,
    shared_ngrams,
    skeleton_count,
)

_SPLIT_FOLDERS = {"train": "problems", "eval": "eval/problems"}


def _each_record(folder: Path, read):
    """(split, record, read(record)) for every problem record of a synth folder; a line that is not a
    record `read` can use is an error naming its file and line."""
    for split, sub in _SPLIT_FOLDERS.items():
        for path in sorted((folder / sub).glob("shard-*.jsonl")):
            for number, line in enumerate(path.read_text().splitlines(), start=1):
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                    value = read(record)
                except (json.JSONDecodeError, KeyError, TypeError) as error:
                    raise ValueError(f"{path}:{number}: not a synth problem record of a known family "
                                     f"({type(error).__name__}: {error})") from None
                yield split, record, value


def declared_counts() -> dict[str, dict[str, int]]:
    """family -> split -> the fewest skeletons any representation of it has."""
    from data_synth.families import all_families

    return {name: {split: min(skeleton_count(split, representation, len(family.scenarios_for(split)),
                                             family.phrasings)
                              for representation in REPRESENTATIONS) for split in SPLIT_NAMES}
            for name, family in all_families().items()}


def observed_counts(folder: Path) -> dict[str, dict[str, int]]:
    """family -> split -> distinct masked statements among the folder's records."""
    if not (folder / "problems").is_dir():
        raise ValueError(f"{folder} is not a synth folder (no problems/); give the folder `trex synth` wrote")
    seen: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for split, record, text in _each_record(
            folder, lambda record: masked_skeleton(record["statement"], entity_names(record["parameters"]))):
        seen[record["family"]][split].add(text)
    return {name: {split: len(by_split.get(split, ())) for split in SPLIT_NAMES}
            for name, by_split in sorted(seen.items())}


def program_skeleton_counts(per_difficulty: int = 24, seed: int = 0) -> dict[str, int]:
    """family -> distinct `model_code_for` texts over `per_difficulty` instances of each standard
    difficulty (scenarios drawn in turn), sampled with a fixed seed."""
    import random

    from data_synth.families import all_families
    from data_synth.family import DIFFICULTIES

    counts = {}
    for name, family in all_families().items():
        codes = set()
        for difficulty in DIFFICULTIES:
            for k in range(per_difficulty):
                rng = random.Random(f"trex-stats:{seed}:{name}:{difficulty}:{k}")
                scenario = family.scenarios[k % len(family.scenarios)]
                codes.add(family.model_code_for(family.sample(rng, difficulty, scenario)))
        counts[name] = len(codes)
    return counts


def observed_program_counts(folder: Path) -> dict[str, int]:
    """family -> distinct program skeletons among the folder's records (both splits)."""
    from data_synth.families import all_families

    families = all_families()
    seen: dict[str, set[str]] = defaultdict(set)
    for _, record, code in _each_record(
            folder, lambda record: families[record["family"]].model_code_for(record["parameters"])):
        seen[record["family"]].add(code)
    return {name: len(codes) for name, codes in sorted(seen.items())}


def programs_report(folder: Path | None = None) -> str:
    sampled = program_skeleton_counts()
    observed = observed_program_counts(folder) if folder is not None else {}
    header = f"{'family':34} {'sampled programs':>16}" + (f" {'observed programs':>17}" if folder else "")
    lines = [header]
    for name, count in sampled.items():
        line = f"{name:34} {count:>16}"
        if folder is not None:
            line += f" {observed.get(name, 0):>17}"
        lines.append(line)
    fewest = min(sampled.values()) if sampled else 0
    lines.append(f"{len(sampled)} families; fewest program skeletons in a family: {fewest}")
    return "\n".join(lines)


def _sft_texts(folder: Path):
    """(family, text) of every training SFT sample: all its messages, as `split_overlap` reads them."""
    for path in sorted((folder / "sft").glob("shard-*.jsonl")):
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            if not line.strip():
                continue
            try:
                sample = json.loads(line)
                text = " ".join(message["content"] for message in sample["messages"])
                family = sample["family"]
            except (json.JSONDecodeError, KeyError, TypeError) as error:
                raise ValueError(f"{path}:{number}: not a synth SFT sample ({type(error).__name__}: {error})") from None
            yield family, text


def shared_ngrams_report(folder: Path, top: int = 40) -> str:
    """The `top` most widely shared eval/train n-grams of a synth folder, then per family the share of its
    eval items that hold one."""
    if not (folder / "sft").is_dir() or not (folder / "eval" / "problems").is_dir():
        raise ValueError(f"{folder} is not a synth folder (no sft/ or eval/problems/); give the folder "
                         "`trex synth` wrote")
    evaluation = [(record["id"], record["family"], statement)
                  for split, record, statement in _each_record(folder, lambda record: record["statement"])
                  if split == "eval"]
    return _shared_listing(shared_ngrams(_sft_texts(folder), evaluation), evaluation, top)


def _shared_listing(rows: list[dict], evaluation: list[tuple[str, str, str]], top: int) -> str:
    sharing = {item_id for row in rows for item_id in row["eval_ids"]}
    lines = [f"{len(rows)} distinct {NGRAM}-grams of the eval items occur in training; {len(sharing)} of "
             f"{len(evaluation)} eval items ({len(sharing) / max(len(evaluation), 1):.1%}) hold one. "
             f"The most widely shared (one line per run of shared words; the n-grams of a run listed "
             f"earlier are left out):"]
    printed: set[str] = set()
    for row in rows:
        if len(printed) >= top:
            break
        if row["example_span"] in printed:
            continue
        printed.add(row["example_span"])
        families = ", ".join(f"{name} {count}" for name, count in row["eval_families"].most_common(3))
        lines.append(f"{row['eval_items']:>4} eval items, {row['train_texts']:>5} training samples  [{families}]\n"
                     f"      {row['ngram']}\n      e.g. {row['example_id']}: \"{_clip(row['example_span'])}\"")
    items: dict[str, int] = defaultdict(int)
    touched: dict[str, int] = defaultdict(int)
    for item_id, family, _ in evaluation:
        items[family] += 1
        touched[family] += item_id in sharing
    lines.append(f"\n{'family':34} {'eval items':>10} {'sharing one':>11}")
    for family in sorted(items, key=lambda name: (-touched[name], name)):
        lines.append(f"{family:34} {items[family]:>10} {touched[family]:>11}")
    return "\n".join(lines)


def rendered_text(candidate) -> str:
    """Every message of the training SFT sample `trex synth` would write for `candidate`, rendered without
    solving (a model answer's objective line is left out: its number is the instance's)."""
    from data_synth.render import program_data, render_program, request_messages
    from data_synth.synthesis import candidate_statement

    family, data = candidate.family, candidate.data
    program = render_program(family, data, candidate.representation, candidate.program_style)
    messages = request_messages(candidate_statement(candidate), program_data(data, candidate.representation),
                                candidate.answer_style)
    formulation = family.formulation(data)
    answer = {"program": program, "model": formulation}.get(candidate.answer_style, f"{formulation}\n\n{program}")
    return " ".join(message["content"] for message in messages) + " " + answer


def rendered_sample(train_n: int, eval_n: int, families: list[str] | None = None,
                    seed: int = 0) -> tuple[list[tuple[str, str]], list[tuple[str, str, str]]]:
    """(training (family, text) pairs, eval (id, family, statement) triples) of candidates rendered as
    `trex synth` renders them, without solving: `train_n` training candidates of every family and `eval_n`
    eval candidates of each of `families` (all when None; a shared draw over them when empty)."""
    from data_synth.config import SynthConfig
    from data_synth.synthesis import candidate_statement, make_candidate, split_families

    config = SynthConfig(seed=seed)
    train = []
    for index in range(train_n):
        candidate = make_candidate(config, "train", index)
        train.append((candidate.family.name, rendered_text(candidate)))
    evaluation = []
    pools = ([[family] for family in split_families(config, "eval") if family.name in families]
             if families else [None])
    if families:
        missing = sorted(set(families) - {pool[0].name for pool in pools})
        if missing:
            raise ValueError(f"unknown family {', '.join(missing)}; `python -m data_synth.stats` lists them")
    for pool in pools:
        for index in range(eval_n):
            candidate = make_candidate(config, "eval", index, pool)
            # one index per family draws alike in every family's pool: the family keeps the ids apart
            item_id = f"{candidate.family.name}:{candidate.id}" if families else candidate.id
            evaluation.append((item_id, candidate.family.name, candidate_statement(candidate)))
    return train, evaluation


def rendered_report(families: list[str], train_n: int = 1100, eval_n: int = 20, top: int = 40) -> str:
    """`shared_ngrams_report`'s listing over freshly rendered candidates instead of a synth folder."""
    train, evaluation = rendered_sample(train_n, eval_n, families or None)
    return _shared_listing(shared_ngrams(train, evaluation), evaluation, top)


def _clip(text: str, width: int = 240) -> str:
    return text if len(text) <= width else text[:width - 3] + "..."


def report(folder: Path | None = None) -> str:
    declared = declared_counts()
    observed = observed_counts(folder) if folder is not None else {}
    header = f"{'family':34} {'declared train':>14} {'declared eval':>13}"
    if folder is not None:
        header += f" {'observed train':>14} {'observed eval':>13}"
    lines = [header]
    for name, counts in declared.items():
        line = f"{name:34} {counts['train']:>14} {counts['eval']:>13}"
        if folder is not None:
            seen = observed.get(name, {"train": 0, "eval": 0})
            line += f" {seen['train']:>14} {seen['eval']:>13}"
        lines.append(line)
    if folder is not None:
        summary_path = folder / "summary.json"
        overlap = json.loads(summary_path.read_text()).get("overlap") if summary_path.is_file() else None
        if overlap:
            lines.append(f"eval/train {overlap['n']}-gram overlap: {overlap['eval_ngram_share_in_train']:.2%} of "
                         f"eval n-grams occur in training; {overlap['eval_items_sharing_an_ngram']:.2%} of eval items "
                         f"and {overlap['train_texts_sharing_an_ngram']:.2%} of training samples share one")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m data_synth.stats", description=__doc__.splitlines()[0])
    parser.add_argument("folder", nargs="?", type=Path, help="a synth folder (what `trex synth` wrote)")
    parser.add_argument("--programs", action="store_true",
                        help="count program skeletons (structure variants) per family instead of statements")
    parser.add_argument("--shared-ngrams", action="store_true",
                        help=f"list the {NGRAM}-grams the folder's eval items share with its training samples")
    parser.add_argument("--rendered", nargs="*", metavar="FAMILY",
                        help="render candidates without solving and list what the eval statements of these "
                             "families (default: all) share with every family's training texts")
    parser.add_argument("--train", type=int, default=1100,
                        help="training candidates to render with --rendered (default 1100)")
    parser.add_argument("--eval", type=int, default=20,
                        help="eval candidates per family to render with --rendered (default 20)")
    parser.add_argument("--top", type=int, default=40, help="how many shared n-grams to list (default 40)")
    args = parser.parse_args(argv)
    try:
        if args.rendered is not None:
            print(rendered_report(args.rendered, args.train, args.eval, args.top))
        elif args.shared_ngrams:
            if args.folder is None:
                raise ValueError("--shared-ngrams needs a synth folder: python -m data_synth.stats FOLDER "
                                 "--shared-ngrams")
            print(shared_ngrams_report(args.folder, args.top))
        elif args.programs:
            print(programs_report(args.folder))
        else:
            print(report(args.folder))
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
