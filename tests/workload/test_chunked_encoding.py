"""Chunked encoding equals the tokenizer's own encoding, and is used only where that is provable."""

from __future__ import annotations

import random
from collections.abc import Sequence

import pytest
from real_tokenizer_params import CASES

from kvgate.workload.chunked_encoding import ChunkedEncoder, splits_at_sentence_ends
from kvgate.workload.generators.base import GENERATORS
from kvgate.workload.hf_tokenizer import HFPromptTokenizer

ADVERSARIAL = [
    "",
    ".",
    ". ",
    " . ",
    "One. Two. Three.",
    "Ends with a space. ",
    ". Starts with the split.",
    "Wait... what. . . ok.  Two spaces.   Three.\tTab. \nNewline. \n\nBlank line.",
    "Numbers. 12345. 3.14159. 1. 2. 3.",
    "It's. 's. 'll. 're done.",
    "Unicode. Ünïcødé. 日本語の文. Ελληνικά. emoji 🙂. done",
    "<|im_start|>user. <|im_end|>. x.<|im_end|> .<|im_start|>",
    "Mixed!? Punctuation?! Here. (Parens.) [Brackets.] \"Quotes.\" 'Single.'",
    "A.B. C.D. e.g. i.e. etc. U.S.A. ok",
]


@pytest.fixture(scope="module")
def encoder(smollm_tokenizer: HFPromptTokenizer) -> ChunkedEncoder:
    assert smollm_tokenizer.encoder.chunked, "SmolLM2's tokenizer is byte-level BPE with the GPT-2 split"
    return smollm_tokenizer.encoder


@pytest.mark.parametrize("text", ADVERSARIAL)
def test_adversarial_text_encodes_exactly(encoder: ChunkedEncoder, text: str) -> None:
    assert encoder.encode(text) == encoder.exact(text)
    assert encoder.count(text) == len(encoder.exact(text))
    assert "".join(encoder.chunks(text)) == text


def test_random_text_encodes_exactly(encoder: ChunkedEncoder) -> None:
    rng = random.Random(7)
    alphabet = [". ", ".", " ", "  ", "\n", "\n\n", "\t", "a", "The", "word", "7", "42", "!", "?", ",", "'s",
                "é", "日", "<|im_end|>", "-", "..."]  # fmt: skip
    for _ in range(400):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randrange(1, 60)))
        assert encoder.encode(text) == encoder.exact(text), repr(text)


def reference_token_at(encoder: ChunkedEncoder, text: str, at: int) -> int | None:
    offsets = encoder.backend.encode(text, add_special_tokens=False).offsets
    return next((i for i, (_s, end) in enumerate(offsets) if end > at), None)


def test_token_at_matches_the_whole_text_offsets(encoder: ChunkedEncoder) -> None:
    text = " ".join(ADVERSARIAL[4:])
    for at in range(0, len(text), 3):
        assert encoder.token_at(text, at) == reference_token_at(encoder, text, at), at


@pytest.mark.parametrize("name", [*sorted(CASES), "passkey"])
def test_every_generator_prompt_encodes_exactly(name: str, smollm_tokenizer: HFPromptTokenizer) -> None:
    generator = GENERATORS.get(name)
    params = generator.params_type(**CASES.get(name, {"lengths": (1024,), "depths": (0.0, 0.5, 1.0)}))
    tok = smollm_tokenizer
    for draft in generator.generate(params, random.Random(11), tok):
        assert tok.encode_chat(draft.messages) == tok.encode_chat_exact(draft.messages), name
        text = tok.render(draft.messages)
        assert draft.question is not None
        expected_start = reference_token_at(tok.encoder, text, text.rfind(draft.question))
        assert tok.question_start(draft.messages, draft.question) == expected_start, name


def test_a_split_after_whitespace_would_not_be_exact(encoder: ChunkedEncoder) -> None:
    """Why chunks end at ". " and nowhere else: after "\\n\\n" the pieces encode differently."""
    text = "First.\n\nSecond."
    left, right = text[: text.index("S")], text[text.index("S") :]
    assert encoder.exact(left) + encoder.exact(right) != encoder.exact(text)
    assert encoder.encode(text) == encoder.exact(text)


def _tokenizer(**overrides: object) -> object:
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers

    tok = Tokenizer(models.BPE(vocab={"a": 0, "b": 1, ".": 2, " ": 3, "Ġ": 4}, merges=[]))
    tok.pre_tokenizer = overrides.get("pre_tokenizer", pre_tokenizers.ByteLevel(add_prefix_space=False))  # type: ignore[assignment]
    if overrides.get("normalizer"):
        tok.normalizer = normalizers.NFKC()  # type: ignore[assignment]
    return tok


def test_other_tokenizers_are_encoded_whole() -> None:
    from tokenizers import pre_tokenizers

    assert splits_at_sentence_ends(_tokenizer())
    for odd in (
        _tokenizer(normalizer=True),
        _tokenizer(pre_tokenizer=pre_tokenizers.Metaspace()),
        _tokenizer(pre_tokenizer=pre_tokenizers.ByteLevel(add_prefix_space=True)),
    ):
        assert not splits_at_sentence_ends(odd)
        assert ChunkedEncoder(odd).chunks("One. Two. Three.") == ["One. Two. Three."]


def test_freeze_stops_when_chunked_ids_disagree(smollm_tokenizer: HFPromptTokenizer) -> None:
    from kvgate.workload.freeze import freeze_cases
    from kvgate.workload.suites import resolve_suite

    class Disagreeing(HFPromptTokenizer):
        def encode_chat_exact(self, messages: Sequence[dict[str, str]]) -> list[int]:
            return [*super().encode_chat_exact(messages), 0]

    tok = Disagreeing(smollm_tokenizer.backend, smollm_tokenizer.template, "smollm2-135m", 8192)
    with pytest.raises(RuntimeError, match="differ from the tokenizer's own encoding"):
        freeze_cases([resolve_suite("smoke")], tok, seed=0, limit=1)
