"""Command line: ``python -m workbook export NB [--tests] [-o FILE]``, ``progress``, ``first``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from workbook.shared.errors import WorkbookError
from workbook.shared.export import export_source, export_tests


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m workbook")
    commands = parser.add_subparsers(dest="command", required=True)
    export = commands.add_parser("export", help="write a notebook's setup and answer cells")
    export.add_argument("notebook", type=Path)
    export.add_argument("-o", "--output", type=Path, help="file to write (default: stdout)")
    export.add_argument(
        "--tests",
        action="store_true",
        help="write the cells tagged test instead, as a module that imports `submission`",
    )
    commands.add_parser(
        "progress", help="per build, how many checks your saved notebooks pass, and what is next"
    )
    commands.add_parser("first", help="print the first notebook of the arc that exists")
    commands.add_parser(
        "lab",
        help="start JupyterLab on the notebook after your last finished build (or reuse this"
        " repository's running server) and print its URL",
    )
    reset_cmd = commands.add_parser("reset", help="restore a build's stubs (yours are backed up)")
    reset_cmd.add_argument("build", nargs="?", help="the build's number, e.g. 03")
    args = parser.parse_args(argv)
    try:
        if args.command == "export":
            text = (export_tests if args.tests else export_source)(args.notebook)
            if args.output:
                args.output.write_text(text, encoding="utf-8")
            else:
                sys.stdout.write(text)
            return 0
        if args.command == "progress":
            from workbook.commands.progress import main as progress

            return progress()
        if args.command == "lab":
            from workbook.commands.lab import main as lab

            return lab()
        if args.command == "reset":
            from workbook.commands.reset import reset

            return reset(args.build)
        if args.command == "first":
            from workbook.shared.manifest import load_manifest

            entry = load_manifest().first_existing()
            if entry is None:
                print("no notebook of the manifest exists yet", file=sys.stderr)
                return 1
            print(entry.path)
            return 0
    except WorkbookError as exc:
        print(exc, file=sys.stderr)
        return 2
    return 2


if __name__ == "__main__":
    sys.exit(main())
