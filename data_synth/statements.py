"""Statement skeletons: many wordings of one family's statement, split into a training set and a held-out
eval set that share no wording.

A family renders the facts of an instance once (`render_statement`, with its scenario's entity names).
A `Skeleton` then re-dresses that text along independent axes, generically enough that every family gets
hundreds of skeletons without hand-written templates:

- `opening`: a framing sentence before the statement (or none);
- `order`: where the question goes (last, first, or right after the opening sentence);
- `phrasing`: how constraints and requests are worded, a choice per rewrite rule (`Phrasing`: "at most" /
  "no more than" / "a maximum of", "keyed by" / "indexed by" / "with one entry per", spelling, ...), from a
  generic lexicon plus the family's own `phrasings` for its fixed sentences;
- `distractor`: an irrelevant fact (sometimes with a number) a modeller must ignore, or none;
- `layout`: how Markdown tables are laid out (as rendered, one bullet per row, transposed; CSV or aligned
  columns for eval);
- `fields`: how the keys of an attached `data.json` are described (bullets or a table; prose or
  definitions for eval).

Every axis value that carries words belongs to exactly one split (`TRAIN`, `EVAL`); only the question's
position is shared. So an eval statement uses no opening, phrasing alternative, distractor, table or field
layout that any training statement uses: the eval split is held out by wording, not just by instance, and
the 13-gram overlap between the splits (`overlap_report`) measures what is left of the families' own words.

The rewrites never touch numbers, entity names, inline code (`data.json` keys) or code blocks, so every
number of the instance stays verbatim in the statement.
"""

from __future__ import annotations

import functools
import random
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

SPLIT_NAMES = ("train", "eval")
NGRAM = 13  # the decontamination n-gram (trex_cli.data.decontaminate)


@dataclass(frozen=True)
class Phrasing:
    """One rewrite rule: text matching `pattern` (a case-insensitive regex) is written with one of the
    split's alternatives. The family's own wording is normally the first training alternative."""

    pattern: str
    train: tuple[str, ...]
    eval: tuple[str, ...]

    def __post_init__(self) -> None:
        if re.compile(self.pattern).groups:
            raise ValueError(f"phrasing {self.pattern!r} has a capturing group; use (?:...), the rules are "
                             "combined into one pattern")
        if not self.train or not self.eval:
            raise ValueError(f"phrasing {self.pattern!r} needs at least one alternative per split")
        shared = set(self.train) & set(self.eval)
        if shared:
            raise ValueError(f"phrasing {self.pattern!r}: {sorted(shared)} is in both splits; an eval wording "
                             "must not appear in training")

    def alternatives(self, split: str) -> tuple[str, ...]:
        return self.train if split == "train" else self.eval


# Safe, meaning-preserving rewrites of words every family uses. Lookarounds keep each rule grammatical
# where a plain swap would not be ("$5 each", "each of the").
GENERIC_PHRASINGS = (
    Phrasing(r"\bat most\b", ("at most", "no more than"), ("not more than", "a maximum of")),
    Phrasing(r"\bat least\b", ("at least", "no less than"), ("not less than", "a minimum of")),
    Phrasing(r"\bmay not exceed\b", ("may not exceed", "must not exceed"), ("cannot be more than", "is capped at")),
    Phrasing(r"\bmust not\b", ("must not",), ("shall not", "is not allowed to")),
    Phrasing(r"\bmust\b", ("must",), ("shall",)),
    # a question's inverted "should the plant ..." cannot take "ought to": eval asks with "would"
    Phrasing(r"\bshould\b(?= (?:the|a|an|this|that|these|those|it|they|we|each|every|all)\b)", ("should",),
             ("would",)),
    Phrasing(r"\bshould\b", ("should",), ("ought to",)),
    Phrasing(r"\bkeyed by\b", ("keyed by", "indexed by"), ("with one entry per", "given per")),
    Phrasing(r"\bthe lowest\b", ("the lowest", "the least"), ("the smallest", "the minimum")),
    Phrasing(r"\bthe highest\b", ("the highest", "the greatest"), ("the largest", "the maximum")),
    Phrasing(r"\bthe total\b", ("the total",), ("the overall", "the combined")),
    Phrasing(r"\bwhat is that\b", ("what is that", "what is this"), ("how much is that", "how large is that")),
    Phrasing(r"\bwhat is the\b", ("what is the",), ("what's the", "what will be the")),
    Phrasing(r"\bneeds\b(?! to)", ("needs", "requires"), ("calls for", "asks for")),
    Phrasing(r"\bare allowed\b", ("are allowed", "are permitted"), ("are acceptable", "are fine")),
    Phrasing(r"\bis allowed\b", ("is allowed", "is permitted"), ("is acceptable", "is fine")),
    Phrasing(r"\bper\b", ("per",), ("for each",)),
    Phrasing(r"(?<!\d )\beach\b(?= [a-z])(?! (?:of|and|or|to|in|at|for|with|is|are|has|have)\b)",
             ("each",), ("every",)),
    Phrasing(r"\bminimize\b", ("minimize",), ("minimise",)),
    Phrasing(r"\bmaximize\b", ("maximize",), ("maximise",)),
    Phrasing(r"\bminimizes\b", ("minimizes",), ("minimises",)),
    Phrasing(r"\bmaximizes\b", ("maximizes",), ("maximises",)),
    Phrasing(r"\blist of\b", ("list of",), ("sequence of", "array of")),
    Phrasing(r"\bamount of\b", ("amount of", "quantity of"), ("volume of", "measure of")),
    Phrasing(r"\bunits\b(?= of\b)", ("units",), ("pieces",)),
    Phrasing(r"\bhow many\b", ("how many",), ("what number of",)),
    Phrasing(r"(?<!in )\btotal\b(?= [a-z])", ("total",), ("overall",)),  # the adjective only
    Phrasing(r"\bno limit\b", ("no limit",), ("no cap",)),
    Phrasing(r"\bthere is\b", ("there is",), ("there exists",)),
)

# Words the eval split writes with a synonym no training statement uses (a held-out lexicon): the same
# part of speech and number, so the sentence stays grammatical. Entity names are never rewritten.
_EVAL_SYNONYMS = (
    ("company", "firm"), ("companies", "firms"), ("decides", "chooses"), ("decide", "choose"),
    ("customer", "client"), ("customers", "clients"), ("worker", "employee"), ("workers", "employees"),
    ("facility", "site"), ("facilities", "sites"), ("node", "vertex"), ("nodes", "vertices"),
    ("production", "output"), ("produce", "make"), ("produced", "made"), ("makes", "produces"),
    ("uses", "consumes"), ("shipping", "transport"), ("shipped", "transported"), ("carry", "convey"),
    ("carrying", "conveying"), ("conserved", "preserved"), ("intermediate", "transit"),
    ("find", "determine"), ("choose", "pick"), ("chosen", "picked"), ("decision", "choice"),
    ("cheapest", "least expensive"), ("cost of", "expense of"), ("limit", "cap"), ("limits", "caps"),
    ("required", "needed"), ("requires", "calls for"), ("also", "additionally"), ("starts", "begins"),
    ("ends", "finishes"), ("goods", "merchandise"), ("demand", "requirement"), ("demands", "requirements"),
    ("annual", "yearly"), ("every", "each"), ("hours", "hrs"), ("minutes", "mins"),
    ("only", "solely"), ("planning", "scheduling"), ("allowed", "permitted"),
    ("earns", "yields"), ("available", "obtainable"), ("exactly", "precisely"), ("interruption", "pause"),
    ("across", "over"), ("split", "divided"), ("buying", "purchasing"), ("continue", "carry on"),
    ("past", "beyond"), ("finished", "completed"), ("travel", "journey"),
    ("cleaning", "washing"), ("handles", "processes"), ("runs", "operates"),
)
GENERIC_PHRASINGS += tuple(Phrasing(rf"\b{word}\b", (word,), (synonym,)) for word, synonym in _EVAL_SYNONYMS)
GENERIC_PHRASINGS += (
    Phrasing(r"\bearly\b(?! (?:penalty|penalties|arrival|arrivals|departure|departures|start|finish)\b)",
             ("early",), ("soon",)),  # "early penalty" is a noun phrase: "soon penalty" is not English
)

# Wordings of many families' fixed sentences that `trex synth --shared-ngrams` found shared by the splits
# (`python -m data_synth.stats FOLDER --shared-ngrams`): eval writes them another way. Lookarounds keep
# each rewrite to the uses where it reads right; British spellings become American ones for eval.
_EVAL_REWORDINGS = (
    (r"\bnext\b(?! to\b)", "next", "coming"), (r"\bthrough\b", "through", "via"),
    (r"\bthe end of\b", "the end of", "the close of"), (r"\bwants\b", "wants", "would like"),
    (r"\bthe number of\b", "the number of", "the count of"),
    (r"(?<!canadian )(?<!australian )(?<!singapore )(?<!zealand )(?<!kong )\bdollars\b", "dollars", "USD"),
    (r"\bcandidate\b(?= [a-z])(?! (?:may|is|are|can|must|has|that|which|and|or|to|of|in)\b)", "candidate",
     "prospective"),
    (r"\bchoosing\b", "choosing", "selecting"), (r"\bdepends on\b", "depends on", "hinges on"),
    (r"\bduring\b", "during", "throughout"), (r"\bcentre\b", "centre", "center"),
    (r"\bcentres\b", "centres", "centers"), (r"\bmetres\b", "metres", "meters"),
    (r"\bkilometres\b", "kilometres", "kilometers"), (r"\blitres\b", "litres", "liters"),
    (r"\bprogramme\b", "programme", "program"), (r"\blabour\b", "labour", "labor"),
    (r"\bwhich\b(?= [a-z]+s (?:to|should|shall|must)\b)", "which", "what"),
    (r"\bcosts\b(?= (?:a|an|the|its)\b| \$?\d)", "costs", "incurs"), (r"\bpaid\b(?! for\b)", "paid", "settled"),
    (r"\bseveral\b(?! of\b)", "several", "multiple"), (r"\bwilling to\b", "willing to", "prepared to"),
    (r"\bmay be\b", "may be", "can be"), (r"\bin full\b", "in full", "entirely"),
    (r"\bfixed\b(?= (?:amount|group|sum|number)\b)", "fixed", "set"), (r"\bin thousand\b", "in thousand",
                                                                           "in thousands of"),
    (r"\bthe largest\b", "the largest", "the biggest"), (r"\bplacing\b", "placing", "positioning"),
    (r"\bmonth by month\b", "month by month", "one month at a time"), (r"\bahead of\b", "ahead of",
                                                                         "in advance of"),
    (r"\bis not listed\b", "is not listed", "is absent"), (r"\bdoing\b", "doing", "performing"),
    (r"\bnot operated\b", "not operated", "not in operation"), (r"\bbudget of\b", "budget of", "budget totalling"),
)
GENERIC_PHRASINGS += tuple(Phrasing(pattern, (train,), (wording,)) for pattern, train, wording in _EVAL_REWORDINGS)

OPENINGS = {
    "train": ("", "The following planning question comes from {industry}.",
              "Here is an optimization problem from {industry}.",
              "An analyst working in {industry} has been asked to settle the following.",
              "Read the situation below and find the best decision."),
    "eval": ("A decision problem arises in {industry}.", "Consider this case, taken from {industry}:",
             "Below, a manager in {industry} describes a choice to be optimized."),
}
ORDERS = ("question_last", "question_first", "question_after_opening")
DISTRACTORS = {
    "train": ("", "The company has been active in {industry} for {number} years.",
              "Last quarter's planning meeting ran {number} minutes over schedule.",
              "The planning team consists of {number} people, none of whom affects the numbers below."),
    "eval": ("", "The head office moved to a new building {number} years ago.",
             "An unrelated audit, planned for week {number}, has no bearing on this decision.",
             "This summer the firm hosts {number} interns."),
}
TABLE_LAYOUTS = {"train": ("markdown", "records", "transposed"), "eval": ("csv", "aligned")}
FIELD_LAYOUTS = {"train": ("bullets", "table"), "eval": ("prose", "definitions")}
PHRASING_VARIANTS = {"train": 8, "eval": 4}  # lexicon choices per split (each picks one wording per rule)
_TRANSPOSE_MAX_ROWS = 10  # wider than this, a transposed table is unreadable: use one bullet per row


@dataclass(frozen=True)
class Skeleton:
    """One statement skeleton: a choice on every axis (see the module docstring), within one split."""

    split: str
    opening: int
    order: str
    phrasing: int
    distractor: int
    layout: str
    fields: str

    @property
    def key(self) -> str:
        """A stable name; the split prefixes every wording axis, so keys of the two splits never meet."""
        tag = self.split[0]
        return (f"open:{tag}{self.opening}/order:{self.order}/phrase:{tag}{self.phrasing}/"
                f"distract:{tag}{self.distractor}/table:{self.layout}/fields:{self.fields}")


def draw_skeleton(rng: random.Random, split: str) -> Skeleton:
    """A skeleton of `split`, every axis drawn uniformly from that split's values."""
    _check_split(split)
    return Skeleton(split, rng.randrange(len(OPENINGS[split])), rng.choice(ORDERS),
                    rng.randrange(PHRASING_VARIANTS[split]), rng.randrange(len(DISTRACTORS[split])),
                    rng.choice(TABLE_LAYOUTS[split]), rng.choice(FIELD_LAYOUTS[split]))


def skeleton_count(split: str, representation: str, scenarios: int, phrasings: Iterable[Phrasing] = ()) -> int:
    """How many distinct skeletons one family declares for a split and representation: the product of the
    axes that change that representation's text, times the family's scenarios."""
    _check_split(split)
    rules = list(phrasings) + list(GENERIC_PHRASINGS)
    # distinct lexicon choices: at most the variants, at most every combination of the rules' wordings
    combinations = 1
    for rule in rules:
        combinations *= len(rule.alternatives(split))
    count = scenarios * len(OPENINGS[split]) * len(ORDERS) * len(DISTRACTORS[split])
    count *= min(PHRASING_VARIANTS[split], combinations)
    if representation == "table":
        count *= len(TABLE_LAYOUTS[split])
    if representation == "file":
        count *= len(FIELD_LAYOUTS[split])
    return count


def _check_split(split: str) -> None:
    if split not in SPLIT_NAMES:
        raise ValueError(f"split {split!r} is not one of {', '.join(SPLIT_NAMES)}")


# --------------------------------------------------------------------------------------- applying one

def apply_skeleton(statement: str, skeleton: Skeleton, industry: str, rng: random.Random,
                   phrasings: Iterable[Phrasing] = (), names: Iterable[str] = ()) -> str:
    """`statement` (a family's rendering) re-dressed by `skeleton`; `rng` draws only the distractor's
    number. `phrasings` are the family's own rules, tried before the generic ones; `names` (the
    instance's entity names, which its program uses) are kept verbatim."""
    # rephrase first, so that table headers are reworded before a layout puts them in a code block
    text = rephrase(statement, skeleton.split, skeleton.phrasing, list(phrasings) + list(GENERIC_PHRASINGS), names)
    text = relayout_tables(text, skeleton.layout)
    text = relayout_fields(text, skeleton.fields)
    opening = OPENINGS[skeleton.split][skeleton.opening].format(industry=industry)
    distractor = DISTRACTORS[skeleton.split][skeleton.distractor].format(industry=industry,
                                                                          number=rng.randint(3, 40))
    return arrange(text, skeleton.order, opening, distractor)


_PROTECTED = re.compile(r"```.*?```|`[^`\n]*`", re.DOTALL)


def rephrase(text: str, split: str, variant: int, rules: list[Phrasing], names: Iterable[str] = ()) -> str:
    """Every rule's matches written with the wording `variant` picks for it; code and `names` stay as
    they are. One combined pass, so a replacement is never rewritten by a later rule."""
    # each rule draws from its own stream, so adding a rule (or an eval wording) leaves every other rule's
    # choice, and so every statement it does not match, as it was
    chosen = [_chosen_wording(split, variant, rule) for rule in rules]
    combined = _combined_pattern(tuple(rule.pattern for rule in rules), _possible_rules(text, rules))

    def replace(match: re.Match) -> str:
        index = int(match.lastgroup[1:])
        return _match_case(match.group(0), chosen[index])

    kept = sorted({name for name in names if name.strip()}, key=len, reverse=True)
    protected_spans = _PROTECTED if not kept else re.compile(
        _PROTECTED.pattern + "|" + "|".join(r"(?<!\w)" + re.escape(name) + r"(?!\w)" for name in kept), re.DOTALL)
    parts = []
    position = 0
    for protected in protected_spans.finditer(text):
        parts.append(combined.sub(replace, text[position:protected.start()]))
        parts.append(protected.group(0))
        position = protected.end()
    parts.append(combined.sub(replace, text[position:]))
    return "".join(parts)


@functools.cache
def _chosen_wording(split: str, variant: int, rule: Phrasing) -> str:
    """The wording skeleton phrasing `variant` of `split` picks for `rule`: drawn from the rule's own stream."""
    return random.Random(f"trex-phrasing:{split}:{variant}:{rule.pattern}").choice(rule.alternatives(split))


@functools.cache
def _required_literal(pattern: str) -> str | None:
    """Lower-case ASCII text every match of `pattern` contains (its longest run of plain characters outside
    any group, class or lookaround), or None when it has none that is safe to look for."""
    try:
        parsed = re._parser.parse(pattern)
    except Exception:  # a parser of another Python: no filter, every rule is tried
        return None
    best, run = "", ""
    for op, argument in parsed:
        if op is re._constants.LITERAL:
            run += chr(argument)
            continue
        best, run = max(best, run, key=len), ""
    best = max(best, run, key=len)
    return best.lower() if best and best.isascii() else None


def _possible_rules(text: str, rules: list[Phrasing]) -> tuple[int, ...]:
    """The indices of `rules` that may match somewhere in `text`: a rule whose required literal text is not
    in it cannot (an ASCII text, matched case-insensitively, holds the literal in lower case wherever a
    match is). A rule may still not match; the others surely do not, so leaving them out of the combined
    pattern changes no replacement."""
    if not text.isascii():
        return tuple(range(len(rules)))
    lower = text.lower()
    possible = []
    for index, rule in enumerate(rules):
        literal = _required_literal(rule.pattern)
        if literal is None or literal in lower:
            possible.append(index)
    return tuple(possible)


@functools.lru_cache(maxsize=4096)
def _combined_pattern(patterns: tuple[str, ...], indices: tuple[int, ...]) -> re.Pattern:
    """One case-insensitive pattern trying `patterns[i]` for i in `indices`, in order, as group `r<i>`."""
    return re.compile("|".join(f"(?P<r{i}>{patterns[i]})" for i in indices) or "(?!)", re.IGNORECASE)


def _match_case(original: str, replacement: str) -> str:
    if original[:1].isupper() and replacement:
        return replacement[0].upper() + replacement[1:]
    return replacement


_SENTENCE_END = re.compile(r"(?<=[.?!:])\s+(?=[A-Z`$(])")


def arrange(text: str, order: str, opening: str, distractor: str) -> str:
    """Place the question (the last sentence ending in "?") by `order`, the opening first and the distractor
    after the statement's first sentence."""
    paragraphs = text.split("\n\n")
    question = ""
    if order != "question_last":
        for number in range(len(paragraphs) - 1, -1, -1):
            if paragraphs[number].lstrip().startswith(("|", "-", "*", "```")):
                continue  # a table, a list or code: the question is in prose
            sentences = _SENTENCE_END.split(paragraphs[number])
            if len(sentences) > 1 or len(paragraphs) > 1:
                if sentences[-1].rstrip().endswith("?"):
                    question = sentences.pop().strip()
                    paragraphs[number] = " ".join(sentences)
                    paragraphs = [p for p in paragraphs if p.strip()]
            break
    first = _SENTENCE_END.split(paragraphs[0], maxsplit=1)
    if distractor:
        first = [first[0], distractor, *first[1:]]
    paragraphs[0] = " ".join(first)
    if question and order == "question_first":
        paragraphs.insert(0, question)
    elif question:  # question_after_opening: after the first paragraph's first sentence
        head = _SENTENCE_END.split(paragraphs[0], maxsplit=1)
        paragraphs[0] = " ".join([head[0], question, *head[1:]])
    if opening:
        paragraphs[0] = f"{opening} {paragraphs[0]}"
    return "\n\n".join(paragraphs)


# ----------------------------------------------------------------------------------------- tables

_TABLE = re.compile(r"(?:^\|.*\|[ \t]*\n?)+", re.MULTILINE)


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def relayout_tables(text: str, layout: str) -> str:
    """Every Markdown table of `text` (header, `|---|` rule, rows) in `layout`."""
    if layout == "markdown":
        return text

    def replace(match: re.Match) -> str:
        lines = [line for line in match.group(0).splitlines() if line.strip()]
        if len(lines) < 2 or not set(lines[1].replace("|", "").strip()) <= set("-: "):
            return match.group(0)
        trailing = "\n" if match.group(0).endswith("\n") else ""
        return table_text(_cells(lines[0]), [_cells(line) for line in lines[2:]], layout) + trailing

    return _TABLE.sub(replace, text)


def table_text(header: list[str], rows: list[list[str]], layout: str) -> str:
    """A table in one layout; every cell appears verbatim."""
    if layout == "markdown":
        return _markdown(header, rows)
    if layout == "transposed":
        if len(rows) > _TRANSPOSE_MAX_ROWS:
            return table_text(header, rows, "records")
        columns = [header, *rows]
        return _markdown([columns[0][0], *[row[0] for row in rows]],
                         [[columns[0][c], *[row[c] for row in rows]] for c in range(1, len(header))])
    if layout == "records":
        lines = [f"{header[0]}, row by row:"]
        for row in rows:
            values = [f"{name} {value}" for name, value in zip(header[1:], row[1:], strict=True) if value != ""]
            lines.append(f"- {row[0]}: " + "; ".join(values))
        return "\n".join(lines)
    if layout == "csv":
        body = [",".join(_csv_cell(cell) for cell in line) for line in [header, *rows]]
        return "```csv\n" + "\n".join(body) + "\n```"
    if layout == "aligned":
        widths = [max(len(line[c]) for line in [header, *rows]) for c in range(len(header))]
        body = ["  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
                for line in [header, *rows]]
        return "```text\n" + "\n".join(body) + "\n```"
    raise ValueError(f"unknown table layout {layout!r}")


def _markdown(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows])


def _csv_cell(cell: str) -> str:
    return f'"{cell}"' if "," in cell or '"' in cell else cell


# ------------------------------------------------------------------------------------ data.json fields

_FIELDS = re.compile(r"^All data are in the attached file `data\.json`, a JSON object with these keys:\n"
                     r"((?:- `[^`]+`: .*(?:\n|$))+)", re.MULTILINE)
_FIELD = re.compile(r"^- `([^`]+)`: (.*)$", re.MULTILINE)


def relayout_fields(text: str, layout: str) -> str:
    """The `describe_data_file` paragraph of a "file" statement in `layout`. The eval layouts put words of
    their own between the fields, so that no run of field descriptions reads as in training (n-grams
    see words only, not the punctuation of a list)."""
    if layout == "bullets":
        return text

    def replace(match: re.Match) -> str:
        fields = _FIELD.findall(match.group(1))
        trailing = "\n" if match.group(0).endswith("\n") else ""
        if layout == "table":
            return ("The attached `data.json` holds one JSON object:\n\n"
                    + _markdown(["key", "meaning"], [[f"`{k}`", v] for k, v in fields]) + trailing)
        if layout == "prose":
            return ("The data come as an attached JSON file, `data.json`. "
                    + " ".join(f"Its entry `{k}`{_indexing(v, ',')} holds {_with_article(_meaning(v))}."
                               for k, v in fields)
                    + trailing)
        if layout == "definitions":
            return ("Input file `data.json` (attached), field by field:\n"
                    + "\n".join(f"* `{k}`{_indexing(v, '')} stands for: {_meaning(v)}" for k, v in fields)
                    + trailing)
        raise ValueError(f"unknown field layout {layout!r}")

    return _FIELDS.sub(replace, text)


_INDEXED = re.compile(r"^\w+((?:\[\w+\])+): ")


def _indexing(description: str, comma: str) -> str:
    """The indices of a description written `cost[plant][market]: ...`, in words (" indexed by plant, then
    market"): training writes the bracket form, whose words would otherwise run on into the meaning."""
    match = _INDEXED.match(description)
    if not match:
        return ""
    indices = re.findall(r"\[(\w+)\]", match.group(1))
    words = f" indexed by {', then '.join(indices)}"
    return f"{comma}{words}{comma}" if comma else f" ({words.strip()})"


def _meaning(description: str) -> str:
    return _INDEXED.sub("", description, count=1)


_DETERMINED = re.compile(r"(?:the|a|an|each|every|one|its|their|whether|how|which|what|\d+)\b", re.IGNORECASE)


def _with_article(meaning: str) -> str:
    """"the " + `meaning`, unless it starts with a determiner of its own ("the scrap materials")."""
    return meaning if _DETERMINED.match(meaning) else f"the {meaning}"


# ---------------------------------------------------------------------------------- measuring them

_WORD = re.compile(r"\w+")


def ngrams(text: str, n: int = NGRAM) -> set[tuple[str, ...]]:
    """Word n-grams of `text` in the decontamination's matching form (NFKC, case-folded words); a text
    shorter than n words is one n-gram of all its words."""
    tokens = _WORD.findall(unicodedata.normalize("NFKC", text).casefold())
    if not tokens:
        return set()
    if len(tokens) < n:
        return {tuple(tokens)}
    return {tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1)}


def overlap_report(train_texts: Iterable[str], eval_texts: Iterable[str], n: int = NGRAM) -> dict:
    """How much of the eval split a training corpus repeats: the share of distinct eval n-grams that occur
    in training, the share of eval items with any such n-gram, and the share of training texts that
    13-gram decontamination against the eval split would drop."""
    eval_sets = [ngrams(text, n) for text in eval_texts]
    eval_all = set().union(*eval_sets) if eval_sets else set()
    train_all: set[tuple[str, ...]] = set()
    train_touched = train_count = 0
    for text in train_texts:
        grams = ngrams(text, n)
        train_count += 1
        train_touched += bool(grams & eval_all)
        train_all |= grams
    shared = eval_all & train_all
    return {
        "n": n,
        "eval_ngrams": len(eval_all),
        "eval_ngram_share_in_train": round(len(shared) / len(eval_all), 4) if eval_all else 0.0,
        "eval_items_sharing_an_ngram": round(sum(bool(g & train_all) for g in eval_sets) / len(eval_sets), 4)
        if eval_sets else 0.0,
        "train_texts_sharing_an_ngram": round(train_touched / train_count, 4) if train_count else 0.0,
    }


def shared_ngrams(train_texts: Iterable[tuple[str, str]], eval_items: Iterable[tuple[str, str, str]],
                  n: int = NGRAM) -> list[dict]:
    """The n-grams eval items share with training, the most widely shared first: where the overlap of
    `overlap_report` comes from. `train_texts` are (family, text) pairs, `eval_items` (id, family, text)
    triples. Each row gives the n-gram, how many eval items (and which) and training texts hold it, the
    families of each, and an example: the first eval item that holds it and the whole run of shared words around it
    there (adjacent shared n-grams merged), which is usually the sentence to reword."""
    items = [(item_id, family, _WORD.findall(unicodedata.normalize("NFKC", text).casefold()))
             for item_id, family, text in eval_items]
    item_grams = [_positions(tokens, n) for _, _, tokens in items]
    wanted = set().union(*(set(grams) for grams in item_grams)) if item_grams else set()
    train_families: dict[tuple[str, ...], Counter] = {}
    for family, text in train_texts:
        for gram in ngrams(text, n) & wanted:
            train_families.setdefault(gram, Counter())[family] += 1
    rows: dict[tuple[str, ...], dict] = {}
    for (item_id, family, tokens), grams in zip(items, item_grams, strict=True):
        shared_at = sorted(start for gram, starts in grams.items() if gram in train_families for start in starts)
        spans = _merge_runs(shared_at, n, len(tokens))
        for gram, starts in grams.items():
            if gram not in train_families:
                continue
            row = rows.get(gram)
            if row is None:
                span = next((a, b) for a, b in spans if a <= starts[0] < b)
                row = rows[gram] = {"ngram": " ".join(gram), "eval_items": 0, "eval_ids": [],
                                    "eval_families": Counter(),
                                    "train_texts": sum(train_families[gram].values()),
                                    "train_families": train_families[gram], "example_id": item_id,
                                    "example_family": family, "example_span": " ".join(tokens[span[0]:span[1]])}
            row["eval_items"] += 1
            row["eval_ids"].append(item_id)
            row["eval_families"][family] += 1
    return sorted(rows.values(), key=lambda row: (-row["eval_items"], -row["train_texts"], row["ngram"]))


def _positions(tokens: list[str], n: int) -> dict[tuple[str, ...], list[int]]:
    """n-gram -> its start positions (a text shorter than n words is one n-gram, as in `ngrams`)."""
    if len(tokens) < n:
        return {tuple(tokens): [0]} if tokens else {}
    found: dict[tuple[str, ...], list[int]] = {}
    for start in range(len(tokens) - n + 1):
        found.setdefault(tuple(tokens[start:start + n]), []).append(start)
    return found


def _merge_runs(starts: list[int], n: int, length: int) -> list[tuple[int, int]]:
    """The word spans covered by n-grams starting at `starts` (sorted), overlapping ones merged."""
    spans: list[tuple[int, int]] = []
    for start in starts:
        end = min(start + n, length)
        if spans and start <= spans[-1][1]:
            spans[-1] = (spans[-1][0], max(spans[-1][1], end))
        else:
            spans.append((start, end))
    return spans


def masked_skeleton(statement: str, names: Iterable[str]) -> str:
    """The statement with numbers and entity names masked and repeated listings collapsed, so two
    instances of one skeleton (of any size) give the same text."""
    text = statement
    for name in sorted({str(n) for n in names if str(n).strip()}, key=len, reverse=True):
        text = re.sub(r"(?<!\w)" + re.escape(name) + r"(?!\w)", "<N>", text)
    text = re.sub(r"\$?-?\d+(?:\.\d+)?(?:e-?\d+)?%?", "<#>", text)
    text = re.sub(r"<N>(?:(?:,\s*|\s+)(?:and\s+|or\s+)?<N>)+", "<N>", text)
    # a listing: the same masked clause repeated with separators ("<N> needs <#>; <N> needs <#>")
    text = re.sub(r"([^,;:\n.?]*<[N#]>[^,;:\n.?]*)(?:(?:[,;] (?:and )?| and )\1)+", r"\1", text)
    return re.sub(r"(\n[^\n]*<[N#]>[^\n]*)(?:\1)+", r"\1", text)  # table rows and bullets


def entity_names(data: dict) -> set[str]:
    """The names an instance gives its things: every string among its values, and the keys of the dicts
    it maps names with (`cost[plant][market]`); the top-level keys are field names, not entities."""
    found: set[str] = set()
    for value in data.values():
        found |= _strings(value)
    return found


def _strings(value: object) -> set[str]:
    if isinstance(value, str):
        return {value}
    if isinstance(value, dict):
        return {str(key) for key in value}.union(*(_strings(v) for v in value.values()))
    if isinstance(value, list | tuple):
        return set().union(*(_strings(v) for v in value if not isinstance(v, dict))) if value else set()
    return set()
