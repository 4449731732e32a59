"""The contract: the hardware catalog, what a problem and a plan are, and what makes a plan valid.

Imports nothing else of capplan. :mod:`capplan.model.validate` is the independent validator: the one
deliberate second copy of the planning rules, written without planner code.
"""
