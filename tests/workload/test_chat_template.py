"""kvgate's chat-template rendering equals transformers' `apply_chat_template`."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvgate.workload.chat_template import ChatTemplate, ChatTemplateError
from kvgate.workload.hf_tokenizer import HFPromptTokenizer

CHATS = [
    [{"role": "user", "content": "Hello."}],
    [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Ünïcødé and 日本語?"}],
    [
        {"role": "user", "content": "  leading and trailing spaces  "},
        {"role": "assistant", "content": "Sure.\n\nTwo lines."},
        {"role": "user", "content": "<|im_end|> inside a message"},
    ],
    [{"role": "user", "content": ""}],
]


@pytest.mark.parametrize("messages", CHATS)
def test_render_matches_transformers(model_folder: Path, messages: list[dict[str, str]]) -> None:
    from transformers import AutoTokenizer

    reference = AutoTokenizer.from_pretrained(str(model_folder))
    expected = reference.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert ChatTemplate.from_folder(model_folder).render(messages) == expected
    assert HFPromptTokenizer.from_transformers(reference, "smollm2").render(messages) == expected
    ids = reference(expected, add_special_tokens=False)["input_ids"]
    assert HFPromptTokenizer.from_folder(model_folder, "smollm2").encode_chat(messages) == ids


def test_template_features_hugging_face_templates_use() -> None:
    source = (
        "{% for m in messages %}{% if m.role == 'bad' %}{{ raise_exception('no ' + m.role) }}{% endif %}"
        "{{ bos_token }}{{ m | tojson }}\n"
        "{% if loop.index > 1 %}{% break %}{% endif %}{% endfor %}"
    )
    template = ChatTemplate(source, {"bos_token": "<s>"})
    chat = [{"role": "user", "content": "é"}] * 3
    assert template.render(chat) == '<s>{"role": "user", "content": "é"}\n' * 2
    with pytest.raises(ChatTemplateError, match="no bad"):
        template.render([{"role": "bad", "content": ""}])


def test_folder_without_a_template_is_refused(tmp_path: Path) -> None:
    (tmp_path / "tokenizer_config.json").write_text("{}")
    with pytest.raises(ValueError, match="no chat template"):
        ChatTemplate.from_folder(tmp_path)


def test_a_folder_without_tokenizer_json_or_template_is_bad_input(model_folder: Path, tmp_path: Path) -> None:
    from kvgate.errors import BadInput

    (tmp_path / "config.json").write_text((model_folder / "config.json").read_text())
    with pytest.raises(BadInput, match=r"has no tokenizer\.json"):
        HFPromptTokenizer.from_folder(tmp_path, "bare")
    (tmp_path / "tokenizer.json").write_text((model_folder / "tokenizer.json").read_text())
    with pytest.raises(BadInput, match="no chat template"):
        HFPromptTokenizer.from_folder(tmp_path, "bare")
