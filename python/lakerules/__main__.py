"""python -m lakerules jar | conf [--warehouse W] [--catalog NAME]"""

from __future__ import annotations

import argparse
import shlex
import sys

import lakerules


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lakerules")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("jar", help="print the path of the shim jar")
    conf = sub.add_parser("conf", help="print the spark-submit flags for this install")
    conf.add_argument("--warehouse", help="use the embedded SQLite catalog in this folder")
    conf.add_argument("--catalog", default="lake", help="the Spark catalog name (default: lake)")
    args = parser.parse_args(argv)
    try:
        if args.command == "jar":
            print(lakerules.jar_path())
        else:
            settings = lakerules.spark_conf(args.warehouse, args.catalog)
            jar = settings.pop("spark.jars")
            # The interpreter a JVM driver (spark-sql, a Java app) starts the rule registry with.
            settings["spark.lakerules.python"] = sys.executable
            flags = ["--jars", jar] + [f"--conf {shlex.quote(f'{k}={v}')}" for k, v in settings.items()]
            print(" ".join(flags))
    except lakerules.LakeError as e:
        print(e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
