"""End-to-end build flows (each one a way of turning a model case into a .pte)."""
