"""`mcflops validate` (every prior file given checked, one line each: what it resolves to and its notes,
or what is wrong) and `mcflops schema` (the JSON Schema of prior files, for editors). Neither samples: no JAX."""

from __future__ import annotations

import json
import sys

from mcflops.cli.args import EXIT_BAD_INPUT
from mcflops.errors import SpecError


def command(args) -> int:
    if args.command == "schema":
        from mcflops.spec.schema import json_schema

        print(json.dumps(json_schema(), indent=2))
        return 0
    from mcflops.spec import load_spec  # checks every block of the file

    bad = 0
    for f in args.file:  # every file, so that one run lists every bad one
        try:
            spec = load_spec(f)
        except SpecError as e:
            print(f"mcflops: {e}", file=sys.stderr)
            bad += 1
            continue
        print(f"{f}: ok: {spec.name}, {len(spec.uncertain)} uncertain inputs "
              f"({', '.join(spec.uncertain)}), observes {', '.join(spec.observe) or 'nothing'}")
    return EXIT_BAD_INPUT if bad else 0
