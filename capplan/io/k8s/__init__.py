"""Kubernetes integration: import a live cluster as a scenario, export plans the ecosystem applies.

* :mod:`capplan.io.k8s.nodes` reads ``kubectl get nodes -o json`` (GPU Feature Discovery and AMD
  node-labeller labels, MIG strategy, allocatable CPU and memory); :mod:`capplan.io.k8s.domains`
  turns topology labels into domains.
* :mod:`capplan.io.k8s.pods` and :mod:`capplan.io.k8s.gangs` read ``kubectl get pods -A -o json``
  (plus training-job, TrainJob and runtime, PodGroup, Kueue Workload and PriorityClass objects) into
  workloads and running replicas; :mod:`capplan.io.k8s.trainjob` applies a TrainJob's runtime defaults.
* :mod:`capplan.io.k8s.importer` joins both into a :class:`~capplan.model.problem.Problem`.
* :mod:`capplan.io.k8s.export` writes nvidia-mig-parted configurations (optionally merged into a base),
  node-label and Pod-patch Lists and the actions document; :mod:`capplan.io.k8s.topology` writes Kueue
  Topology/ResourceFlavor and Volcano HyperNode objects per target release, named by
  :mod:`capplan.io.k8s.names`.

See ``docs/kubernetes.md`` for the mapping tables.
"""
