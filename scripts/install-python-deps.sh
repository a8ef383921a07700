#!/usr/bin/env bash
# Installs the Python modules the tests import that Debian bookworm does not package, with pip for the python3 the
# tests run (the first on PATH), when one is missing. Idempotent and quiet when everything is there.
#   openapi_spec_validator — openapi_validate.py validates docs/openapi.yaml itself with it
set -euo pipefail
modules=(openapi_spec_validator)
packages=(openapi-spec-validator)
missing=()
for i in "${!modules[@]}"; do
    python3 -c "import ${modules[$i]}" 2>/dev/null || missing+=("${packages[$i]}")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "installing missing Python packages: ${missing[*]}"
# Debian's python3 is "externally managed" (PEP 668): a user install, outside Debian's own directories.
python3 -m pip install --quiet --user --break-system-packages "${missing[@]}" 2>/dev/null \
    || python3 -m pip install --quiet --user "${missing[@]}"
