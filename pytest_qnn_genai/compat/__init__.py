"""Work-arounds for upstream packaging problems, each applied only where it is needed."""
