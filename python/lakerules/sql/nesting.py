"""How deep a statement lakerules parses may nest, and room for its parser to recurse that deep.

sqlglot parses by recursive descent, some twenty Python frames per nested parenthesis: under
Python's default recursion limit (1000) a WHERE nested about 45 deep failed with a RecursionError
and a traceback. Spark's own parser refuses a statement nested a few hundred deep with its error
FAILED_TO_PARSE_TOO_COMPLEX; lakerules does the same past ``MAX_DEPTH`` brackets (below Spark's
limit, so that what lakerules hands on to Spark's parser, a WHERE or a CALL argument, parses
there too), and while it parses raises Python's limit so that anything shallower parses. A
RecursionError there still (nesting without brackets: NOT NOT NOT ...) is the same error.
"""

from __future__ import annotations

import sys
import threading
from contextlib import contextmanager

from lakerules.errors import TooComplex

MAX_DEPTH = 256
_FRAMES = 30_000  # Python frames while parsing: MAX_DEPTH levels at ~25 frames, and the caller's
_lock = threading.Lock()
_parsing = 0
_limit_before: int | None = None


def depth(tokens) -> int:
    """How deep the statement's brackets ((), [], {}) nest, given its tokens (strings and
    comments are single tokens or none)."""
    from sqlglot.tokens import TokenType

    opening = (TokenType.L_PAREN, TokenType.L_BRACKET, TokenType.L_BRACE)
    closing = (TokenType.R_PAREN, TokenType.R_BRACKET, TokenType.R_BRACE)
    level = deepest = 0
    for t in tokens:
        if t.token_type in opening:
            level += 1
            deepest = max(deepest, level)
        elif t.token_type in closing:
            level = max(0, level - 1)
    return deepest


@contextmanager
def parsing(sql: str, tokens):
    """Parse ``sql`` (``tokens``: the dialect's tokens of it) inside: refused as too complex when
    nested deeper than MAX_DEPTH, with room to recurse; a RecursionError inside is the same refusal."""
    if depth(tokens) > MAX_DEPTH:
        raise TooComplex(sql, MAX_DEPTH)
    _enter()
    try:
        yield
    except RecursionError:
        raise TooComplex(sql, MAX_DEPTH) from None
    finally:
        _exit()


def _enter() -> None:
    """Raise Python's recursion limit while any thread parses (the limit is the process's; the
    last parse to finish puts it back)."""
    global _parsing, _limit_before
    with _lock:
        if _parsing == 0:
            _limit_before = sys.getrecursionlimit()
            if _limit_before < _FRAMES:
                sys.setrecursionlimit(_FRAMES)
        _parsing += 1


def _exit() -> None:
    global _parsing, _limit_before
    with _lock:
        _parsing -= 1
        if _parsing == 0 and _limit_before is not None:
            if sys.getrecursionlimit() == max(_limit_before, _FRAMES):  # nobody else changed it meanwhile
                sys.setrecursionlimit(_limit_before)
            _limit_before = None
