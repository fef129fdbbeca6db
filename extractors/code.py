"""Program extraction: raw model output to the one program potrun should run.

Precedence (the first rule that applies names `how`):

1. Nothing but whitespace: "none".
2. `<think>…</think>` is dropped (everything up to the last `</think>`, so a template that put the
   opening tag in the prompt works too); a `<think>` that never closes means the model was cut off
   while thinking: "truncated".
3. No fences, and the whole text parses as Python with at least one real statement: "bare", the text
   unchanged (the PoT files' `generated` entries). A plain program cut at the end is "truncated".
4. Fences (```lang, bare ```, ~~~, longer fences, indented fences, a closing ``` glued to the last
   code line, a new ```lang line that implicitly closes an open python block):
   python/py/python3/ipython blocks, and bare blocks that look like code, are candidates; ```output,
   ```text, other languages and bare blocks holding only a value are skipped.
   - one candidate: "fence";
   - several: the last block that defines the entry point (`def solution`/`def solver` > a top-level
     `ans =` > `answer =`/`result =`) wins, earlier ones are scratch: "fence_entry"; no entry point
     anywhere: the last block that is not a use block ("fence");
   - a use block (only prints or calls what an earlier block defined) after the chosen block is
     dropped when the chosen block has an entry point and the use block only prints or calls it
     without arguments (`print(solution())`, `print(ans)`: potrun calls the entry point itself), and
     appended otherwise (`print(f(3))` after `def f(x)`); an earlier block that defines a function
     the chosen block calls is prepended: "fence_merged".
   Closed fences are not parsed (speed): a syntax error in one is the sandbox's to report.
5. No fences, prose around code: runs of code-looking lines (indented or open-bracket continuations
   included). The last run that defines an entry point, prints, defines a function or returns wins;
   else the last run of two or more statements that parses, flagged "no_entry_point": "unfenced".
6. Repairs, applied to the chosen code when it does not parse, the way DocMath-Eval's prompt
   (`def solution():\n    # Define variables name and value`) implies: an indented body without the
   header, or a top-level `return`, gets `def solution():` ("repaired_header"); a header whose body is
   not indented gets indented up to a `print(solution())` line, and an indented script without
   `return` is dedented ("repaired_indent").
   DocMath-Eval's continuation: the prompt ended inside `def solution():`, so the output is an
   indented body (its first line may lack the indentation the prompt already wrote), with no other
   fence than an optional closing ``` line (prose may follow it): the body gets `def solution():`
   ("repaired_header", warning "continuation"), as DocMath's `process_single_pot_output` builds it.
7. Truncation: the chosen block's fence never closes, or the code ends mid-statement (an unclosed
   bracket or string, a header without a body, a syntax error on an unterminated last line):
   "truncated", source None. Exception: an unclosed fence whose code parses and ends complete (the
   entry function ends in `return`, or the last statement sets an answer name or prints) is what a
   `stop=["```"]` sampler leaves; it is kept, with the warning "unclosed_fence".
   A program that does not parse for another reason is still returned (the sandbox reports
   syntax_error), with the warning "syntax_error".

Warnings (stable strings): continuation, think_dropped, unclosed_think, unclosed_fence, later_block_unclosed,
dropped_call_block, merged_call_block, merged_helper_block, cut_mid_statement, syntax_error,
no_entry_point, not_parsed (code over MAX_PARSE_CHARS is passed on unchecked).

Linear time: fence marks are found with str.find, lines are classified once, and the only parse is
of the chosen code (plus tiny use blocks).
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum

from potrun.types import ENTRY_FUNCTIONS, ENTRY_VARIABLES, UsageError

__all__ = [
    "ExtractedProgram",
    "ProgramHow",
    "classify_output",
    "extract_program",
]


class ProgramHow(StrEnum):
    """Which rule found a program (`ExtractedProgram.how`; the output's `extraction`)."""

    BARE = "bare"
    FENCE = "fence"
    FENCE_ENTRY = "fence_entry"
    FENCE_MERGED = "fence_merged"
    UNFENCED = "unfenced"
    REPAIRED_HEADER = "repaired_header"
    REPAIRED_INDENT = "repaired_indent"
    TRUNCATED = "truncated"
    NONE = "none"


@dataclass(frozen=True, slots=True)
class ExtractedProgram:
    """The program to run (None when there is none or it was cut off), and which rule found it."""

    source: str | None
    how: ProgramHow
    warnings: tuple[str, ...] = ()
    truncated: bool = False


# ---------------------------------------------------------------- patterns (compiled once)

_PY_LANGS = frozenset({"python", "py", "python3", "py3", "ipython", "ipython3", "sage"})
MAX_PARSE_CHARS = 200_000  # longer code is passed on unchecked (warning "not_parsed")
_MAX_FENCE_INDENT = 16
_MAX_INFO = 100
_THINK_OPEN = "<think>"
_THINK_CLOSE = "</think>"

_ENTRY_FUNCTION = "(?:" + "|".join(ENTRY_FUNCTIONS) + ")"  # solution or solver, as a regular expression
_DEF_ENTRY = re.compile(rf"^def[ \t]+{_ENTRY_FUNCTION}[ \t]*\(", re.M)
_ANS_ASSIGN = re.compile(r"^ans[ \t]*(?::[^=\n]*)?(?:[-+*/]|//)?=(?!=)", re.M)
_OTHER_ASSIGN = re.compile(r"^(?:answer|result)[ \t]*(?::[^=\n]*)?=(?!=)", re.M)
_TOP_DEF = re.compile(r"^(?:async[ \t]+)?def[ \t]+(\w+)", re.M)
_TOP_ASSIGNED = re.compile(r"^([A-Za-z_]\w*)[ \t]*(?::[^=\n]*)?(?:[-+*/%]|//|\*\*)?=(?!=)", re.M)
_CALLED = re.compile(r"(\w+)[ \t]*\(")
_TOP_RETURN = re.compile(r"^return\b", re.M)
_BODY_RETURN = re.compile(r"^[ \t]+return\b", re.M)  # a function body's return, indented
_PRINT = re.compile(r"^print[ \t]*\(", re.M)
_HEADER_UNINDENTED = re.compile(  # a def header whose next non-blank line is not indented
    r"^def[ \t]+\w+[ \t]*\([^)\n]*\)[ \t]*(?:->[^:\n]*)?:[ \t]*(?:#[^\n]*)?\n(?:[ \t]*\n)*[^ \t\n]", re.M
)
_HEADER_LINE = re.compile(r"def[ \t]+\w+[ \t]*\([^)\n]*\)[ \t]*(?:->[^:\n]*)?:[ \t]*(?:#.*)?")
_ENTRY_CALL_LINE = re.compile(rf"(?:print[ \t]*\([ \t]*)?{_ENTRY_FUNCTION}[ \t]*\(|if[ \t]+__name__")
_CODEISH = re.compile(
    r"^[ \t]*(?:def[ \t]|class[ \t]|import[ \t]|from[ \t]+[\w.]+[ \t]+import|for[ \t].*:|while[ \t].*:"
    r"|if[ \t].*:|return\b|print[ \t]*\(|with[ \t].*:|try[ \t]*:)"
    r"|^[ \t]*[A-Za-z_][\w.]*(?:\[[^\]\n]*\])?[ \t]*(?:[-+*/%]|//|\*\*)?=(?!=)",
    re.M,
)
# One code line of unfenced output (checked on the line with its indentation removed).
_CODE_LINE = re.compile(
    r"(?:def|class|import|from|for|while|if|elif|else|try|except|finally|with|return|assert|raise"
    r"|pass|break|continue|global|nonlocal|lambda|async|await|del)\b(?![ \t]*[,'])"
    r"|@\w"
    r"|[A-Za-z_][\w.]*(?:\[[^\]\n]*\])?(?:[ \t]*,[ \t]*[A-Za-z_][\w.]*)*[ \t]*(?:[-+*/%&|^@]|//|\*\*|<<|>>)?=(?!=)"
    r"|[A-Za-z_][\w.]*[ \t]*\(.*\)[ \t]*(?:#.*)?$"
    r"|#"
    r"|[)\]}]"
)
_EOF_MESSAGES = ("never closed", "unexpected eof", "unterminated triple-quoted", "unterminated string")
_REDUNDANT_CALLEES = frozenset(ENTRY_FUNCTIONS)
_ANSWER_NAMES = frozenset(ENTRY_VARIABLES + ENTRY_FUNCTIONS)


@dataclass(frozen=True, slots=True)
class _Block:
    """One fenced block: its language tag, its code, and whether its closing fence was seen."""

    lang: str
    code: str
    closed: bool


# ---------------------------------------------------------------- entry point


def extract_program(text: str) -> ExtractedProgram:
    """The program in a model output; see the module docstring for the precedence."""
    if type(text) is not str:
        raise UsageError(f"extract_program reads a model's output, a text, not {type(text).__name__}")
    if not text or text.isspace():
        return ExtractedProgram(None, ProgramHow.NONE)
    body, think_cut = _drop_think(text)
    if think_cut:
        return ExtractedProgram(None, ProgramHow.TRUNCATED, ("unclosed_think",), truncated=True)
    continuation = _from_continuation(body)
    if continuation is not None:
        return continuation
    if "```" in body or "~~~" in body:
        blocks = _scan_fences(body)
        if blocks:
            return _from_blocks(blocks, warnings=("think_dropped",) if body is not text else ())
    if body is text:
        bare = _try_bare(text)
        if bare is not None:
            return bare
    return _from_unfenced(body)


def classify_output(text: str) -> str:
    """ "pot" when the output carries a program (a code fence, `def solution`, `ans = …`), else "cot".

    A program whose result the model already saw in an ```output block and then stated in a
    `\\boxed{}` after the last fence (tool-integrated reasoning) is "cot": its answer is the box.
    """
    extracted = extract_program(text)
    if extracted.source is None and (not extracted.truncated or "unclosed_think" in extracted.warnings):
        return "cot"
    if "no_entry_point" in extracted.warnings:
        return "cot"  # a few assignments inside prose are arithmetic, not a program
    if "```output" in text:
        last_fence = max(text.rfind("```"), text.rfind("~~~"))
        if text.find("\\boxed", last_fence) >= 0:
            return "cot"
    return "pot"


# ---------------------------------------------------------------- think and fences


def _drop_think(text: str) -> tuple[str, bool]:
    """(text after the last </think>, cut): cut is True when a <think> opens and never closes."""
    close = text.rfind(_THINK_CLOSE)
    if close >= 0:
        return text[close + len(_THINK_CLOSE) :], False
    if _THINK_OPEN in text:
        return text, True
    return text, False


def _scan_fences(text: str) -> list[_Block]:
    """Fenced blocks, linear in len(text): one pass over the fence marks, each line's bounds found once."""
    blocks: list[_Block] = []
    opened: tuple[str, int, str, int, int] | None = None  # (char, length, info, content start, indent)
    line_start, line_end = 0, -1
    for start, end in _fence_marks(text):
        if start > line_end:  # a new line: find its bounds once, searching only unseen text
            line_start = text.rfind("\n", max(line_end, 0), start) + 1
            found = text.find("\n", end)
            line_end = found if found >= 0 else len(text)
        indent = start - line_start
        at_line_start = indent <= _MAX_FENCE_INDENT and (indent == 0 or text[line_start:start].isspace())
        if line_end - end > _MAX_INFO:
            continue  # a fence mark followed by a long line is prose or code, not a fence
        info = text[end:line_end].strip()
        fence = text[start:end]
        if opened is None:
            if at_line_start and "`" not in info:
                opened = (fence[0], len(fence), info, line_end + 1, indent)
            continue
        char, length, lang, content_start, open_indent = opened
        if fence[0] == char and len(fence) >= length and not info:
            code_end = line_start if at_line_start else start  # "ans = x```" closes too
            blocks.append(_make_block(lang, text[content_start:code_end], open_indent, closed=True))
            opened = None
        elif at_line_start and info and "`" not in info and _tag(lang) in _PY_LANGS | {""}:
            # "```output" inside an open python block is not Python: the model forgot the closing fence
            blocks.append(_make_block(lang, text[content_start:line_start], open_indent, closed=True))
            opened = (fence[0], len(fence), info, line_end + 1, indent)
    if opened is not None:
        char, length, lang, content_start, open_indent = opened
        blocks.append(_make_block(lang, text[content_start:], open_indent, closed=False))
    return blocks


def _fence_marks(text: str) -> Iterator[tuple[int, int]]:
    """Spans of runs of three or more backticks or tildes, left to right. str.find runs at C speed;
    each kind's next position is cached so no stretch of text is searched twice."""
    n = len(text)
    next_tick, next_tilde, pos = text.find("```"), text.find("~~~"), 0
    while next_tick >= 0 or next_tilde >= 0:
        use_tick = next_tilde < 0 or 0 <= next_tick < next_tilde
        start = next_tick if use_tick else next_tilde
        char = text[start]
        end = start + 3
        while end < n and text[end] == char:
            end += 1
        yield start, end
        pos = end
        if 0 <= next_tick < pos:
            next_tick = text.find("```", pos)
        if 0 <= next_tilde < pos:
            next_tilde = text.find("~~~", pos)


def _tag(info: str) -> str:
    """The language of a fence's info string: "Python3 title=x" -> "python3", "{.python}" -> "python"."""
    return info.split(None, 1)[0].lower().strip("{.}") if info else ""


def _make_block(info: str, code: str, indent: int, *, closed: bool) -> _Block:
    lang = _tag(info)
    if indent:
        code = _strip_indent(code, indent)
    return _Block(lang, code.rstrip() + "\n" if code.strip() else "", closed)


def _strip_indent(code: str, indent: int) -> str:
    """Remove up to `indent` leading spaces from each line (a fence indented inside a list)."""
    out = []
    for line in code.split("\n"):
        stripped = line[:indent].lstrip(" \t")
        out.append(stripped + line[indent:] if len(line) > indent else line.lstrip(" \t"))
    return "\n".join(out)


def _is_python_block(block: _Block) -> bool:
    if block.lang in _PY_LANGS:
        return bool(block.code.strip())
    return block.lang == "" and _CODEISH.search(block.code) is not None


# ---------------------------------------------------------------- choosing among blocks


def _entry_rank(code: str) -> int:
    if _DEF_ENTRY.search(code):
        return 3
    if _ANS_ASSIGN.search(code):
        return 2
    if _OTHER_ASSIGN.search(code):
        return 1
    return 0


def _from_blocks(blocks: list[_Block], warnings: tuple[str, ...]) -> ExtractedProgram:
    py = [b for b in blocks if _is_python_block(b)]
    if not py:
        if blocks and not blocks[-1].closed and blocks[-1].lang in ("", *_PY_LANGS):
            return ExtractedProgram(None, ProgramHow.TRUNCATED, (*warnings, "unclosed_fence"), truncated=True)
        return ExtractedProgram(None, ProgramHow.NONE, warnings)
    index, how = _choose_block(py)
    chosen = py[index]
    if index < len(py) - 1 and not py[-1].closed:
        warnings = (*warnings, "later_block_unclosed")
    if not chosen.closed:
        return _finish_unclosed(chosen.code, how, warnings)
    code, notes = _merge_blocks(py, index)
    if any(n.startswith("merged") for n in notes):
        how = ProgramHow.FENCE_MERGED
    return _finish(code, how, (*warnings, *notes), check_truncation=False)


def _choose_block(py: list[_Block]) -> tuple[int, ProgramHow]:
    """Index of the block to run: the last one defining an entry point, else the last one that is not
    a use block (a block that only prints or calls what earlier blocks defined)."""
    if len(py) == 1:
        return 0, ProgramHow.FENCE
    best, best_rank, primaries, last_primary = -1, 0, 0, len(py) - 1
    earlier = _EarlierNames(py)
    for i, block in enumerate(py):
        found = _uses(block.code) if i else None
        if not (found and found[1] & earlier.upto(i)):
            primaries += 1
            last_primary = i
            rank = _entry_rank(block.code)
            if rank and rank >= best_rank:
                best, best_rank = i, rank
    if best < 0:
        return last_primary, ProgramHow.FENCE
    return best, ProgramHow.FENCE_ENTRY if primaries > 1 else ProgramHow.FENCE


class _EarlierNames:
    """Names defined by blocks before index i, gathered only when a use block asks (amortised linear)."""

    __slots__ = ("_blocks", "_done", "_names")

    def __init__(self, blocks: list[_Block]) -> None:
        self._blocks, self._names, self._done = blocks, set[str](), 0

    def upto(self, i: int) -> set[str]:
        for block in self._blocks[self._done : i]:
            self._names |= _names_defined(block.code)
        self._done = max(self._done, i)
        return self._names


@functools.lru_cache(maxsize=64)
def _names_defined(code: str) -> frozenset[str]:
    """Top-level function names and assigned names (cached: use-block checks ask for each block)."""
    return frozenset(_TOP_DEF.findall(code)) | frozenset(_TOP_ASSIGNED.findall(code))


def _uses(code: str) -> tuple[list[tuple[str, bool]], set[str]] | None:
    """(called names with whether they got arguments, names read) of a small block made only of calls,
    names and assignments of those; None for any other block."""
    if len(code) > 400 or "(" not in code or _TOP_DEF.search(code):
        return None  # a use block prints or calls something, and is small
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None
    calls: list[tuple[str, bool]] = []
    read: set[str] = set()
    for stmt in tree.body:
        value = stmt.value if isinstance(stmt, (ast.Expr, ast.Assign)) else None
        if not isinstance(value, (ast.Call, ast.Name)):
            return None
        for node in ast.walk(value):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                calls.append((node.func.id, bool(node.args or node.keywords)))
            elif isinstance(node, ast.Name):
                read.add(node.id)
    return calls, read


def _merge_blocks(py: list[_Block], index: int) -> tuple[str, tuple[str, ...]]:
    """The chosen code, with the use blocks after it (dropped when they only repeat the entry point)
    and the blocks before it that define a function it calls."""
    code = py[index].code
    if len(py) == 1:
        return code, ()
    notes: list[str] = []
    has_entry = _entry_rank(code) > 0
    defined: frozenset[str] = frozenset()  # computed on first need: findall over a block costs
    for later in py[index + 1 :]:
        found = _uses(later.code) if later.closed else None
        if found is None:
            continue
        defined = defined or _names_defined(code)
        if not found[1] & defined:
            continue
        if has_entry and all(n == "print" or (n in _REDUNDANT_CALLEES and not a) for n, a in found[0]):
            notes.append("dropped_call_block")  # potrun calls the entry point itself
        else:
            code = code + "\n" + later.code
            notes.append("merged_call_block")
    if not any("def " in earlier.code for earlier in py[:index]):
        return code, tuple(notes)
    defined = defined or _names_defined(code)
    missing = {n for n in _CALLED.findall(code) if n not in defined}
    for earlier in reversed(py[:index]):
        helpers = set(_TOP_DEF.findall(earlier.code)) & missing
        if helpers and earlier.closed:
            code = earlier.code + "\n" + code
            missing -= helpers
            notes.append("merged_helper_block")
    return code, tuple(notes)


# ---------------------------------------------------------------- bare and unfenced text


def _try_bare(text: str) -> ExtractedProgram | None:
    """The whole text as a program, unchanged, when it parses (or is a plain program cut short)."""
    tree = _parse(text)
    if isinstance(tree, ast.Module):
        if "return" in text and _has_top_return(tree.body):  # no walk where no return can be
            return None  # DocMath body without its header: the unfenced path repairs it
        return ExtractedProgram(text, ProgramHow.BARE) if _has_statement(tree) else None
    if tree is None and len(text) > MAX_PARSE_CHARS and _all_code_lines(text):
        return ExtractedProgram(text, ProgramHow.BARE, ("not_parsed",))
    if isinstance(tree, SyntaxError) and _all_code_lines(text):
        if _looks_truncated(text, tree):
            return ExtractedProgram(None, ProgramHow.TRUNCATED, ("cut_mid_statement",), truncated=True)
        if _needs_repair(text):
            return None  # the unfenced path repairs it
        return ExtractedProgram(text, ProgramHow.BARE, ("syntax_error",))
    return None


def _has_statement(tree: ast.Module) -> bool:
    """More than a lone value: "42" or "Answer" parse as Python but are not programs."""
    return any(not isinstance(stmt, ast.Expr) or isinstance(stmt.value, (ast.Call, ast.Await)) for stmt in tree.body)


def _has_top_return(body: list[ast.stmt]) -> bool:
    """A `return` outside any function (ast.parse accepts it; compile() would not)."""
    for stmt in body:
        if isinstance(stmt, ast.Return):
            return True
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        for field in ("body", "orelse", "finalbody"):
            if _has_top_return(getattr(stmt, field, None) or []):
                return True
        for handler in getattr(stmt, "handlers", None) or []:
            if _has_top_return(handler.body):
                return True
    return False


def _line_kinds(text: str) -> Iterator[tuple[str, bool]]:
    """(line, is_code) for each line. Blank lines are neutral (code); an indented line right after
    code, or any line inside an open bracket, continues the code."""
    depth = 0
    in_code = False
    for line in text.split("\n"):
        stripped = line.strip()
        if not stripped:
            yield line, True
            continue
        code = depth > 0 or (in_code and line[:1] in (" ", "\t")) or _CODE_LINE.match(stripped) is not None
        depth = max(0, depth + _bracket_delta(stripped)) if code else 0
        in_code = code
        yield line, code


def _bracket_delta(line: str) -> int:
    return line.count("(") + line.count("[") + line.count("{") - line.count(")") - line.count("]") - line.count("}")


def _all_code_lines(text: str) -> bool:
    return all(code for _, code in _line_kinds(text))


def _code_runs(text: str) -> list[str]:
    """Maximal runs of code lines, in order; runs of nothing but comments are dropped."""
    runs: list[str] = []
    current: list[str] = []
    for line, code in _line_kinds(text):
        if code:
            current.append(line)
        elif current:
            runs.append("\n".join(current).strip("\n"))
            current = []
    if current:
        runs.append("\n".join(current).strip("\n"))
    return [r for r in runs if any(line.strip() and not line.strip().startswith("#") for line in r.split("\n"))]


def _from_unfenced(text: str) -> ExtractedProgram:
    """The last run that defines an entry point, prints, defines a function or returns; else the
    last run of two or more statements that parses (flagged "no_entry_point")."""
    runs = _code_runs(text)
    strong = [r for r in runs if _is_strong_run(_dedent_probe(r))]
    warnings: tuple[str, ...] = ()
    if strong:
        chosen = strong[-1]
    else:
        weak = [r for r in runs if _is_weak_run(r)]
        if not weak:
            return ExtractedProgram(None, ProgramHow.NONE)
        chosen, warnings = weak[-1], ("no_entry_point",)
    ends_text = text.rstrip().endswith(chosen.rstrip())
    return _finish(chosen + "\n", ProgramHow.UNFENCED, warnings, check_truncation=ends_text)


def _is_strong_run(probe: str) -> bool:
    return bool(_entry_rank(probe) or _PRINT.search(probe) or _TOP_DEF.search(probe) or _TOP_RETURN.search(probe))


def _is_weak_run(run: str) -> bool:
    tree = _parse(run)
    return isinstance(tree, ast.Module) and len(tree.body) >= 2


def _dedent_probe(code: str) -> str:
    """The code with its common indentation removed, for the column-0 entry patterns."""
    first = next((line for line in code.split("\n") if line.strip()), "")
    indent = len(first) - len(first.lstrip())
    if not indent:
        return code
    return "\n".join(line[indent:] if line[:indent].isspace() else line.lstrip() for line in code.split("\n"))


def _from_continuation(text: str) -> ExtractedProgram | None:
    """DocMath's continuation (rule 6): an indented body that returns, at most one fence, which closes
    it on a line of its own; None for any other shape."""
    if "~~~" in text or text.count("```") > 1:
        return None
    fence = text.find("```")
    code = text if fence < 0 else text[:fence]
    if fence >= 0 and (code.rstrip(" \t")[-1:] not in ("", "\n") or text[fence + 3 :].split("\n", 1)[0].strip()):
        return None  # the fence is not a closing line of its own
    lines = code.strip("\n").split("\n")
    rest = [line for line in lines[1:] if line.strip()]
    first = lines[0]
    if not rest or not all(line[:1] in (" ", "\t") for line in rest) or _BODY_RETURN.search(code) is None:
        return None
    if first[:1] not in (" ", "\t"):
        if first.rstrip().endswith(":") or _TOP_DEF.match(first):
            return None  # a header of its own: a complete program, not a body
        first = "    " + first  # the prompt wrote this line's indentation
    body = "\n".join([first, *lines[1:]]) + "\n"
    if not _all_code_lines(body):
        return None
    found = _finish(body, ProgramHow.REPAIRED_HEADER, ("continuation",), check_truncation=fence < 0)
    return None if "syntax_error" in found.warnings else found  # no repair parses: not this shape


# ---------------------------------------------------------------- finishing: repair and truncation


def _parse(code: str) -> ast.Module | SyntaxError | None:
    """The AST, the SyntaxError, or None when the code is too long to parse here (over
    MAX_PARSE_CHARS: parsing is linear but ~1 µs a character) or breaks the parser itself."""
    if len(code) > MAX_PARSE_CHARS:
        return None
    try:
        return ast.parse(code)
    except SyntaxError as err:
        return err
    except (ValueError, MemoryError, RecursionError):  # null bytes, absurd nesting
        return None


def _finish(code: str, how: ProgramHow, warnings: tuple[str, ...], *, check_truncation: bool) -> ExtractedProgram:
    """Repair the chosen code when needed; report it cut when it ends mid-statement."""
    if not code.strip():
        return ExtractedProgram(None, ProgramHow.NONE, warnings)
    if not _needs_repair(code):
        if not check_truncation:
            return ExtractedProgram(code, how, warnings)
        tree = _parse(code)
        if isinstance(tree, ast.Module):
            return ExtractedProgram(code, how, warnings)
        if tree is None:
            return ExtractedProgram(code, how, (*warnings, "not_parsed"))
        if _looks_truncated(code, tree):
            return ExtractedProgram(None, ProgramHow.TRUNCATED, (*warnings, "cut_mid_statement"), truncated=True)
        return ExtractedProgram(code, how, (*warnings, "syntax_error"))
    repaired = _repair(code)
    if repaired is not None:
        return ExtractedProgram(repaired[0], repaired[1], warnings)
    tree = _parse(code)
    if isinstance(tree, SyntaxError) and check_truncation and _looks_truncated(code, tree):
        return ExtractedProgram(None, ProgramHow.TRUNCATED, (*warnings, "cut_mid_statement"), truncated=True)
    return ExtractedProgram(code, how, (*warnings, "syntax_error") if not isinstance(tree, ast.Module) else warnings)


def _finish_unclosed(code: str, how: ProgramHow, warnings: tuple[str, ...]) -> ExtractedProgram:
    """An unclosed last fence: truncated, unless the code parses and ends complete (a stop sequence)."""
    candidate = code
    repaired = _repair(code) if _needs_repair(code) else None
    if repaired is not None:
        candidate, how = repaired
    tree = _parse(candidate)
    if isinstance(tree, ast.Module) and _ends_complete(tree):
        return ExtractedProgram(candidate, how, (*warnings, "unclosed_fence"))
    return ExtractedProgram(None, ProgramHow.TRUNCATED, (*warnings, "unclosed_fence"), truncated=True)


def _ends_complete(tree: ast.Module) -> bool:
    """The entry function ends in `return`, or the last top-level statement sets an answer name
    (`ans = …`, or a loop whose body does `ans += …`) or prints / calls the entry point."""
    if not tree.body:
        return False
    last = tree.body[-1]
    if isinstance(last, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return last.name in ENTRY_FUNCTIONS and isinstance(last.body[-1], ast.Return)
    if isinstance(last, ast.Expr) and isinstance(last.value, ast.Call):
        func = last.value.func
        return isinstance(func, ast.Name) and (func.id == "print" or func.id in ENTRY_FUNCTIONS)
    for node in ast.walk(last):
        targets = (
            node.targets
            if isinstance(node, ast.Assign)
            else ([node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else [])
        )
        if any(isinstance(t, ast.Name) and t.id in _ANSWER_NAMES for t in targets):
            return True
    return False


def _looks_truncated(code: str, err: SyntaxError) -> bool:
    """A syntax error that a cut at the end explains: unclosed bracket or string, or on the last line."""
    msg = (err.msg or "").lower()
    if any(m in msg for m in _EOF_MESSAGES):
        return True
    lines = code.rstrip().split("\n")
    lineno = err.lineno or 0
    if lineno > len(lines) or (lineno == len(lines) and "expected an indented block" in msg):
        return True  # a header whose body never came
    return lineno == len(lines) and not code.endswith("\n") and "indent" not in msg


def _needs_repair(code: str) -> bool:
    """Cheap signs of DocMath's shapes, checked before paying for a parse."""
    first = next((line for line in code.split("\n", 3) if line.strip()), "")
    return (
        first[:1] in (" ", "\t") or _TOP_RETURN.search(code) is not None or _HEADER_UNINDENTED.search(code) is not None
    )


def _repair(code: str) -> tuple[str, ProgramHow] | None:
    """(repaired source, how) for DocMath-style bodies, or None when no repair makes it parse."""
    tree = _parse(code)
    if isinstance(tree, ast.Module) and not _has_top_return(tree.body):
        return None
    for attempt in (_repair_header_indent, _repair_indented_body, _repair_flat_body):
        repaired = attempt(code)
        if repaired is None:
            continue
        fixed = _parse(repaired[0])
        if isinstance(fixed, ast.Module) and not _has_top_return(fixed.body):
            return repaired
    return None


def _repair_header_indent(code: str) -> tuple[str, ProgramHow] | None:
    """`def solution():` present, body at column 0: indent the body up to the entry call."""
    lines = code.split("\n")
    for i, line in enumerate(lines):
        if _HEADER_LINE.fullmatch(line.rstrip()):
            nxt = next((following for following in lines[i + 1 :] if following.strip()), "")
            if nxt[:1] not in (" ", "\t"):
                body = _indent_until_call(lines[i + 1 :])
                return "\n".join(lines[: i + 1] + body), ProgramHow.REPAIRED_INDENT
    return None


def _repair_indented_body(code: str) -> tuple[str, ProgramHow] | None:
    """An indented body (DocMath's prompt already wrote the header): add it, or dedent a script."""
    first = next((line for line in code.split("\n") if line.strip()), "")
    if first[:1] not in (" ", "\t"):
        return None
    probe = _dedent_probe(code)
    if _TOP_RETURN.search(probe):
        return "def solution():\n" + code.lstrip("\n"), ProgramHow.REPAIRED_HEADER
    return probe, ProgramHow.REPAIRED_INDENT


def _repair_flat_body(code: str) -> tuple[str, ProgramHow] | None:
    """A body at column 0 with a top-level `return`: wrap it in `def solution():`."""
    if not _TOP_RETURN.search(code):
        return None
    body = _indent_until_call(code.strip("\n").split("\n"))
    return "def solution():\n" + "\n".join(body) + "\n", ProgramHow.REPAIRED_HEADER


def _indent_until_call(lines: list[str]) -> list[str]:
    """Indent lines by four spaces, stopping at a top-level call of the entry (`print(solution())`)."""
    out: list[str] = []
    for j, line in enumerate(lines):
        if _ENTRY_CALL_LINE.match(line):
            return out + lines[j:]
        out.append("    " + line if line.strip() else line)
    return out
