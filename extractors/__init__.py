"""Extraction of programs and final answers from raw model output, and number parsing.

Pure functions: no I/O, no timeouts, no processes; linear time on any input.

    extract_program(text) -> ExtractedProgram   the program to run (extractors/code.py)
    extract_answer(text)  -> ExtractedAnswer    a chain-of-thought final answer (extractors/answer.py)
    parse_number(text)    -> ParsedNumber|None  one number with its unit, scale, percent (numbers.py)
    option_letters(text)  -> str|None           the option letters an answer names ("B、D" -> "BD")
    classify_output(text) -> "pot" | "cot"      for --mode auto
    response_text(query, prompt) -> str         the response in a chat-templated transcript (chat.py)
    strip_special_tokens(text) -> str           a response without the template's end tokens (chat.py)
"""

from .answer import (
    AnswerHow,
    ExtractedAnswer,
    extract_answer,
    option_letters,
)
from .chat import ASSISTANT_MARKERS, SPECIAL_TOKENS, response_text, strip_special_tokens
from .code import (
    ExtractedProgram,
    ProgramHow,
    classify_output,
    extract_program,
)
from .numbers import ParsedNumber, find_numbers, last_number, parse_number

__all__ = [
    "ASSISTANT_MARKERS",
    "SPECIAL_TOKENS",
    "AnswerHow",
    "ExtractedAnswer",
    "ExtractedProgram",
    "ParsedNumber",
    "ProgramHow",
    "classify_output",
    "extract_answer",
    "extract_program",
    "find_numbers",
    "last_number",
    "option_letters",
    "parse_number",
    "response_text",
    "strip_special_tokens",
]
