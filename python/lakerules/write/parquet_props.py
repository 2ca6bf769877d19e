"""The table's Parquet writer properties (Iceberg's ``write.parquet.*``), as the options Spark's
Parquet writer (parquet-mr) reads. Each one is honored or refused with an error naming it:

=============================================  ====================================================
``write.parquet.compression-codec``             ``compression``: zstd (default), snappy, gzip, lz4,
                                                brotli, uncompressed
``write.parquet.compression-level``             ``parquet.compression.codec.zstd.level`` (zstd only)
``write.parquet.row-group-size-bytes``          ``parquet.block.size``
``write.parquet.page-size-bytes``               ``parquet.page.size``
``write.parquet.page-row-limit``                ``parquet.page.row.count.limit``
``write.parquet.dict-size-bytes``               ``parquet.dictionary.page.size``
``write.parquet.row-group-check-min-record-count``  ``parquet.block.size.row.check.min``
``write.parquet.row-group-check-max-record-count``  ``parquet.block.size.row.check.max``
``write.parquet.bloom-filter-enabled.column.<c>``   ``parquet.bloom.filter.enabled#<c>``
``write.parquet.bloom-filter-fpp.column.<c>``       ``parquet.bloom.filter.fpp#<c>``
``write.parquet.bloom-filter-max-bytes``        ``parquet.bloom.filter.max.bytes``
``write.parquet.bloom-filter-ndv.column.<c>``       ``parquet.bloom.filter.expected.ndv#<c>``
=============================================  ====================================================

A bloom filter is as large as its column's distinct values in the file need, up to the maximum:
unless the table sets a column's expected distinct values (``bloom-filter-ndv``), parquet-mr's
adaptive filters are on (``parquet.bloom.filter.adaptive.enabled``, ``ADAPTIVE_CANDIDATES`` sizes
from the maximum down by halves; the smallest that holds the values seen at the false positive
rate is written). Without them, parquet-mr writes every filter at the maximum, 1 MiB: a CDC
batch's file of 10,000 rows grew from 40 KB to 1.09 MB, and reading its filter cost as much.

Delete files (position and equality) read ``write.delete.parquet.<x>`` first, as Iceberg's
writers do, then ``write.parquet.<x>``. A property the table does not set is left to Spark's
writer (parquet-mr's defaults, which are Iceberg's but for the dictionary page: 1 MiB, or
whatever the session's Hadoop configuration says). A bloom filter column is the schema's name of
a column (``s.a`` for a struct field), which is also its path in the Parquet file.
"""

from __future__ import annotations

from lakerules.errors import NotSupported

PREFIX = "write.parquet."
CODECS = {"zstd": "zstd", "snappy": "snappy", "gzip": "gzip", "lz4": "lz4_raw", "uncompressed": "none",
          "none": "none", "brotli": "brotli"}
# Iceberg's name -> parquet-mr's key
SIZES = {
    "row-group-size-bytes": "parquet.block.size",
    "page-size-bytes": "parquet.page.size",
    "page-row-limit": "parquet.page.row.count.limit",
    "dict-size-bytes": "parquet.dictionary.page.size",
    "row-group-check-min-record-count": "parquet.block.size.row.check.min",
    "row-group-check-max-record-count": "parquet.block.size.row.check.max",
    "bloom-filter-max-bytes": "parquet.bloom.filter.max.bytes",
}
BLOOM_ENABLED, BLOOM_FPP, BLOOM_NDV = "bloom-filter-enabled.column.", "bloom-filter-fpp.column.", "bloom-filter-ndv.column."
ADAPTIVE_CANDIDATES = 9  # 1 MiB down to 4 KiB: about 3,400 distinct values at 1%


def writer_options(properties: dict[str, str], columns: set[str] | None,
                   named: dict[str, str] | None = None) -> dict[str, str]:
    """Spark Parquet writer options for a table's properties; ``columns`` are the names a bloom
    filter property may name, or None for delete files (bloom filters are for data files);
    ``named`` gives, for a key of ``properties``, the property the table set (errors name it).

    >>> writer_options({}, set())
    {'compression': 'zstd'}
    >>> o = writer_options({"write.parquet.page-row-limit": "5000",
    ...                     "write.parquet.bloom-filter-enabled.column.s.a": "true"}, {"s.a"})
    >>> o["parquet.page.row.count.limit"], o["parquet.bloom.filter.enabled#s.a"]
    ('5000', 'true')
    >>> o["parquet.bloom.filter.adaptive.enabled"], o["parquet.bloom.filter.candidates.number#s.a"]
    ('true', '9')
    >>> writer_options({"write.parquet.page-row-limit": "0"}, set())
    Traceback (most recent call last):
    ...
    lakerules.errors.NotSupported: lakerules: table property write.parquet.page-row-limit='0' must be a whole number of at least 1
    >>> writer_options({"write.parquet.compression-level": "3", "write.parquet.compression-codec": "snappy"}, set())
    Traceback (most recent call last):
    ...
    lakerules.errors.NotSupported: lakerules: table property write.parquet.compression-level is honored for zstd only (this table writes snappy)
    """
    named = named or {}
    used = codec(properties, named)
    out = {"compression": CODECS[used]}
    for key, raw in properties.items():
        if not key.startswith(PREFIX):
            continue
        name, prop = key[len(PREFIX):], named.get(key, key)
        if name == "compression-codec":
            continue
        if name in SIZES:
            out[SIZES[name]] = str(_whole(prop, raw, 1))
        elif name == "compression-level":
            if used != "zstd":
                raise NotSupported(f"lakerules: table property {prop} is honored for zstd only "
                                   f"(this table writes {used})")
            out["parquet.compression.codec.zstd.level"] = str(_whole(prop, raw, -131072))
        elif name.startswith(BLOOM_ENABLED) or name.startswith(BLOOM_FPP) or name.startswith(BLOOM_NDV):
            enabled = name.startswith(BLOOM_ENABLED)
            column = name[len(next(p for p in (BLOOM_ENABLED, BLOOM_FPP, BLOOM_NDV) if name.startswith(p))):]
            if columns is None:
                continue
            if column not in columns:
                raise NotSupported(f"lakerules: table property {prop} names no column of the table "
                                   f"(columns: {', '.join(sorted(columns))})")
            if enabled:
                if raw.strip().lower() not in ("true", "false"):
                    raise NotSupported(f"lakerules: table property {prop}={raw!r} must be true or false")
                out[f"parquet.bloom.filter.enabled#{column}"] = raw.strip().lower()
            elif name.startswith(BLOOM_NDV):
                out[f"parquet.bloom.filter.expected.ndv#{column}"] = str(_whole(prop, raw, 1))
            else:
                try:
                    fpp = float(raw)
                except ValueError:
                    fpp = -1.0
                if not 0.0 < fpp < 1.0:
                    raise NotSupported(f"lakerules: table property {prop}={raw!r} must be a probability between 0 and 1")
                out[f"parquet.bloom.filter.fpp#{column}"] = repr(fpp)
        else:
            known = sorted(["compression-codec", "compression-level", *SIZES,
                            BLOOM_ENABLED + "<column>", BLOOM_FPP + "<column>", BLOOM_NDV + "<column>"])
            raise NotSupported(f"lakerules: table property {prop} is not supported by lakerules' writer; "
                               f"it honors {', '.join(PREFIX + k for k in known)}")
    bloomed = [k.partition("#")[2] for k, v in out.items() if k.startswith("parquet.bloom.filter.enabled#") and v == "true"]
    if bloomed and not any(k.startswith("parquet.bloom.filter.expected.ndv#") for k in out):
        # parquet-mr's adaptive filters apply to every column or none, and ignore an expected NDV
        out["parquet.bloom.filter.adaptive.enabled"] = "true"
        for column in bloomed:
            out[f"parquet.bloom.filter.candidates.number#{column}"] = str(ADAPTIVE_CANDIDATES)
    return out


DELETE_PREFIX = "write.delete.parquet."


def delete_writer_options(properties: dict[str, str]) -> dict[str, str]:
    """Spark Parquet writer options for delete files: Iceberg's ``write.delete.parquet.<x>``,
    else ``write.parquet.<x>`` (bloom filters are for data files).

    >>> delete_writer_options({"write.parquet.compression-codec": "snappy",
    ...                        "write.delete.parquet.page-row-limit": "100"})
    {'compression': 'snappy', 'parquet.page.row.count.limit': '100'}
    """
    merged = {k: v for k, v in properties.items() if not k.startswith(DELETE_PREFIX)}
    if DELETE_PREFIX + "compression-codec" in properties and DELETE_PREFIX + "compression-level" not in properties:
        merged.pop(PREFIX + "compression-level", None)  # the data files' level is for their codec
    named = {}
    for k, v in properties.items():
        if k.startswith(DELETE_PREFIX):
            merged[PREFIX + k[len(DELETE_PREFIX):]] = v
            named[PREFIX + k[len(DELETE_PREFIX):]] = k
    try:
        return writer_options(merged, None, named)
    except NotSupported as e:
        raise NotSupported(f"{e} (writing delete files)") from None


def codec(properties: dict[str, str], named: dict[str, str] | None = None) -> str:
    key = PREFIX + "compression-codec"
    name = properties.get(key, "zstd").lower()
    if name not in CODECS:
        raise NotSupported(f"lakerules: {(named or {}).get(key, key)}={name} is not supported; use one of {sorted(CODECS)}")
    return name


def _whole(prop: str, raw: str, lowest: int) -> int:
    try:
        value = int(raw.strip())
    except ValueError:
        value = lowest - 1
    if value < lowest:
        raise NotSupported(f"lakerules: table property {prop}={raw!r} must be a whole number of at least {lowest}")
    return value
