#!/usr/bin/env python3
"""Validates recorded admin API responses against docs/openapi.yaml (run by OpenAPIValidationTests).

usage: openapi_validate.py SPEC RECORDS.json
RECORDS is a list of {"path": "/items/{id}", "method": "get", "status": 200, "body": <json or null>}
or {"schema": "StateEvent", "body": <json>} for event payloads. Exits 1 listing every mismatch.
"""
import json
import sys

import yaml
from jsonschema import Draft202012Validator, FormatChecker


def main():
    spec_path, records_path = sys.argv[1], sys.argv[2]
    with open(spec_path) as f:
        spec = yaml.safe_load(f)
    # The document itself first: a missing validator is a failure, not a pass (`make test-deps` installs it).
    try:
        from openapi_spec_validator import validate as validate_spec
    except ImportError:
        print("openapi_spec_validator is missing: run `make test-deps` (pip install openapi-spec-validator)")
        sys.exit(1)
    validate_spec(spec)
    with open(records_path) as f:
        records = json.load(f)

    def node_ref(ref):
        return ref.lstrip("#/").split("/")

    failures = []
    for number, record in enumerate(records):
        where = f"#{number} {record.get('method', '')} {record.get('path', record.get('schema'))} {record.get('status', '')}"
        if "schema" in record:
            schema_ref = "#/components/schemas/" + record["schema"]
        else:
            operation = spec["paths"].get(record["path"], {}).get(record["method"])
            if operation is None:
                failures.append(f"{where}: operation not documented")
                continue
            response = operation["responses"].get(str(record["status"]))
            if response is None:
                failures.append(f"{where}: status not documented")
                continue
            if "$ref" in response:
                node = spec
                for part in node_ref(response["$ref"]):
                    node = node[part]
                response = node
            content = response.get("content")
            if content is None:
                if record["body"] is not None:
                    failures.append(f"{where}: documented without a body, got {record['body']!r}")
                continue
            media = content.get("application/json")
            if media is None:
                continue
            schema = media["schema"]
            schema_ref = schema.get("$ref")
            if schema_ref is None:
                root = dict(schema)
                root["components"] = spec["components"]
                errors = list(Draft202012Validator(root, format_checker=FormatChecker()).iter_errors(record["body"]))
                failures += [f"{where}: {e.message} at {list(e.absolute_path)}" for e in errors]
                continue
        root = {"$ref": schema_ref, "components": spec["components"]}
        errors = list(Draft202012Validator(root, format_checker=FormatChecker()).iter_errors(record["body"]))
        failures += [f"{where}: {e.message} at {list(e.absolute_path)}" for e in errors]
    for failure in failures:
        print(failure)
    print(f"{len(records)} responses checked, {len(failures)} mismatches")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
