"""REST routes, one module per resource."""
