"""The projector and its read models: one module per projection."""
