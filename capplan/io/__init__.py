"""The edge: formats in and out (scenario files, traces, Kubernetes exports and imports).

Absolute imports keep the standard library's :mod:`io` reachable inside capplan.
"""
