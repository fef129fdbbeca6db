"""Chat templates: the model's own response out of a templated transcript, special tokens stripped.

Trainers hand a reward function text in the chat template's form. OpenRLHF's `queries` are the
prompt plus the response, decoded with the special tokens kept (`<|im_start|>assistant\\n…<|im_end|>`);
verl and TRL decode without them, but a tokenizer that lacks a token in its special list leaves it
in. Two rules, both linear in the text:

- `response_text(query, prompt)`: the response only. The prompt is cut off as a prefix when it is
  one (else where it first occurs: a decoder may add a BOS or drop a leading space; else where it
  ends when the query begins with it but for whitespace); without a prompt, or when the prompt is
  not in the query, everything up to the end of the last assistant-turn marker of the common
  templates (`ASSISTANT_MARKERS`) is cut; with neither, the whole text is the response. So the
  code of a few-shot example in the prompt is never taken for the model's.
- `strip_special_tokens(text)`: the special tokens (`SPECIAL_TOKENS`: end of turn, end of text,
  padding, BOS) at either end go, with the whitespace between them; so code glued to `<|im_end|>`
  parses. Tokens inside the text are kept: a program may well hold `"</s>"` in a string, and a
  sampler stops at the first end of turn, so one is only ever at the end.

Leading spaces and tabs of the response are kept (an indented first line is a repair case of the
program extractor), leading newlines go.
"""

from __future__ import annotations

__all__ = ["ASSISTANT_MARKERS", "SPECIAL_TOKENS", "response_text", "strip_special_tokens"]

# What a chat template puts just before the assistant's turn (its generation prompt), per family.
ASSISTANT_MARKERS = (
    "<|im_start|>assistant",  # ChatML: Qwen 1.5-3, Yi, OpenHermes, SmolLM
    "<|im_start|>assistant<|im_sep|>",  # Phi-4
    "<|start_header_id|>assistant<|end_header_id|>",  # Llama 3.x
    "<｜Assistant｜>",  # DeepSeek V3 and R1 (full-width bars)
    "[/INST]",  # Mistral, Mixtral, Llama 2
    "<start_of_turn>model",  # Gemma
    "<|assistant|>",  # Phi-3, Zephyr, GLM
    "<|start_of_role|>assistant<|end_of_role|>",  # Granite
    "<|CHATBOT_TOKEN|>",  # Command R
)

# Special tokens that may end (or, BOS, begin) a decoded response, per family.
SPECIAL_TOKENS = (
    "<|im_end|>",  # ChatML
    "<|endoftext|>",  # Qwen, GPT-2 family: end of text and padding
    "<|eot_id|>",  # Llama 3 end of turn
    "<|eom_id|>",  # Llama 3 end of message (tool calls)
    "<|end_of_text|>",  # Llama 3, Granite end of text
    "<|finetune_right_pad_id|>",  # Llama 3.1 padding
    "<|begin_of_text|>",  # Llama 3 BOS
    "</s>",  # Llama 2, Mistral end of sequence
    "<s>",  # Llama 2, Mistral BOS
    "<end_of_turn>",  # Gemma end of turn
    "<eos>",  # Gemma end of sequence
    "<bos>",  # Gemma BOS
    "<pad>",  # Gemma, T5 padding
    "<|end|>",  # Phi-3 end of turn
    "<｜end▁of▁sentence｜>",  # DeepSeek end of sentence
    "<｜begin▁of▁sentence｜>",  # DeepSeek BOS
    "<|END_OF_TURN_TOKEN|>",  # Command R
    "<|im_sep|>",  # Phi-4, between the role and the turn
)


_TOKEN_FIRST_CHARS = frozenset(token[0] for token in SPECIAL_TOKENS)
_TOKEN_LAST_CHARS = frozenset(token[-1] for token in SPECIAL_TOKENS)


def response_text(query: str, prompt: str | None = None) -> str:
    """The model's response in `query` (prompt + response as a trainer decoded it), stripped of
    special tokens; the module docstring gives the rules."""
    return strip_special_tokens(query[_response_start(query, prompt) :])


def strip_special_tokens(text: str) -> str:
    """`text` without the special tokens (and whitespace) at its ends; leading spaces of its first
    line are kept."""
    start, end = 0, len(text)
    while True:  # each turn drops one token: linear, however many the text ends with
        while end > start and text[end - 1].isspace():
            end -= 1
        if end == start or text[end - 1] not in _TOKEN_LAST_CHARS:  # most texts: no token to look for
            break
        token = next((t for t in SPECIAL_TOKENS if text.endswith(t, start, end)), None)
        if token is None:
            break
        end -= len(token)
    while True:
        while start < end and text[start] in "\r\n":
            start += 1
        if start == end or text[start] not in _TOKEN_FIRST_CHARS:
            break
        token = next((t for t in SPECIAL_TOKENS if text.startswith(t, start, end)), None)
        if token is None:
            break
        start += len(token)
    return text[start:end]


def _response_start(query: str, prompt: str | None) -> int:
    """Where the response begins: after the prompt, else after the last assistant marker, else 0."""
    if prompt:
        if query.startswith(prompt):
            return len(prompt)
        core = prompt.strip()
        found = query.find(core) if core else -1
        if found >= 0:
            return found + len(core)
        aligned = _end_ignoring_whitespace(query, core)
        if aligned is not None:
            return aligned
    return _after_last_marker(query)


def _end_ignoring_whitespace(query: str, prompt: str) -> int | None:
    """Where `prompt` ends in `query` when the query begins with it but for whitespace (a decoder's
    round trip may add or drop a space), or None. Without it such a query was scored whole, and the
    prompt's few-shot program ran as the model's (and got the reward when the model wrote none)."""
    at = 0
    for char in prompt:
        if char.isspace():
            continue
        while at < len(query) and query[at].isspace():
            at += 1
        if at == len(query) or query[at] != char:
            return None
        at += 1
    return at


def _after_last_marker(query: str) -> int:
    """The end of the last assistant marker in `query` (the longest of those starting there), or 0."""
    best_start, best_end = -1, 0
    for marker in ASSISTANT_MARKERS:
        at = query.rfind(marker)
        if at > best_start or (at == best_start and at >= 0 and at + len(marker) > best_end):
            best_start, best_end = at, at + len(marker)
    return best_end
