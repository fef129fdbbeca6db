"""The response out of a chat-templated transcript (potrun.extractors.chat), and completions whose
content is a list of blocks (potrun.rewards.completion_text). Pure: no sandbox.

The transcripts are each family's chat template as its tokenizer renders it with
`add_generation_prompt=True` (the prompt), then a response and the end-of-turn tokens a sampler
leaves (OpenRLHF decodes the query with `skip_special_tokens=False`).
"""

from __future__ import annotations

import pytest

from potrun.extractors import extract_program, response_text, strip_special_tokens
from potrun.rewards import completion_text

FENCE = "```"
QUESTION = "Natalia sold 48 clips in April and half as many in May. How many in all?"
FEW_SHOT = f"Example: 2 + 3?\n{FENCE}python\nans = 2 + 3\n{FENCE}\nNow: {QUESTION}"

# name -> (the prompt with the generation prompt, as the template renders it; what follows the response)
TEMPLATES = {
    "chatml": (
        f"<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n{FEW_SHOT}<|im_end|>\n<|im_start|>assistant\n",
        "<|im_end|>",
    ),
    "qwen2.5": (
        "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
        f"<|im_start|>user\n{FEW_SHOT}<|im_end|>\n<|im_start|>assistant\n",
        "<|im_end|>\n<|endoftext|><|endoftext|>",  # end of turn, then padding
    ),
    "llama3": (
        "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\n"
        f"Today Date: 26 Jul 2024\n\n<|eot_id|><|start_header_id|>user<|end_header_id|>\n\n{FEW_SHOT}<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\n",
        "<|eot_id|>",
    ),
    "deepseek-r1": (
        f"<｜begin▁of▁sentence｜><｜User｜>{FEW_SHOT}<｜Assistant｜><think>\n",
        "<｜end▁of▁sentence｜>",
    ),
    "mistral": (f"<s>[INST] {FEW_SHOT} [/INST]", "</s>"),
    "gemma": (f"<bos><start_of_turn>user\n{FEW_SHOT}<end_of_turn>\n<start_of_turn>model\n", "<end_of_turn>\n<eos>"),
    "phi3": (f"<|user|>\n{FEW_SHOT}<|end|>\n<|assistant|>\n", "<|end|><|endoftext|>"),
    "phi4": (
        f"<|im_start|>system<|im_sep|>You are a helpful assistant.<|im_end|><|im_start|>user<|im_sep|>{FEW_SHOT}<|im_end|>"
        "<|im_start|>assistant<|im_sep|>",
        "<|im_end|>",
    ),
}

# Code glued to the end-of-turn token: a syntax error unless the token goes.
RESPONSE = f"Half of 48 is 24.\n{FENCE}python\nans = 48 + 48 // 2\n{FENCE}"
THINKING = f"the model thinks</think>\n{RESPONSE}"  # DeepSeek-R1's template opens <think> in the prompt


def response_of(name: str) -> str:
    return THINKING if name == "deepseek-r1" else RESPONSE


@pytest.mark.parametrize("name", sorted(TEMPLATES))
@pytest.mark.parametrize("with_prompt", [True, False], ids=["prompt", "markers"])
def test_the_response_alone_comes_out_of_each_template(name: str, with_prompt: bool) -> None:
    prompt, end = TEMPLATES[name]
    query = prompt + response_of(name) + end
    response = response_text(query, prompt if with_prompt else None)
    if with_prompt or name != "deepseek-r1":
        assert response == response_of(name)
    else:  # without the prompt, R1's <think> is the response's: the code extractor drops what precedes </think>
        assert response == "<think>\n" + THINKING
    program = extract_program(response)
    assert program.source is not None and program.source.strip() == "ans = 48 + 48 // 2"


@pytest.mark.parametrize("name", sorted(TEMPLATES))
def test_a_few_shot_example_in_the_prompt_is_never_the_response(name: str) -> None:
    """The response has no program: the prompt's example (`ans = 2 + 3`) must not be found instead."""
    prompt, end = TEMPLATES[name]
    query = prompt + "I am not sure." + end
    for given in (prompt, None):
        response = response_text(query, given)
        assert "ans = 2 + 3" not in response
        assert extract_program(response).source is None


def test_a_prompt_that_decodes_with_a_bos_or_without_its_leading_space_is_still_cut() -> None:
    """Decoding the tokens of a prompt may add a BOS or drop a leading space: the prompt is then found
    inside the query, not at its start (no template marker to fall back on here)."""
    prompt = f" {FEW_SHOT}\n"
    assert response_text("<s>" + prompt + "ans = 72</s>", prompt) == "ans = 72"
    assert response_text(prompt.lstrip() + "ans = 72", prompt) == "ans = 72"


def test_without_prompt_or_marker_the_whole_text_is_the_response() -> None:
    assert response_text("ans = 72<|im_end|>") == "ans = 72"
    assert response_text("ans = 72", "a prompt that is not there") == "ans = 72"


def test_the_last_assistant_marker_wins_over_earlier_few_shot_turns() -> None:
    """Few-shot examples given as earlier chat turns: each has its own assistant marker."""
    turn = "<|im_start|>{role}\n{text}<|im_end|>\n"
    query = (
        turn.format(role="user", text="2 + 3?")
        + turn.format(role="assistant", text="ans = 2 + 3")
        + turn.format(role="user", text=QUESTION)
        + "<|im_start|>assistant\nans = 72<|im_end|>"
    )
    assert response_text(query) == "ans = 72"


@pytest.mark.parametrize(
    ("text", "stripped"),
    [
        ("ans = 1<|im_end|>", "ans = 1"),
        ("ans = 1\n<|im_end|>\n<|endoftext|><|endoftext|>\n", "ans = 1"),  # several, whitespace between
        ("<|begin_of_text|>\n\nans = 1<|eot_id|>", "ans = 1"),
        ("<s> ans = 1</s>", " ans = 1"),  # a leading space is kept (sentencepiece's)
        ("    return 1\n<end_of_turn>", "    return 1"),  # so is an indented first line (a repair case)
        ("s = '</s>'\nans = s<|im_end|>", "s = '</s>'\nans = s"),  # a token inside the text stays
        ("ans = 1</s", "ans = 1</s"),  # not a whole token
        ("<|im_end|>", ""),
        ("", ""),
    ],
)
def test_special_tokens_go_at_the_ends_only(text: str, stripped: str) -> None:
    assert strip_special_tokens(text) == stripped


def test_stripping_a_huge_run_of_tokens_is_linear() -> None:
    """A hostile output of 100,000 end tokens (1 MB): each turn of the loop drops one token without
    copying the text (a copy per token would be 10^11 character moves: this test would not end)."""
    assert strip_special_tokens("ans = 1" + "<|im_end|>\n" * 100_000) == "ans = 1"
    assert response_text("<|im_start|>assistant\n" * 50_000 + "ans = 1") == "ans = 1"


@pytest.mark.parametrize(
    ("completion", "text"),
    [
        ([{"role": "assistant", "content": [{"type": "text", "text": "ans = 42"}]}], "ans = 42"),
        (  # several text blocks are joined by newlines; an image or tool block has no text to score
            [
                {"role": "user", "content": "q"},
                {
                    "role": "assistant",
                    "content": [
                        {"type": "text", "text": "x = 40"},
                        {"type": "image_url", "image_url": {"url": "data:..."}},
                        {"type": "text", "text": "ans = x + 2<|im_end|>"},
                    ],
                },
            ],
            "x = 40\nans = x + 2",
        ),
        ({"role": "assistant", "content": [{"text": "ans = 1"}]}, "ans = 1"),  # a block without a type is text
        ({"role": "assistant", "content": [{"type": "text", "text": 42}, "ans"]}, ""),  # not text: nothing
        ({"role": "assistant", "content": None}, ""),
        ("ans = 1<|eot_id|>", "ans = 1"),
    ],
)
def test_completion_text_reads_content_blocks(completion: object, text: str) -> None:
    assert completion_text(completion) == text
