"""The hf backend on a real (tiny, randomly initialized) trex model exported in HF form with a real
byte-level BPE tokenizer: batched generation, seeded and repeatable, through the whole eval."""

from __future__ import annotations

import json

import pytest
from eval_fixtures import en_question_rows, write_jsonl

torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def exported_model(tmp_path_factory):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    from trex_cli.models.deepseek_v4.config import get_flavor
    from trex_cli.models.deepseek_v4.model import DeepseekV4ForCausalLM
    from trex_cli.models.deepseek_v4.state_dict_adapter import export_hf

    root = tmp_path_factory.mktemp("hf")
    config = get_flavor("tiny")
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=config.vocab_size, special_tokens=["<|pad|>", "<|bos|>", "<|eos|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )  # fmt: skip
    corpus = [row["en_question"] for row in en_question_rows()] * 20 + ["import pyomo.environ as pyo\nprint('Objective:', 7)"] * 20
    tokenizer.train_from_iterator(corpus, trainer)
    wrapped = PreTrainedTokenizerFast(tokenizer_object=tokenizer, bos_token="<|bos|>", eos_token="<|eos|>", pad_token="<|pad|>")
    wrapped.chat_template = (
        "{% for m in messages %}<|bos|>{{ m['role'] }}\n{{ m['content'] }}<|eos|>{% endfor %}"
        "{% if add_generation_prompt %}<|bos|>assistant\n{% endif %}"
    )
    tokenizer_dir = root / "tokenizer"
    wrapped.save_pretrained(str(tokenizer_dir))
    torch.manual_seed(0)
    model = DeepseekV4ForCausalLM(config)
    model.reset_parameters(seed=0)
    return export_hf(model, root / "export", tokenizer_dir=tokenizer_dir)


@pytest.mark.slow  # the model's first generate call compiles its kernels: tens of seconds on 2 cores
def test_hf_backend_generates_repeatably_through_the_whole_eval(tmp_path, exported_model):
    from trex_cli.evaluate import EvalConfig, run_eval
    from trex_cli.evaluate.benchmarks import load_benchmark
    from trex_cli.evaluate.generators import GenerationRequest, HFGenerator
    from trex_cli.evaluate.prompts import PromptBuilder

    benchmark_path = write_jsonl(tmp_path / "mini.jsonl", en_question_rows()[:3])
    items = load_benchmark(str(benchmark_path)).items
    # a short template keeps the CPU forward passes cheap (the tokenizer knows only a few words)
    template = tmp_path / "short.txt"
    template.write_text("{question}")
    builder = PromptBuilder(str(template))

    generator = HFGenerator(exported_model, temperature=0.8, max_tokens=4, seed=5, batch_size=2, device="cpu")

    def completions() -> list[str]:
        texts: dict[str, str] = {}
        requests = [GenerationRequest(item=item, sample=0, messages=builder.messages(item)) for item in items]
        generator.generate(requests, lambda request, completion: texts.__setitem__(request.item.id, completion.text))
        return [texts[item.id] for item in items]

    first, again = completions(), completions()  # sampled (temperature 0.8), yet the same: seeded
    assert first == again and all(isinstance(text, str) for text in first)

    config = EvalConfig(benchmarks=[str(benchmark_path)], backend="hf", checkpoint=str(exported_model), max_tokens=4,
                        hf_batch_size=2, hf_device="cpu", allow_code_execution=True, timeout=20, prompt=str(template))  # fmt: skip
    out = tmp_path / "eval"
    results = run_eval(config, out, show_progress=False)
    records = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    assert len(records) == 3 and all(0 < r["usage"]["completion_tokens"] <= 4 for r in records)
    # a random tiny model writes no program: every sample is explained as such
    assert results["scores"]["mini"]["outcomes"]["no code"] == 3
    assert len((out / "generations.jsonl").read_text().splitlines()) == 3
