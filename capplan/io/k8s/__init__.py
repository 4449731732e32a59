"""Kubernetes integration: import a live cluster as a scenario, export plans the ecosystem applies.

* :mod:`capplan.io.k8s.nodes` reads ``kubectl get nodes -o json`` (GPU Feature Discovery and AMD
  node-labeller labels, allocatable CPU and memory, topology labels).
* :mod:`capplan.io.k8s.pods` reads ``kubectl get pods -A -o json`` (plus training-job, PodGroup,
  Kueue Workload and PriorityClass objects in the same List) into workloads and running replicas.
* :mod:`capplan.io.k8s.importer` joins both into a :class:`~capplan.model.problem.Problem`.
* :mod:`capplan.io.k8s.export` writes nvidia-mig-parted configurations, node bindings and evictions;
  :mod:`capplan.io.k8s.topology` writes Kueue Topology/ResourceFlavor and Volcano HyperNode objects.

See ``docs/kubernetes.md`` for the mapping tables.
"""
