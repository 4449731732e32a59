"""What every placement strategy shares: settings, occupancy state, reasons, summary, bounds,
sub-problems and executors. Imports only :mod:`capplan.model`.
"""
