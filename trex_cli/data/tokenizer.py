"""The tokenizer a data build uses, loaded from a model folder or trained on the corpus.

Loaded: a folder with `tokenizer.json` (and usually `tokenizer_config.json` naming the bos/eos/pad
tokens and the chat template), such as DeepSeek-V4's. Trained (the tiny recipe): a byte-level BPE
from the `tokenizers` library whose pre-tokenizer splits every digit on its own, so numbers are
spelled digit by digit and a tiny model can copy them (a merged "350" and "305" would be unrelated
tokens). Either way it is saved in Hugging Face form in the data folder, so training and eval load
exactly the tokenizer the data was built with.

The tiny chat template (special tokens `<|bos|>`, `<|system|>`, `<|user|>`, `<|assistant|>`,
`<|eos|>`) follows DeepSeek's layout:

    <|bos|><|system|>SYSTEM<|user|>USER<|assistant|>ANSWER<|eos|><|user|>...

An assistant turn ends with `<|eos|>`, so generation stops where the answer ends; a generation
prompt is `<|assistant|>`. The SFT loss covers each answer and its `<|eos|>`.

DeepSeek-V4 publishes its prompt format as Python (`encoding/encoding_dsv4.py`), not as a Jinja chat
template. A loaded tokenizer without a template but with DeepSeek's `<｜User｜>` and `<｜Assistant｜>`
tokens gets `deepseek_chat_template`: that format's non-thinking chat mode without tools,
`<bos>SYSTEM<｜User｜>USER<｜Assistant｜></think>ANSWER<eos>`, written into the saved
tokenizer_config.json so training and eval render prompts the same way.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

BOS, EOS, PAD = "<|bos|>", "<|eos|>", "<|pad|>"
ROLE_TOKENS = ("<|system|>", "<|user|>", "<|assistant|>")

TINY_CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "{% if message['role'] == 'system' %}<|system|>{{ message['content'] }}"
    "{% elif message['role'] == 'user' %}<|user|>{{ message['content'] }}"
    "{% elif message['role'] == 'assistant' %}<|assistant|>{{ message['content'] }}{{ eos_token }}"
    "{% else %}{{ raise_exception('unknown role ' + message['role']) }}"
    "{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


DEEPSEEK_ROLE_TOKENS = (("<｜User｜>", "<｜Assistant｜>"), ("<|User|>", "<|Assistant|>"))


def deepseek_chat_template(user_token: str, assistant_token: str) -> str:
    """DeepSeek-V4's chat format (non-thinking mode: the answer follows `</think>` directly)."""
    return (
        "{{ bos_token }}"
        "{% for message in messages %}"
        "{% if message['role'] == 'system' %}{{ message['content'] }}"
        f"{{% elif message['role'] == 'user' %}}{user_token}{{{{ message['content'] }}}}"
        f"{{% elif message['role'] == 'assistant' %}}{assistant_token}</think>{{{{ message['content'] }}}}{{{{ eos_token }}}}"
        "{% else %}{{ raise_exception('unknown role ' + message['role']) }}"
        "{% endif %}"
        "{% endfor %}"
        f"{{% if add_generation_prompt %}}{assistant_token}</think>{{% endif %}}"
    )


@dataclass
class DataTokenizer:
    """A `tokenizers.Tokenizer` plus what the data build needs around it."""

    backend: object  # tokenizers.Tokenizer
    eos_token: str
    bos_token: str | None
    pad_token: str
    chat_template: str | None
    origin: str  # "trained" or the folder it was loaded from
    source_config: dict = field(default_factory=dict)  # tokenizer_config.json of a loaded tokenizer
    _hf: object = field(default=None, repr=False)

    def token_id(self, token: str | None) -> int | None:
        if token is None:
            return None
        token_id = self.backend.token_to_id(token)
        if token_id is None:
            raise ValueError(f"tokenizer from {self.origin}: special token {token!r} is not in its vocabulary")
        return token_id

    @property
    def bos_token_id(self) -> int | None:
        return self.token_id(self.bos_token)

    @property
    def eos_token_id(self) -> int:
        return self.token_id(self.eos_token)

    @property
    def pad_token_id(self) -> int:
        return self.token_id(self.pad_token)

    @property
    def vocab_size(self) -> int:
        return self.backend.get_vocab_size(with_added_tokens=True)

    def encode_many(self, texts: list[str]) -> list[list[int]]:
        """Token ids of each text, no special tokens added (batched: runs on every core)."""
        encode = getattr(self.backend, "encode_batch_fast", self.backend.encode_batch)
        return [encoding.ids for encoding in encode(texts, add_special_tokens=False)]

    def decode(self, ids: list[int], skip_special_tokens: bool = False) -> str:
        return self.backend.decode(list(ids), skip_special_tokens=skip_special_tokens)

    def hf(self):
        """The transformers tokenizer over the same backend (renders chat templates, saves HF form)."""
        if self._hf is None:
            from transformers import PreTrainedTokenizerFast

            self._hf = PreTrainedTokenizerFast(
                tokenizer_object=self.backend,
                bos_token=self.bos_token,
                eos_token=self.eos_token,
                pad_token=self.pad_token,
                chat_template=self.chat_template,
            )
        return self._hf

    def render_chat(self, messages: list[dict], add_generation_prompt: bool = False) -> str:
        if not self.chat_template:
            raise ValueError(
                f"tokenizer from {self.origin} has no chat template; SFT needs one "
                "(add 'chat_template' to its tokenizer_config.json, or let trex train the tiny tokenizer)"
            )
        return self.hf().apply_chat_template(
            messages, tokenize=False, add_generation_prompt=add_generation_prompt
        )

    def save(self, folder: Path) -> None:
        """Hugging Face form: `tokenizer.json` and `tokenizer_config.json` (bos/eos/pad tokens and the
        chat template), loadable by transformers' AutoTokenizer and by `tokenizers`. A loaded
        tokenizer keeps its own files and config keys (only a missing pad token or an inline chat
        template are added). Written to a temporary folder and renamed: never left half-saved."""
        folder = Path(folder)
        temporary = folder.with_name(folder.name + ".partial")
        shutil.rmtree(temporary, ignore_errors=True)
        temporary.mkdir(parents=True)
        config = dict(self.source_config)
        if self.origin == "trained":
            self.backend.save(str(temporary / "tokenizer.json"))
            config.update(
                tokenizer_class="PreTrainedTokenizerFast",
                bos_token=self.bos_token,
                eos_token=self.eos_token,
                model_max_length=1 << 20,
                clean_up_tokenization_spaces=False,
            )
        else:
            shutil.copyfile(Path(self.origin) / "tokenizer.json", temporary / "tokenizer.json")
        config.setdefault("pad_token", self.pad_token)
        if self.chat_template:
            config["chat_template"] = self.chat_template
        (temporary / "tokenizer_config.json").write_text(json.dumps(config, indent=2, ensure_ascii=False) + "\n")
        shutil.rmtree(folder, ignore_errors=True)
        temporary.rename(folder)


def train_tokenizer(texts: Iterable[str], vocab_size: int) -> DataTokenizer:
    """A byte-level BPE with single-digit pre-tokenization, trained on `texts`."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(add_prefix_space=False)]
    )
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=[BOS, EOS, PAD, *ROLE_TOKENS],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    backend.train_from_iterator(texts, trainer=trainer)
    return DataTokenizer(backend, EOS, BOS, PAD, TINY_CHAT_TEMPLATE, origin="trained")


def _token_text(value) -> str | None:
    if isinstance(value, dict):  # AddedToken as serialized by transformers
        return value.get("content")
    return value if isinstance(value, str) else None


def load_tokenizer(folder: str | Path) -> DataTokenizer:
    """A tokenizer saved in Hugging Face form (tokenizer.json + tokenizer_config.json)."""
    from tokenizers import Tokenizer

    folder = Path(folder)
    tokenizer_file = folder / "tokenizer.json"
    if not tokenizer_file.is_file():
        raise FileNotFoundError(
            f"{tokenizer_file} not found: --tokenizer must name a folder holding tokenizer.json "
            "(a model folder, or a trex data folder's tokenizer/)"
        )
    try:
        backend = Tokenizer.from_file(str(tokenizer_file))
    except Exception as error:  # noqa: BLE001 - the tokenizers library raises a bare Exception for a bad file
        raise ValueError(
            f"{tokenizer_file}: not a readable tokenizer ({error}); copy it again from its model folder, "
            "or pass --train-tokenizer N to train one"
        ) from None
    config_file = folder / "tokenizer_config.json"
    try:
        config = json.loads(config_file.read_text()) if config_file.is_file() else {}
    except json.JSONDecodeError as error:
        raise ValueError(f"{config_file}: not valid JSON ({error}); copy it again from its model folder") from None
    chat_template = config.get("chat_template")
    template_file = folder / "chat_template.jinja"
    if chat_template is None and template_file.is_file():
        chat_template = template_file.read_text()
    if isinstance(chat_template, list):  # named templates: use the default one
        chat_template = next((t["template"] for t in chat_template if t.get("name") == "default"), None)
    if not chat_template:
        for user_token, assistant_token in DEEPSEEK_ROLE_TOKENS:
            if backend.token_to_id(user_token) is not None and backend.token_to_id(assistant_token) is not None:
                chat_template = deepseek_chat_template(user_token, assistant_token)
                break
    eos = _token_text(config.get("eos_token"))
    if eos is None:
        raise ValueError(f"{config_file}: no eos_token; name the end-of-text token in tokenizer_config.json")
    tokenizer = DataTokenizer(
        backend=backend,
        eos_token=eos,
        bos_token=_token_text(config.get("bos_token")),
        pad_token=_token_text(config.get("pad_token")) or eos,  # a pad token is never a target
        chat_template=chat_template,
        origin=str(folder),
        source_config={key: value for key, value in config.items() if key != "chat_template"},
    )
    tokenizer.eos_token_id, tokenizer.pad_token_id, tokenizer.bos_token_id  # noqa: B018 - check they exist
    return tokenizer


def load_resumed(folder: Path) -> DataTokenizer:
    """The tokenizer an interrupted build trained and saved in its output folder: loaded, and reported as
    trained (as the uninterrupted build reports it), not as loaded from that folder."""
    tokenizer = load_tokenizer(folder)
    tokenizer.origin = "trained"
    tokenizer.source_config = {}
    return tokenizer
