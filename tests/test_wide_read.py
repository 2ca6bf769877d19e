"""A wide table with large row groups is read at Spark's default 1 GiB driver heap (issue 21.4).

Field-id Parquet reads of 60-column tables with ~100 MiB row groups once died with
``OutOfMemoryError`` in ``ParquetFileReader.readVectored`` at the default heap. This starts a
driver of its own with ``spark.driver.memory=1g`` and reads every column of the matching rows.
Slow (a JVM of its own, ~600 MiB of Parquet): run by ``make soak`` (LAKERULES_PROFILE=soak).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

pytestmark = pytest.mark.skipif(os.environ.get("LAKERULES_PROFILE", "small") != "soak",
                                reason="long profile: make soak")

COLUMNS, ROWS, FILES = 60, 250_000, 2

DRIVER = textwrap.dedent("""
    import sys
    import lakerules
    warehouse, files, late = sys.argv[1], sys.argv[2:-1], sys.argv[-1]
    spark = lakerules.session(warehouse=warehouse, master="local[2]", conf={
        "spark.ui.enabled": "false", "spark.driver.memory": "1g", "spark.ui.showConsoleProgress": "false",
        "spark.lakerules.read.lateMaterialization": late})
    spark.sparkContext.setLogLevel("ERROR")
    spark.sql("CREATE NAMESPACE IF NOT EXISTS lake.db")
    if not spark.catalog.tableExists("lake.db.wide"):
        import pyarrow.parquet as pq
        catalog = lakerules._backend.catalogs.get("lake")
        catalog.create_table(("db", "wide"), pq.read_schema(files[0])).add_files(files)
    rows = spark.sql("SELECT * FROM lake.db.wide WHERE k1 % 100000 = 17").collect()
    assert len(rows) == {expected} and all(len(r) == {width} for r in rows), (len(rows), rows[:1])
    print("read", len(rows))
""")


def test_wide_row_groups_at_one_gib(tmp_path):
    rng = np.random.default_rng(7)
    paths = []
    for f in range(FILES):
        fields = [pa.field("k1", pa.int64(), metadata={b"PARQUET:field_id": b"1"})]
        fields += [pa.field(f"c{i}", pa.float64(), metadata={b"PARQUET:field_id": str(i + 2).encode()})
                   for i in range(COLUMNS)]
        arrays = [pa.array(np.arange(ROWS, dtype=np.int64) + f * ROWS)] + [pa.array(rng.random(ROWS))
                                                                           for _ in range(COLUMNS)]
        path = tmp_path / f"wide-{f}.parquet"
        pq.write_table(pa.table(arrays, schema=pa.schema(fields)), path, row_group_size=ROWS, compression="none")
        assert pq.ParquetFile(path).metadata.row_group(0).total_byte_size > 100 << 20
        paths.append(str(path))
    expected = sum(1 for k in range(ROWS * FILES) if k % 100_000 == 17)
    script = DRIVER.replace("{expected}", str(expected)).replace("{width}", str(COLUMNS + 1))
    for late in ("off", "on"):
        done = subprocess.run([sys.executable, "-c", script, str(tmp_path / "wh"), *paths, late],
                              capture_output=True, text=True, timeout=900)
        assert done.returncode == 0 and f"read {expected}" in done.stdout, done.stderr[-3000:]
        assert "OutOfMemoryError" not in done.stderr
