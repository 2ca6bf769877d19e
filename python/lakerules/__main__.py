"""python -m lakerules jar | conf [--warehouse W] [--catalog NAME] | jvm-archive [--build]
                      | inspect CATALOG.NS.TABLE [--column C ...] [--plot OUT.png]
                                [--warehouse W | --catalog-property K=V ...]"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

import lakerules
from lakerules.spark import shared


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lakerules")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("jar", help="print the path of the shim jar")
    conf = sub.add_parser("conf", help="print the spark-submit flags for this install")
    conf.add_argument("--warehouse", help="use the embedded SQLite catalog in this folder")
    conf.add_argument("--catalog", default="lake", help="the Spark catalog name (default: lake)")
    archive = sub.add_parser("jvm-archive", help="print the JVM options that map the class-data archive (empty when "
                             "not built); spark-sql and spark-submit take them as --driver-java-options")
    archive.add_argument("--build", action="store_true", help="build the archive first when missing (~40 s)")
    inspect = sub.add_parser("inspect", help="print a table's layout and health (from its metadata)")
    inspect.add_argument("table", help="catalog.namespace.table, e.g. lake.db.events")
    inspect.add_argument("--column", action="append", default=[], help="show per-file [min, max] and skipping (repeat)")
    inspect.add_argument("--plot", help="draw the first two columns' per-file [min, max] boxes into this PNG (extra: plot)")
    inspect.add_argument("--warehouse", help="the embedded SQLite catalog in this folder (default: ./warehouse)")
    inspect.add_argument("--catalog-property", action="append", default=[], metavar="K=V",
                         help="a pyiceberg catalog property, instead of --warehouse (repeat)")
    args = parser.parse_args(argv)
    try:
        if args.command == "inspect":
            return _inspect(args)
        if args.command == "jvm-archive":
            return _jvm_archive(args.build)
        if args.command == "jar":
            print(lakerules.jar_path())
        else:
            settings = lakerules.spark_conf(args.warehouse, args.catalog)
            jar = settings.pop("spark.jars")
            # The interpreter a JVM driver (spark-sql, a Java app) starts the rule registry with.
            settings[shared.PYTHON_SETTING] = sys.executable
            flags = ["--jars", jar] + [f"--conf {shlex.quote(f'{k}={v}')}" for k, v in settings.items()]
            print(" ".join(flags))
    except lakerules.LakeError as e:
        print(e, file=sys.stderr)
        return 1
    return 0


def _jvm_archive(build: bool) -> int:
    from lakerules import jvm_archive

    if build:
        archive, why = jvm_archive.build()
        if archive is None:
            print(f"lakerules: no class-data archive built ({why}); Spark JVMs start without one", file=sys.stderr)
            return 1
    print(jvm_archive.options())
    return 0


def _inspect(args) -> int:
    if args.warehouse and args.catalog_property:
        raise lakerules.LakeError("lakerules inspect: give --warehouse or --catalog-property, not both")
    if args.catalog_property:
        props = {}
        for kv in args.catalog_property:
            k, sep, v = kv.partition("=")
            if not sep or not k:
                raise lakerules.LakeError(f"lakerules inspect: --catalog-property takes K=V, not {kv!r}")
            props[k] = v
    else:
        warehouse = Path(args.warehouse or "./warehouse")
        if not (warehouse / "catalog.db").is_file():
            raise lakerules.LakeError(f"lakerules inspect: no embedded catalog at {warehouse}/catalog.db "
                                      "(give --warehouse, or --catalog-property for another catalog)")
        props = lakerules.embedded_catalog(warehouse)
    h = lakerules.inspect(args.table, args.column, catalog_properties=props)
    print(h)  # the layout stands on its own: printed whether or not the plot can be drawn
    if args.plot:
        from lakerules.metadata import health

        health.plot(h, args.plot)
        print(f"plot: {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
