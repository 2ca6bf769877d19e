"""Names the shim (jvm-shim/) and the Python package both spell, each defined once: here.

No imports: the jar build (jvm-shim/shim_build.py) reads this file on its own, as it reads
lakerules/sql/routes.py, and writes every upper-case string in it into the jar
(io/lakerules/shared.json), which the shim's SharedNames reads when it loads. The build refuses a
``*_CLASS`` that names no class it compiled; tests/test_packaging.py checks that the jar holds
this file's names (a stale jar: rebuild it with ``make shim``)."""

# ---- the shim's classes, as Spark's settings and lakerules' checks of a plan name them ------------
EXTENSIONS_CLASS = "io.lakerules.LakeRulesExtensions"  # spark.sql.extensions
CATALOG_CLASS = "io.lakerules.LakeCatalog"  # spark.sql.catalog.<name>
TABLE_CLASS = "io.lakerules.LakeTable"  # a lake table as Spark resolves it
STATEMENT_CLASS = "io.lakerules.LakeStatement"  # a statement lakerules parsed, as data, until planned
NESTED_IDS_FORMAT_CLASS = "io.lakerules.NestedIdParquetFormat"  # Parquet writes with nested field ids

# ---- the Python process a JVM driver starts (io.lakerules.PythonBackend) -------------------------
JVM_DRIVER_MODULE = "lakerules.jvm_driver"  # python -m <this>
PYTHON_SETTING = "spark.lakerules.python"  # the interpreter it runs
PYTHON_START_TIMEOUT_SETTING = "spark.lakerules.python.startTimeout"  # how long the JVM waits for it

# ---- options of the shim's file formats (lower case: Spark lower-cases option names) -------------
NESTED_IDS_OPTION = "lakerules.nestedids"  # NestedIdParquetFormat: the list and map ids to write
ROW_GROUPS_OPTION = "lakerules.rowgroups"  # RowGroupParquetFormat: the row groups (and rows) to read
# a lineage read's constant _metadata fields (RowGroupParquetFormat): a file's first_row_id, data sequence number
FIRST_ROW_ID_FIELD = "lakerules_first_row_id"
DATA_SEQUENCE_FIELD = "lakerules_data_sequence_number"

# ---- LakeTable properties that mark a metadata table (the shim carries them, Python reads them) --
METADATA_TABLE_PROPERTY = "lakerules.metadata-table"  # its name (snapshots, files, ...)
METADATA_TABLE_BASE_PROPERTY = "lakerules.metadata-table.base"  # the base table's identifier, JSON
