#!/usr/bin/env python3
"""Inlines the ECAPI event schema into packages/server/openapi.yaml (run after changing the schema).

The OpenAPI document is published self-contained: components.schemas holds the $defs of
packages/protocol/schema/ecapi-event.schema.json with `#/$defs/X` rewritten to
`#/components/schemas/X`. Everything after the marker comment in openapi.yaml is replaced.
packages/server/test/contract/openapi-document.test.ts fails when the two differ.
Needs PyYAML (Debian: python3-yaml).
"""
import json
import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = ROOT / 'packages/protocol/schema/ecapi-event.schema.json'
DOCUMENT = ROOT / 'packages/server/openapi.yaml'
MARKER = '    # ---- ECAPI 1.0 event:'


def rewrite(node):
    if isinstance(node, dict):
        return {k: (re.sub(r'^#/\$defs/', '#/components/schemas/', v) if k == '$ref' else rewrite(v)) for k, v in node.items()}
    if isinstance(node, list):
        return [rewrite(v) for v in node]
    return node


defs = {name: rewrite(schema) for name, schema in json.loads(SCHEMA.read_text())['$defs'].items()}
body = yaml.safe_dump(defs, sort_keys=False, allow_unicode=True, width=120, default_flow_style=False)
body = '\n'.join(('    ' + line) if line else line for line in body.split('\n')).rstrip() + '\n'
text = DOCUMENT.read_text()
head = text[: text.index(MARKER)]
marker = (
    MARKER + ' the $defs of @ecapi-ingest/protocol/schema/ecapi-event.schema.json, inlined\n'
    '    # (#/$defs/X -> #/components/schemas/X). Regenerate with scripts/inline-event-schema.py;\n'
    '    # test/contract/openapi-document.test.ts fails when the two differ.\n'
)
DOCUMENT.write_text(head + marker + body)
