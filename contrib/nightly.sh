#!/bin/sh
# Nightly capacity plan: import the live cluster, then plan it and the what-if overlays.
# Install as /opt/capplan/nightly.sh; crontab (docs/cron.md):
#   15 2 * * * flock -n /run/capplan.lock /opt/capplan/nightly.sh || logger -t capplan "nightly plan failed, see /var/log/capplan"
# What-ifs are overlays on tonight's import (`base: /var/lib/capplan/live.yaml` plus edits), so they follow it.
set -u
state=${CAPPLAN_STATE:-/var/lib/capplan}        # one folder per day, and live.yaml -> the latest import
logs=${CAPPLAN_LOGS:-/var/log/capplan}
whatif=${CAPPLAN_WHATIF:-/etc/capplan/what-if}  # *.yaml: overlays or full scenarios
day=$(date +%F)
out=$state/$day
log=$logs/$day.log
mkdir -p "$out" "$logs" || exit 2
{
  kubectl get nodes -o json > "$out/nodes.json" &&
  kubectl get pods,priorityclasses -A -o json > "$out/pods.json" || exit 2
  for r in pytorchjobs.kubeflow.org trainjobs.trainer.kubeflow.org clustertrainingruntimes.trainer.kubeflow.org \
           podgroups.scheduling.volcano.sh workloads.kueue.x-k8s.io; do   # optional CRDs: one call each
    kubectl get "$r" -A -o json > "$out/crd-$r.json" 2>/dev/null || rm -f "$out/crd-$r.json"
  done
  # shellcheck disable=SC2046  # one --pods FILE pair per CRD export
  capplan import kubernetes --nodes "$out/nodes.json" --pods "$out/pods.json" \
      $(for f in "$out"/crd-*.json; do [ -e "$f" ] && echo --pods "$f"; done) \
      --level-label block=cloud.provider.com/topology-block \
      --level-label rack=cloud.provider.com/topology-rack -o "$out/live.yaml" || exit 2
  ln -sfn "$out/live.yaml" "$state/live.yaml"    # what the overlays name as their base
  set -- "$out/live.yaml"
  for f in "$whatif"/*.yaml; do [ -e "$f" ] && set -- "$@" "$f"; done
  capplan sweep "$@" -o "$out/plans" --strategy auto --time-limit 300 --jobs 2
  code=$?
  echo "capplan sweep exit code $code"
  [ "$code" -eq 0 ] || [ "$code" -eq 3 ]   # 3: plans written, some guaranteed work does not fit
} >> "$log" 2>&1
