"""Statement skeletons: disjoint wordings per split, layouts that keep every cell, rewrites that keep code and
names, the overlap report, the masked-skeleton count and `python -m data_synth.stats`."""

from __future__ import annotations

import csv
import io
import json
import random

import pytest

from data_synth.config import SynthConfig
from data_synth.families import all_families
from data_synth.statements import (
    DISTRACTORS,
    FIELD_LAYOUTS,
    GENERIC_PHRASINGS,
    OPENINGS,
    TABLE_LAYOUTS,
    Phrasing,
    Skeleton,
    apply_skeleton,
    arrange,
    draw_skeleton,
    entity_names,
    masked_skeleton,
    overlap_report,
    relayout_fields,
    relayout_tables,
    rephrase,
    shared_ngrams,
)
from data_synth.stats import declared_counts, main, observed_counts
from data_synth.synthesis import candidate_statement, make_candidate

TABLE = "Costs:\n\n| plant | Berlin | Paris |\n|---|---|---|\n| North | 4 | 7.5 |\n| South | 12 |  |\n\nDone?"


def test_a_wording_cannot_belong_to_both_splits():
    with pytest.raises(ValueError, match="in both splits"):
        Phrasing(r"\bat most\b", ("at most", "up to"), ("up to",))
    with pytest.raises(ValueError, match="capturing group"):
        Phrasing(r"\bexactly (\d+)\b", ("exactly",), ("precisely",))
    with pytest.raises(ValueError, match="at least one alternative"):
        Phrasing(r"\bx\b", ("x",), ())


def test_every_wording_axis_is_split_without_sharing():
    for axis in (OPENINGS, DISTRACTORS, TABLE_LAYOUTS, FIELD_LAYOUTS):
        shared = (set(axis["train"]) & set(axis["eval"])) - {""}
        assert not shared, f"{shared} is used by both splits"
    for rule in GENERIC_PHRASINGS:
        assert not set(rule.train) & set(rule.eval)
    train = {draw_skeleton(random.Random(i), "train") for i in range(300)}
    evaluation = {draw_skeleton(random.Random(i), "eval") for i in range(300)}
    assert not {s.key for s in train} & {s.key for s in evaluation}
    assert {s.layout for s in evaluation} == set(TABLE_LAYOUTS["eval"])
    with pytest.raises(ValueError, match="split 'test'"):
        draw_skeleton(random.Random(0), "test")


def test_every_family_declares_at_least_20_skeletons_per_split():
    counts = declared_counts()
    assert set(counts) == set(all_families())
    assert all(by_split["train"] >= 20 and by_split["eval"] >= 20 for by_split in counts.values()), counts


@pytest.mark.parametrize("layout", ["markdown", "records", "transposed", "csv", "aligned"])
def test_table_layouts_keep_every_cell(layout):
    text = relayout_tables(TABLE, layout)
    assert text.startswith("Costs:\n\n") and text.endswith("\n\nDone?")
    for cell in ("plant", "Berlin", "Paris", "North", "South", "4", "7.5", "12"):
        assert cell in text
    if layout == "csv":
        rows = list(csv.reader(io.StringIO(text.split("```csv\n")[1].split("\n```")[0])))
        assert rows == [["plant", "Berlin", "Paris"], ["North", "4", "7.5"], ["South", "12", ""]]
    if layout == "transposed":
        assert "| plant | North | South |" in text and "| Paris | 7.5 |  |" in text
    if layout == "records":
        assert "plant, row by row:\n- North: Berlin 4; Paris 7.5\n- South: Berlin 12\n" in text


def test_a_long_table_is_not_transposed():
    rows = "".join(f"| r{i} | {i} |\n" for i in range(30))
    text = relayout_tables("| name | value |\n|---|---|\n" + rows, "transposed")
    assert text.startswith("name, row by row:\n- r0: value 0")


def test_field_layouts_keep_every_key_and_meaning():
    rendered = ("Plan it.\n\nAll data are in the attached file `data.json`, a JSON object with these keys:\n"
                "- `items`: list of item names\n- `cap`: most weight, keyed by truck\n\nWhat is best?")
    for layout in FIELD_LAYOUTS["train"] + FIELD_LAYOUTS["eval"]:
        text = relayout_fields(rendered, layout)
        assert "`data.json`" in text and "`items`" in text and "`cap`" in text and "most weight" in text
        assert text.startswith("Plan it.") and text.endswith("What is best?")
    assert relayout_fields(rendered, "bullets") == rendered
    long_fields = "".join(f"- `k{i}`: the amount of thing {i} kept in store\n" for i in range(6))
    block = "All data are in the attached file `data.json`, a JSON object with these keys:\n" + long_fields
    train_words = [relayout_fields(block, layout) for layout in FIELD_LAYOUTS["train"]]
    for layout in FIELD_LAYOUTS["eval"]:  # eval layouts put their own words between the fields
        assert overlap_report(train_words, [relayout_fields(block, layout)])["eval_ngram_share_in_train"] == 0.0
    with pytest.raises(ValueError, match="field layout"):
        relayout_fields(rendered, "nonsense")


def test_rephrase_keeps_code_and_names_and_never_chains():
    rules = [Phrasing(r"\bat most\b", ("at most",), ("no more than",)),
             Phrasing(r"\bno more than\b", ("no more than",), ("not above",)),
             Phrasing(r"\bnode\b", ("node",), ("vertex",))]
    text = "At most 5 units reach the node Node Hub; `at most` and ```\nat most\n``` stay."
    out = rephrase(text, "eval", 0, rules, names=["Node Hub"])
    assert out == "No more than 5 units reach the vertex Node Hub; `at most` and ```\nat most\n``` stay."
    assert rephrase(text, "train", 0, rules) == text


def _rephrase_trying_every_rule(text, split, variant, rules, names=()):
    """`rephrase` as it was before rules that cannot match were left out: one pattern of every rule."""
    import re

    chosen = [random.Random(f"trex-phrasing:{split}:{variant}:{rule.pattern}").choice(rule.alternatives(split))
              for rule in rules]
    combined = re.compile("|".join(f"(?P<r{i}>{rule.pattern})" for i, rule in enumerate(rules)), re.IGNORECASE)

    def replace(match):
        wording = chosen[int(match.lastgroup[1:])]
        return wording[0].upper() + wording[1:] if match.group(0)[:1].isupper() and wording else wording

    kept = sorted({name for name in names if name.strip()}, key=len, reverse=True)
    protected = re.compile(r"```.*?```|`[^`\n]*`" + "".join("|" + r"(?<!\w)" + re.escape(name) + r"(?!\w)"
                                                          for name in kept), re.DOTALL)
    parts, position = [], 0
    for span in protected.finditer(text):
        parts += [combined.sub(replace, text[position:span.start()]), span.group(0)]
        position = span.end()
    return "".join(parts) + combined.sub(replace, text[position:])


def test_rephrase_leaves_out_only_rules_that_cannot_match():
    # the combined pattern holds only the rules whose literal text occurs: the result is the same as trying
    # every rule, for every family's statements, both splits, and texts a rule's literal may not predict
    # (upper case, no ASCII, a literal only inside code, a rule without a literal, a lookahead at a boundary)
    texts = []
    for family in all_families().values():
        scenario = family.scenarios[0]
        data = family.sample(random.Random(5), "small", scenario)
        rules = list(family.phrasings) + list(GENERIC_PHRASINGS)
        for representation in ("text", "table"):
            texts.append((family.render_statement(data, scenario, representation), rules, sorted(entity_names(data))))
    odd_rules = [Phrasing(r"\bat most\b", ("at most",), ("no more than",)),
                 Phrasing(r"(?:each|every) unit", ("each unit",), ("per unit",)),
                 Phrasing(r"\bshould\b(?= the\b)", ("should",), ("would",)),
                 Phrasing(r"colou?r", ("colour",), ("hue",))] + list(GENERIC_PHRASINGS)
    texts += [("AT MOST 5 Colors; EVERY UNIT should the plant make?", odd_rules, []),
              ("Café: at most 5 crème, at ﬁrst; ſhould the plant?", odd_rules, ["Café"]),
              ("Only `at most` in code, and each unit here.", odd_rules, []),
              ("at mostly and the total at\nmost", odd_rules, ["at most"])]
    for text, rules, names in texts:
        for split in ("train", "eval"):
            for variant in (0, 3):
                assert rephrase(text, split, variant, rules, names) == \
                    _rephrase_trying_every_rule(text, split, variant, rules, names), text[:80]


def test_arrange_moves_the_question_and_adds_opening_and_distractor():
    text = "A plant makes chairs. Each chair earns $5. How many chairs should it make?"
    first = arrange(text, "question_first", "From furniture.", "The plant is 40 years old.")
    assert first == ("From furniture. How many chairs should it make?\n\nA plant makes chairs. "
                     "The plant is 40 years old. Each chair earns $5.")
    after = arrange(text, "question_after_opening", "", "")
    assert after == "A plant makes chairs. How many chairs should it make? Each chair earns $5."
    assert arrange(text, "question_last", "", "") == text


def test_apply_skeleton_changes_the_wording_by_split():
    family = all_families()["knapsack_01"]
    scenario = family.scenarios[0]
    data = family.sample(random.Random(3), "small", scenario)
    rendered = family.render_statement(data, scenario, "text")
    train = Skeleton("train", 0, "question_last", 0, 0, "markdown", "bullets")
    evaluation = Skeleton("eval", 0, "question_last", 0, 0, "csv", "prose")
    train_text = apply_skeleton(rendered, train, scenario.industry, random.Random(0), family.phrasings)
    eval_text = apply_skeleton(rendered, evaluation, scenario.industry, random.Random(0), family.phrasings)
    assert "at most" not in eval_text and "maximize" not in eval_text
    assert eval_text.startswith(OPENINGS["eval"][0].format(industry=scenario.industry))
    assert "should" not in eval_text and "the total" not in eval_text.lower()
    assert "maximize" in train_text and train_text.startswith("A cargo airline")


def test_overlap_report_counts_shared_ngrams():
    words = [f"w{i}" for i in range(20)]
    train = [" ".join(words)]  # 8 distinct 13-grams
    evaluation = [" ".join(words[:14]), " ".join(f"x{i}" for i in range(13))]
    report = overlap_report(train, evaluation)
    assert report["eval_ngrams"] == 3
    assert report["eval_ngram_share_in_train"] == round(2 / 3, 4)
    assert report["eval_items_sharing_an_ngram"] == 0.5
    assert report["train_texts_sharing_an_ngram"] == 1.0
    assert overlap_report([], [])["eval_ngram_share_in_train"] == 0.0


def test_shared_ngrams_lists_the_sources_most_widely_shared_first():
    fixed = " ".join(f"f{i}" for i in range(15))  # one fixed 15-word sentence: 3 shared 13-grams
    train = [("knapsack_01", f"x y {fixed} z"), ("knapsack_01", fixed), ("tsp", "q " * 20)]
    evaluation = [("eval-1", "knapsack_01", f"a {fixed} b"), ("eval-2", "tsp", f"{fixed}"),
                  ("eval-3", "tsp", " ".join(f"e{i}" for i in range(20)))]
    rows = shared_ngrams(train, evaluation)
    assert len(rows) == 3 and rows[0]["eval_items"] == 2 and rows[0]["eval_ids"] == ["eval-1", "eval-2"]
    assert rows[0]["train_texts"] == 2 and rows[0]["train_families"] == {"knapsack_01": 2}
    assert rows[0]["eval_families"] == {"knapsack_01": 1, "tsp": 1}
    assert rows[0]["example_span"] == fixed.casefold()  # the whole shared run, not just the 13-gram
    report = overlap_report([text for _, text in train], [text for *_, text in evaluation])
    assert report["eval_items_sharing_an_ngram"] == round(len({i for r in rows for i in r["eval_ids"]}) / 3, 4)


def test_held_out_statements_share_few_13grams_with_training():
    """The demo's three families: what is left of their own fixed sentences stays under 5% of the eval
    split's 13-grams (the rewrites do the rest)."""
    config = SynthConfig(families=["knapsack_01", "production_mix", "transportation"])
    train = [candidate_statement(make_candidate(config, "train", i)) for i in range(240)]
    evaluation = [candidate_statement(make_candidate(config, "eval", i)) for i in range(60)]
    assert overlap_report(train, evaluation)["eval_ngram_share_in_train"] <= 0.05


def test_masked_skeleton_ignores_numbers_names_and_listing_length():
    small = "Ship from A and B: A costs $4, B costs $7. Demand: X needs 3; Y needs 5."
    large = "Ship from A, B, and C: A costs $4, B costs $7, C costs $2.5. Demand: X needs 30; Y needs 1; Z needs 8."
    assert masked_skeleton(small, ["A", "B", "X", "Y"]) == masked_skeleton(large, ["A", "B", "C", "X", "Y", "Z"])
    assert masked_skeleton(small, ["A", "B", "X", "Y"]) != masked_skeleton(small.replace("needs", "requires"),
                                                                            ["A", "B", "X", "Y"])


def _write_folder(folder, records_by_split):
    for split, sub in (("train", "problems"), ("eval", "eval/problems")):
        path = folder / sub / "shard-00000.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps(r) + "\n" for r in records_by_split[split]))


def test_stats_counts_distinct_masked_statements(tmp_path, capsys):
    def record(statement, names):
        return {"family": "knapsack_01", "statement": statement, "parameters": {"items": names}}

    _write_folder(tmp_path, {
        "train": [record("Take A or B, 3 kg.", ["A", "B"]), record("Take C or D, 9 kg.", ["C", "D"]),
                  record("Pick A or B, 3 kg.", ["A", "B"])],
        "eval": [record("Choose A or B within 3 kg.", ["A", "B"])]})
    assert observed_counts(tmp_path)["knapsack_01"] == {"train": 2, "eval": 1}
    (tmp_path / "summary.json").write_text(json.dumps({"overlap": overlap_report(["a b"], ["c d"])}))
    assert main([str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    assert "knapsack_01" in printed and "13-gram overlap: 0.00%" in printed


def test_stats_lists_shared_ngrams_of_a_folder(tmp_path, capsys):
    fixed = "every depot must be at least this far from every other depot on the map today"
    record = {"family": "p_dispersion", "statement": f"Place 3 depots. {fixed}.", "parameters": {}}
    _write_folder(tmp_path, {"train": [], "eval": [{**record, "id": "eval-s0-000001"}]})
    (tmp_path / "sft").mkdir()
    sample = {"family": "p_dispersion", "messages": [{"role": "user", "content": f"Place 5 depots. {fixed}."}]}
    (tmp_path / "sft" / "shard-00000.jsonl").write_text(json.dumps(sample) + "\n")
    assert main([str(tmp_path), "--shared-ngrams"]) == 0
    printed = capsys.readouterr().out
    assert "1 of 1 eval items (100.0%) hold one" in printed and "eval-s0-000001" in printed
    assert "depot must be at least this far" in printed and "p_dispersion" in printed
    assert main(["--shared-ngrams"]) == 2 and "needs a synth folder" in capsys.readouterr().err


def test_stats_renders_a_familys_eval_statements_against_training_without_solving(capsys):
    """`--rendered knapsack_01` draws that family's eval candidates alone (ids carry the family) against
    training texts of every family; an unknown family is an error naming it."""
    assert main(["--rendered", "knapsack_01", "--train", "40", "--eval", "3"]) == 0
    printed = capsys.readouterr().out
    assert "of 3 eval items" in printed
    table = printed.split("sharing one")[1].split()
    assert table[:2] == ["knapsack_01", "3"] and len(table) == 3, printed
    assert main(["--rendered", "no_such_family", "--train", "1", "--eval", "1"]) == 2
    assert "unknown family no_such_family" in capsys.readouterr().err


def test_stats_names_a_folder_that_is_not_a_synth_folder(tmp_path, capsys):
    assert main([str(tmp_path)]) == 2
    assert "not a synth folder" in capsys.readouterr().err
    _write_folder(tmp_path, {"train": [{"family": "x"}], "eval": []})
    with pytest.raises(ValueError, match=r"shard-00000.jsonl:1: not a synth problem record"):
        observed_counts(tmp_path)
