"""The Cockpit read API under /api/v1: one module per resource."""
