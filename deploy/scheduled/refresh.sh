#!/usr/bin/env bash
# Scheduled refresh: build -> validate -> activate, stopping at the first failure.
#
# Only the bundle this run built is validated, and it is activated only after its
# validation passed, as a compare-and-swap against the ACTIVE bundle seen before the
# build (a rollback made meanwhile is never overwritten). Any failed step exits
# non-zero and leaves ACTIVE as it was. Used by the crontab line next to this file,
# the Kubernetes CronJob and the Flink submit Job.
#
# Environment:
#   EVIDEX_HOME        bundle root (required); shared by every machine of the build
#   EVIDEX_INPUT       corpus to build: path, glob or URL (required)
#   EVIDEX_BIN         evidex executable (default: evidex on PATH)
#   EVIDEX_PYTHON      Python used to read the JSON output (default: python3)
#   EVIDEX_BUILD_ARGS  extra build flags, split on spaces: Beam runner flags and the
#                      like, e.g. "--runner PortableRunner --job_endpoint host:8099"
set -euo pipefail

: "${EVIDEX_HOME:?set EVIDEX_HOME to the bundle root}"
: "${EVIDEX_INPUT:?set EVIDEX_INPUT to the corpus}"
export EVIDEX_HOME
evidex="${EVIDEX_BIN:-evidex}"
python="${EVIDEX_PYTHON:-python3}"

log() {
    printf '%s evidex-refresh: %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$*" >&2
}

json_field() {  # json_field KEY < JSON -> the value ('' for null)
    "${python}" -c 'import json, sys; v = json.load(sys.stdin)[sys.argv[1]]; print("" if v is None else v)' "$1"
}

previous="$("${evidex}" status --json | json_field active)"
log "building ${EVIDEX_INPUT} into ${EVIDEX_HOME} (active: ${previous:-none})"
read -r -a build_args <<<"${EVIDEX_BUILD_ARGS:-}"
build_json="$("${evidex}" build --input "${EVIDEX_INPUT}" --json "${build_args[@]}")"
bundle_id="$(json_field bundle_id <<<"${build_json}")"

log "built ${bundle_id}; validating"
"${evidex}" validate "${bundle_id}"

log "validation passed; activating ${bundle_id}"
"${evidex}" activate "${bundle_id}" --expect "${previous}"
log "active bundle: ${bundle_id}"
