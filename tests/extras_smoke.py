"""Run by tests/test_packaging.py in the fresh venv after `pip install <wheel>[s3,hive,glue]`: each
extra brings what pyiceberg needs for its catalog or file system, and lakerules builds that catalog
from the properties Spark's configuration would give it (spark.sql.catalog.NAME.<property>). No
service is reached: the Hive client, the Glue client and pyarrow's S3 file system (which serves s3:// paths,
so the s3 extra adds nothing to pyarrow) are made, not used.

    <venv>/bin/python tests/extras_smoke.py"""

import sys


def main() -> None:
    from pyiceberg.io import load_file_io

    from lakerules.iceberg import catalogs

    hive = catalogs.build("hms", {"type": "hive", "uri": "thrift://127.0.0.1:9"})
    glue = catalogs.build("glue", {"type": "glue", "glue.region": "eu-west-1",
                                   "glue.access-key-id": "k", "glue.secret-access-key": "s"})
    # lakerules wraps each loaded catalog in a guard subclass of its class (iceberg/guarded.py)
    from pyiceberg.catalog.glue import GlueCatalog
    from pyiceberg.catalog.hive import HiveCatalog

    assert isinstance(hive, HiveCatalog) and isinstance(glue, GlueCatalog), (type(hive).__mro__, type(glue).__mro__)
    names = {"HiveCatalog", "GlueCatalog"}
    io = load_file_io({"s3.endpoint": "http://127.0.0.1:9", "s3.region": "eu-west-1"}, "s3://bucket/warehouse")
    fs = io.fs_by_scheme("s3", "bucket")
    assert type(io).__name__ == "PyArrowFileIO" and type(fs).__name__ == "S3FileSystem", (io, fs)
    print("ok extras", " ".join(sorted(names)), type(fs).__name__)


if __name__ == "__main__":  # pytest --doctest-modules imports this file
    sys.exit(main())
