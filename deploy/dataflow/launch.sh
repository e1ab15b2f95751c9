#!/usr/bin/env bash
# Build and launch the evidex Dataflow Flex Template.
#
#   deploy/dataflow/launch.sh image      build and push the evidex image (deploy/Dockerfile)
#   deploy/dataflow/launch.sh template   write the template spec (image + metadata.json)
#   deploy/dataflow/launch.sh run        launch one build job from the template
#
# Environment: PROJECT, REGION, BUCKET (required); IMAGE, TEMPLATE, INPUT, ROOT,
# MACHINE_TYPE, MAX_WORKERS, EXTRA_PARAMETERS (comma-separated name=value pairs, e.g.
# the GPU service options in docs/runners.md).
#
# Prepared, not run here (no cloud project). ROOT is a gs:// URL: workers write the
# staged bundle there and the launcher publishes it (docs/runners.md, "Object-store
# bundle roots").
set -euo pipefail

usage() {
    sed -n '2,6p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
}

: "${PROJECT:?set PROJECT}" "${REGION:?set REGION}" "${BUCKET:?set BUCKET}"
IMAGE="${IMAGE:-${REGION}-docker.pkg.dev/${PROJECT}/evidex/evidex:0.1.0}"
TEMPLATE="${TEMPLATE:-gs://${BUCKET}/templates/evidex-build.json}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "${here}/../.." && pwd)"

case "${1:-}" in
    image)
        docker build -f "${repo}/deploy/Dockerfile" -t "${IMAGE}" "${repo}"
        docker push "${IMAGE}"
        ;;
    template)
        gcloud dataflow flex-template build "${TEMPLATE}" \
            --project "${PROJECT}" \
            --image "${IMAGE}" \
            --sdk-language PYTHON \
            --metadata-file "${here}/metadata.json"
        ;;
    run)
        : "${INPUT:?set INPUT, e.g. gs://bucket/corpus/}" "${ROOT:?set ROOT, the bundle root, e.g. gs://bucket/evidex}"
        # Workers run the same image, so evidex is already installed there: no
        # --setup_file staging at worker start-up.
        parameters="input=${INPUT},root=${ROOT},sdk_container_image=${IMAGE}"
        if [[ -n "${EXTRA_PARAMETERS:-}" ]]; then
            parameters="${parameters},${EXTRA_PARAMETERS}"
        fi
        gcloud dataflow flex-template run "evidex-build-$(date -u +%Y%m%d-%H%M%S)" \
            --project "${PROJECT}" \
            --region "${REGION}" \
            --template-file-gcs-location "${TEMPLATE}" \
            --temp-location "gs://${BUCKET}/tmp" \
            --staging-location "gs://${BUCKET}/staging" \
            --worker-machine-type "${MACHINE_TYPE:-n2-highmem-4}" \
            --max-workers "${MAX_WORKERS:-8}" \
            --parameters "${parameters}"
        ;;
    *)
        usage
        exit 2
        ;;
esac
