#!/usr/bin/env bash
# Upload a batch file, create a batch, poll it with progress, download the results.
# Usage: examples/submit_and_poll.sh [input.jsonl] [endpoint]
#        examples/submit_and_poll.sh --inline        (the inline form: prompts in the create body)
# Env:   BASE_URL (default http://localhost:8000), OPENAI_API_KEY (sent as a Bearer key when set),
#        POLL_SECONDS (default 1), TIMEOUT_SECONDS (default 600), OUT_DIR (default .)
set -euo pipefail

BASE_URL="${BASE_URL:-http://localhost:8000}"
POLL_SECONDS="${POLL_SECONDS:-1}"
TIMEOUT_SECONDS="${TIMEOUT_SECONDS:-600}"
OUT_DIR="${OUT_DIR:-.}"
here="$(cd "$(dirname "$0")" && pwd)"

auth=()
if [[ -n "${OPENAI_API_KEY:-}" ]]; then auth=(-H "Authorization: Bearer ${OPENAI_API_KEY}"); fi

die() { echo "error: $*" >&2; exit 1; }
# Pull one top-level field out of a JSON object without needing jq.
# Reads nothing when the call before it failed (it already said why): then it exits quietly.
field() { node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{if(!s.trim())process.exit(1);let v;try{v=JSON.parse(s)[process.argv[1]]}catch{console.error("error: the service answered something that is not JSON");process.exit(1)}console.log(typeof v==="object"?JSON.stringify(v):v)})' "$1"; }
call() { # method path [curl args...] -> body on stdout; fails on HTTP >= 400
  local method="$1" path="$2"; shift 2
  local out status
  out="$(curl -sS -X "$method" "${auth[@]}" -w '\n%{http_code}' "$@" "${BASE_URL}${path}")" || die "cannot reach ${BASE_URL}"
  status="${out##*$'\n'}"; out="${out%$'\n'*}"
  [[ "$status" -lt 400 ]] || die "$method $path -> HTTP $status: $out"
  printf '%s' "$out"
}

if [[ "${1:-}" == "--inline" ]]; then
  batch="$(call POST /v1/batches -H 'Content-Type: application/json' \
    -d '{"model":"Qwen/Qwen2.5-0.5B-Instruct","input":[{"prompt":"What is 2+2?"},{"prompt":"Hello world"}],"max_tokens":50}')"
else
  input="${1:-$here/sample_batch.jsonl}"
  endpoint="${2:-/v1/chat/completions}"
  [[ -f "$input" ]] || die "no such file: $input"
  file_id="$(call POST /v1/files -F purpose=batch -F "file=@${input}" | field id)"
  echo "uploaded $input as $file_id"
  batch="$(call POST /v1/batches -H 'Content-Type: application/json' \
    -d "{\"input_file_id\":\"${file_id}\",\"endpoint\":\"${endpoint}\",\"completion_window\":\"24h\"}")"
fi
batch_id="$(printf '%s' "$batch" | field id)"
echo "created $batch_id (deadline_at $(printf '%s' "$batch" | field deadline_at))"

start=$(date +%s)
while :; do
  batch="$(call GET "/v1/batches/${batch_id}")"
  status="$(printf '%s' "$batch" | field status)"
  counts="$(printf '%s' "$batch" | field request_counts)"
  echo "status=$status request_counts=$counts pool=$(printf '%s' "$batch" | field pool)"
  case "$status" in
    completed|failed|expired|cancelled) break ;;
  esac
  (( $(date +%s) - start < TIMEOUT_SECONDS )) || die "timed out after ${TIMEOUT_SECONDS}s"
  sleep "$POLL_SECONDS"
done

output_id="$(printf '%s' "$batch" | field output_file_id)"
error_id="$(printf '%s' "$batch" | field error_file_id)"
if [[ "$output_id" != "null" ]]; then
  call GET "/v1/files/${output_id}/content" > "${OUT_DIR}/${batch_id}_output.jsonl"
  echo "results: ${OUT_DIR}/${batch_id}_output.jsonl ($(wc -l < "${OUT_DIR}/${batch_id}_output.jsonl") lines)"
fi
if [[ "$error_id" != "null" ]]; then
  call GET "/v1/files/${error_id}/content" > "${OUT_DIR}/${batch_id}_errors.jsonl"
  echo "errors:  ${OUT_DIR}/${batch_id}_errors.jsonl"
fi
[[ "$status" == "completed" ]] || die "batch ended $status: $(printf '%s' "$batch" | field errors)"
