"""Values as JSON, the same for lakerules' rows and the anchor's (tests/anchor_driver.py runs in
the anchor's venv and imports only this): dates, timestamps and decimals as their text, bytes as
hex, structs as dicts, lists and maps element by element."""

from __future__ import annotations

import datetime
import decimal


def to_json(v):
    if isinstance(v, (datetime.date, datetime.datetime, decimal.Decimal)):
        return str(v)
    if isinstance(v, (bytes, bytearray)):
        return v.hex()
    if hasattr(v, "asDict"):
        return {k: to_json(x) for k, x in v.asDict().items()}
    if isinstance(v, (list, tuple)):
        return [to_json(x) for x in v]
    if isinstance(v, dict):
        return {str(k): to_json(x) for k, x in v.items()}
    return v


def row(r) -> tuple:
    return tuple(to_json(v) for v in r)
