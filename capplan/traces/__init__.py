"""Trace loaders: real cluster traces turned into ordinary capplan problems at the edge."""
