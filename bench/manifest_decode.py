"""The shim's manifest decoding (io.lakerules.functions.ManifestColumns) on the scale benchmark's
100,000-file table: its current snapshot's 100 manifests of 1,000 entries, decoded into the
manifest cache's Arrow columns N times in one process (the first run JIT-cold, as a new session's
first query is). bench/cold.py measures the query around it.

    .venv/bin/python bench/manifest_decode.py [N]

The table is bench/scale.py's, cached under bench/out/scale/cache/100000x10 (bench/cold.py 100000
makes it)."""

import time, tempfile, json, os, sys
import lakerules
from pyiceberg.table import StaticTable
info = json.load(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), 'out/scale/cache/100000x10/table.json')))
t = StaticTable.from_metadata(info['metadata_location'])
paths = [m.manifest_path for m in t.current_snapshot().manifests(t.io)]
print(len(paths), 'manifests', f'load {os.getloadavg()[0]:.2f}')
spark = lakerules.session(warehouse=tempfile.mkdtemp(), master="local[2]", conf={"spark.ui.enabled": "false"})
spark.sparkContext.setLogLevel("ERROR")
from lakerules.spark.manifest_io import manifest_columns
for i in range(int(sys.argv[1]) if len(sys.argv) > 1 else 3):
    s = time.perf_counter()
    tabs = manifest_columns(spark, paths, [], [(1, "long")])
    d = time.perf_counter() - s
    n = sum(x.num_rows for x in tabs)
    print(f"run {i}: {d:.2f} s, {n} entries, {d/n*1e6:.1f} us/entry", flush=True)
