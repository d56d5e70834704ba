"""`mcflops validate` (each prior file checked, one line of what it resolves to) and `mcflops schema`
(the JSON Schema of prior files, for editors). Neither samples: no JAX."""

from __future__ import annotations

import json


def command(args) -> int:
    if args.command == "schema":
        from mcflops.spec.schema import json_schema

        print(json.dumps(json_schema(), indent=2))
        return 0
    from mcflops.spec import load_spec  # checks every block of the file

    for f in args.file:
        spec = load_spec(f)
        print(f"{f}: ok: {spec.name}, {len(spec.uncertain)} uncertain inputs "
              f"({', '.join(spec.uncertain)}), observes {', '.join(spec.observe) or 'nothing'}")
    return 0

